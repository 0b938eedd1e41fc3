// Package waittest is the test of waiting claims ([spent.Claim].Wait) that
// every store runs: the first request claims on one ledger, a second request
// waits on another ledger over the same store's data (two servers sharing a
// shared store; the embedded store has one ledger, which plays both parts),
// and the first completes, releases or crashes. It is for tests only.
//
// In the common case a store's test calls Run with a function that opens
// its store twice on the same data:
//
//	waittest.Run(t, func(t *testing.T) (a, b spent.Store) { ... })
package waittest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// Namespaces of the tests.
const (
	NSRetake = "wait-retake" // echo, retake after a long lease
	NSHold   = "wait-hold"   // echo, hold after a long lease
	NSShortR = "wait-short-retake"
	NSShortH = "wait-short-hold"
)

// ShortLease is the lease of the short namespaces, where a waiter sees a
// crashed first request's lease run out.
const ShortLease = 600 * time.Millisecond

// Tries is how many times the latency is measured; MaxMedian the median
// past which the latency test fails.
const (
	Tries     = 7
	MaxMedian = 100 * time.Millisecond
)

var secret = []byte("waittest secret, at least 32 bytes long")

// Config returns the configuration of the ledger of node.
func Config(node uint32) spent.Config {
	cfg := spent.DefaultConfig()
	cfg.Secret = secret
	cfg.Node = node
	cfg.Namespaces = map[string]spent.Policy{
		NSRetake: {Mode: spent.ModeEcho, Retention: time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryRetake},
		NSHold:   {Mode: spent.ModeEcho, Retention: time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold},
		NSShortR: {Mode: spent.ModeEcho, Retention: time.Hour, Lease: ShortLease, OnLeaseExpiry: spent.LeaseExpiryRetake},
		NSShortH: {Mode: spent.ModeEcho, Retention: time.Hour, Lease: ShortLease, OnLeaseExpiry: spent.LeaseExpiryHold},
	}
	return cfg
}

// Ledgers returns ledger A over a and ledger B over b; when a and b are the
// same store, B is A (an embedded store has one ledger).
func Ledgers(t *testing.T, a, b spent.Store) (la, lb *spent.Ledger) {
	t.Helper()
	ctx := context.Background()
	la, err := spent.NewLedger(ctx, a, Config(1))
	if err != nil {
		t.Fatalf("NewLedger A: %v", err)
	}
	t.Cleanup(la.StopWaiting)
	if a == b {
		return la, la
	}
	lb, err = spent.NewLedger(ctx, b, Config(2))
	if err != nil {
		t.Fatalf("NewLedger B: %v", err)
	}
	t.Cleanup(lb.StopWaiting)
	return la, lb
}

// Run runs the wait tests. open returns two stores over the same data,
// closed by the test's cleanup: for a shared store, two stores opened on the
// same server (as two spent servers would); for an embedded one, the same
// store twice.
func Run(t *testing.T, open func(t *testing.T) (a, b spent.Store)) {
	t.Run("CompletedWaiterReplayed", func(t *testing.T) { testLatency(t, open) })
	t.Run("ReleasedWaiterFresh", func(t *testing.T) { testReleased(t, open) })
	t.Run("CrashHoldUnknown", func(t *testing.T) { testCrash(t, open, NSShortH) })
	t.Run("CrashRetakeFresh", func(t *testing.T) { testCrash(t, open, NSShortR) })
	t.Run("WaitRunsOut", func(t *testing.T) { testRunsOut(t, open) })
}

// waited is the answer of a waiting claim and when it came.
type waited struct {
	a   spent.Answer
	err error
	at  time.Time
}

// wait starts a claim of key on l with wait d, and returns once it is
// registered as a waiter (it may still be making its first look).
func wait(t *testing.T, l *spent.Ledger, ns, key string, d time.Duration) <-chan waited {
	t.Helper()
	before := l.Waiting()
	out := make(chan waited, 1)
	go func() {
		a, err := l.Claim(context.Background(), spent.Claim{Namespace: ns, Key: key, Wait: d})
		out <- waited{a, err, time.Now()}
	}()
	for deadline := time.Now().Add(10 * time.Second); l.Waiting() <= before; {
		if time.Now().After(deadline) {
			t.Fatalf("claim of %q never began to wait", key)
		}
		time.Sleep(time.Millisecond)
	}
	// Give the waiter time for its first look, so that what is measured
	// is the wake-up: nothing below depends on it.
	time.Sleep(30 * time.Millisecond)
	return out
}

func claimFresh(t *testing.T, l *spent.Ledger, ns, key string) spent.Answer {
	t.Helper()
	a, err := l.Claim(context.Background(), spent.Claim{Namespace: ns, Key: key})
	if err != nil || a.Outcome != spent.Fresh {
		t.Fatalf("claim %q: got %v, %v; want fresh", key, a.Outcome, err)
	}
	return a
}

func receive(t *testing.T, ch <-chan waited, within time.Duration) waited {
	t.Helper()
	select {
	case w := <-ch:
		return w
	case <-time.After(within):
		t.Fatalf("waiter not answered within %v", within)
		return waited{}
	}
}

// testLatency: a waiter on B is answered, replayed with the first
// request's result, soon after A completes; the median over Tries is
// logged and must be within MaxMedian.
func testLatency(t *testing.T, open func(t *testing.T) (a, b spent.Store)) {
	sa, sb := open(t)
	la, lb := Ledgers(t, sa, sb)
	var lat []time.Duration
	for i := range Tries {
		key := fmt.Sprintf("latency-%d-%d", i, time.Now().UnixNano())
		first := claimFresh(t, la, NSRetake, key)
		ch := wait(t, lb, NSRetake, key, 20*time.Second)
		result := []byte("result " + key)
		start := time.Now()
		if _, err := la.Complete(context.Background(), spent.Completion{Namespace: NSRetake, Key: key, Seq: first.Record.Seq, Result: result}); err != nil {
			t.Fatalf("complete %q: %v", key, err)
		}
		w := receive(t, ch, 15*time.Second)
		if w.err != nil || w.a.Outcome != spent.Replayed || string(w.a.Record.Result) != string(result) || w.a.Record.Seq != first.Record.Seq {
			t.Fatalf("waiter of %q: got %v %q seq %v, %v; want replayed %q seq %v", key, w.a.Outcome, w.a.Record.Result, w.a.Record.Seq, w.err, result, first.Record.Seq)
		}
		lat = append(lat, w.at.Sub(start))
	}
	slices.Sort(lat)
	med := lat[len(lat)/2]
	t.Logf("waiter answered after the completion: median %v over %d tries (min %v, max %v)", med, Tries, lat[0], lat[len(lat)-1])
	if med > MaxMedian {
		t.Errorf("median latency %v: want at most %v", med, MaxMedian)
	}
}

// testReleased: A releases; the waiter on B gets the key (fresh) and
// completes it; a later claim replays B's result.
func testReleased(t *testing.T, open func(t *testing.T) (a, b spent.Store)) {
	sa, sb := open(t)
	la, lb := Ledgers(t, sa, sb)
	key := fmt.Sprintf("released-%d", time.Now().UnixNano())
	first := claimFresh(t, la, NSHold, key)
	ch := wait(t, lb, NSHold, key, 20*time.Second)
	if err := la.Release(context.Background(), spent.Release{Namespace: NSHold, Key: key, Seq: first.Record.Seq}); err != nil {
		t.Fatalf("release: %v", err)
	}
	w := receive(t, ch, 15*time.Second)
	if w.err != nil || w.a.Outcome != spent.Fresh {
		t.Fatalf("waiter: got %v, %v; want fresh", w.a.Outcome, w.err)
	}
	if w.a.Record.Seq == first.Record.Seq {
		t.Fatalf("waiter's record has the first claim's seq %v", first.Record.Seq)
	}
	if _, err := lb.Complete(context.Background(), spent.Completion{Namespace: NSHold, Key: key, Seq: w.a.Record.Seq, Result: []byte("second")}); err != nil {
		t.Fatalf("waiter's complete: %v", err)
	}
	a, err := la.Claim(context.Background(), spent.Claim{Namespace: NSHold, Key: key})
	if err != nil || a.Outcome != spent.Replayed || string(a.Record.Result) != "second" {
		t.Fatalf("claim after: got %v %q, %v; want replayed \"second\"", a.Outcome, a.Record.Result, err)
	}
}

// testCrash: A claims and never ends; the waiter on B is answered when the
// lease runs out: in_progress with Unknown under hold, fresh under retake.
func testCrash(t *testing.T, open func(t *testing.T) (a, b spent.Store), ns string) {
	sa, sb := open(t)
	la, lb := Ledgers(t, sa, sb)
	key := fmt.Sprintf("crash-%d", time.Now().UnixNano())
	first := claimFresh(t, la, ns, key)
	ch := wait(t, lb, ns, key, 20*time.Second)
	w := receive(t, ch, 15*time.Second)
	if w.err != nil {
		t.Fatalf("waiter: %v", w.err)
	}
	if lease := first.Record.LeaseUntil; w.at.Before(lease.Add(-50 * time.Millisecond)) {
		t.Fatalf("waiter answered at %v, before the lease ran out at %v", w.at, lease)
	}
	if ns == NSShortH {
		if w.a.Outcome != spent.InProgress || !w.a.Unknown || w.a.Record.Seq != first.Record.Seq {
			t.Fatalf("hold: got %v unknown=%v seq %v; want in_progress unknown seq %v", w.a.Outcome, w.a.Unknown, w.a.Record.Seq, first.Record.Seq)
		}
		return
	}
	if w.a.Outcome != spent.Fresh || w.a.Record.Seq == first.Record.Seq {
		t.Fatalf("retake: got %v seq %v; want fresh with a new seq", w.a.Outcome, w.a.Record.Seq)
	}
	if _, err := lb.Complete(context.Background(), spent.Completion{Namespace: ns, Key: key, Seq: w.a.Record.Seq, Result: []byte("retaken")}); err != nil {
		t.Fatalf("retaker's complete: %v", err)
	}
}

// testRunsOut: with nothing ending the key, the waiter answers in_progress
// with the lease's time left once its wait has run out.
func testRunsOut(t *testing.T, open func(t *testing.T) (a, b spent.Store)) {
	sa, sb := open(t)
	la, lb := Ledgers(t, sa, sb)
	key := fmt.Sprintf("runs-out-%d", time.Now().UnixNano())
	claimFresh(t, la, NSRetake, key)
	const d = 300 * time.Millisecond
	start := time.Now()
	a, err := lb.Claim(context.Background(), spent.Claim{Namespace: NSRetake, Key: key, Wait: d})
	if el := time.Since(start); err != nil || a.Outcome != spent.InProgress || a.Unknown || a.RetryAfter <= 0 || el < d {
		t.Fatalf("got %v unknown=%v retry_after %v after %v, %v; want in_progress with retry_after after at least %v", a.Outcome, a.Unknown, a.RetryAfter, el, err, d)
	}
	if n := lb.Waiting(); n != 0 {
		t.Fatalf("%d waiters left registered", n)
	}
}
