// Package barepebble opens the bare Pebble database that benchmarks compare
// the embedded store with: the engine alone, with the store's block cache
// and memtable sizes and none of its own machinery (no rounds, no filter,
// no zero-filled WAL). It is for tests and benchmarks only.
package barepebble

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent/pebble"
)

// Open opens a new database in a temporary directory of tb, closed when tb
// ends. Pebble's informational messages are dropped and its errors go to
// standard error.
func Open(tb testing.TB) *pdb.DB {
	tb.Helper()
	o := pebble.DefaultOptions()
	db, err := pdb.Open(filepath.Join(tb.TempDir(), "bare"), &pdb.Options{
		CacheSize: o.CacheSize, MemTableSize: o.MemTableSize, FormatMajorVersion: pdb.FormatNewest,
		Logger: quiet{},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// quiet drops Pebble's informational messages.
type quiet struct{}

func (quiet) Infof(string, ...any) {}

func (quiet) Errorf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func (quiet) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
