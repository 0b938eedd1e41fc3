package barepebble_test

import (
	"testing"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent/internal/barepebble"
	"github.com/spentledger/spent/pebble"
)

// TestOpen writes a synced key and reads it back, and checks the database
// has the store's memtable size.
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
	if got, want := db.Metrics().MemTable.Size, pebble.DefaultOptions().MemTableSize; got == 0 || got > want {
		t.Errorf("memtable size %d, want at most %d and above zero", got, want)
	}
}
