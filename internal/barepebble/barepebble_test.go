package barepebble_test

import (
	"testing"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent/internal/barepebble"
)

// TestOpen writes a synced key and reads it back.
func TestOpen(t *testing.T) {
	db := barepebble.Open(t)
	if err := db.Set([]byte("k"), []byte("v"), pdb.Sync); err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.Get([]byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	if string(v) != "v" {
		t.Errorf("got %q, want %q", v, "v")
	}
	closer.Close()
}

// TestSetClaim writes one claim with the record alone and one with its
// index entries, into a database of ClaimOptions, and counts the keys: 1
// and 3, the record under 'r' and the hash.
func TestSetClaim(t *testing.T) {
	db, err := pdb.Open(t.TempDir(), barepebble.ClaimOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, all := range []bool{false, true} {
		h := [32]byte{byte(i + 1)}
		b := db.NewBatch()
		if err := barepebble.SetClaim(b, &h, time.Now().Add(time.Hour), uint64(i+1), all); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(pdb.Sync); err != nil {
			t.Fatal(err)
		}
		if _, closer, err := db.Get(append([]byte{'r'}, h[:]...)); err != nil {
			t.Errorf("the record of claim %d: %v", i, err)
		} else {
			closer.Close()
		}
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	it.Close()
	if n != 4 {
		t.Errorf("%d keys, want 4: 1 for the record alone, 3 for the record with its index entries", n)
	}
}
