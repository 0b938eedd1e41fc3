package barepebble_test

import (
	"testing"

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
