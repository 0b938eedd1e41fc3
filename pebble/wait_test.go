package pebble_test

import (
	"testing"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/waittest"
)

// TestWait runs the waiting-claim tests on the embedded store: one ledger,
// which wakes its waiters itself.
func TestWait(t *testing.T) {
	waittest.Run(t, func(t *testing.T) (a, b spent.Store) {
		s := MustOpen(t, t.TempDir())
		return s, s
	})
}
