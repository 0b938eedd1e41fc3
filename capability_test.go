package spent_test

import (
	"context"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/internal/waittest"
)

// loopStore is a wrapper whose Unwrap returns itself: a broken wrapper
// that StoreAs must not follow for ever.
type loopStore struct{ spent.Store }

func (l *loopStore) Unwrap() spent.Store { return l }

// TestStoreAs: StoreAs finds an optional capability on the store itself and
// under any number of wrappers that name the store they wrap, and finds
// none where the chain holds none.
func TestStoreAs(t *testing.T) {
	ws := &watchedStore{Store: inmem.New()}
	for _, tc := range []struct {
		name    string
		s       spent.Store
		watcher bool
		lister  bool
	}{
		{"Itself", ws, true, true},
		{"Wrapped", wrappedStore{ws}, true, true},
		{"WrappedTwice", wrappedStore{wrappedStore{ws}}, true, true},
		{"Hidden", plainStore{ws}, false, false},
		{"WrappedHidden", wrappedStore{plainStore{ws}}, false, false},
		{"WrapperLoops", &loopStore{plainStore{ws}}, false, false},
		{"WrapsNil", wrappedStore{nil}, false, false},
		{"Nil", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ew, ok := spent.StoreAs[spent.EndWatcher](tc.s)
			if ok != tc.watcher || (ok && ew != spent.EndWatcher(ws)) {
				t.Errorf("StoreAs[EndWatcher]: got %v, %v; want found %v", ew, ok, tc.watcher)
			}
			if _, ok := spent.StoreAs[spent.SeqLister](tc.s); ok != tc.lister {
				t.Errorf("StoreAs[SeqLister]: got found %v, want %v", ok, tc.lister)
			}
		})
	}
}

// TestWaitEndWatcherWrapped: a ledger over a wrapper of an EndWatcher (a
// tracing store, say) subscribes to the ends of the store under it at its
// first waiting claim, as it does over the EndWatcher itself.
func TestWaitEndWatcherWrapped(t *testing.T) {
	s := &watchedStore{Store: inmem.New()}
	l, err := spent.NewLedger(context.Background(), wrappedStore{s}, waittest.Config(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.StopWaiting)
	// A waiting claim of a free key subscribes before its first look, and
	// answers fresh at once.
	a, err := l.Claim(context.Background(), spent.Claim{Namespace: waittest.NSRetake, Key: "k", Wait: time.Minute})
	if err != nil || a.Outcome != spent.Fresh {
		t.Fatalf("waiting claim of a free key: got %v, %v; want fresh", a.Outcome, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs != 1 {
		t.Fatalf("got %d subscriptions to the wrapped store's ends, want 1", s.subs)
	}
}
