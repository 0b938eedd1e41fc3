package etcd_test

import (
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/waittest"
)

// TestWaitAcrossServers runs the waiting-claim tests with the claim on one
// store and the waiter on another over the same cluster and prefix, as two
// spent servers would: the waiter learns of the end from its watch of the
// pending index.
func TestWaitAcrossServers(t *testing.T) {
	waittest.Run(t, func(t *testing.T) (a, b spent.Store) {
		prefix := prefixFor(t.Name() + time.Now().String())
		return MustOpen(t, testOptions(t, prefix)), MustOpen(t, testOptions(t, prefix))
	})
}
