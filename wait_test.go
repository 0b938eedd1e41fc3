package spent_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/internal/waittest"
)

// TestWaitInmem runs the waiting-claim tests over the in-memory store.
func TestWaitInmem(t *testing.T) {
	waittest.Run(t, func(t *testing.T) (a, b spent.Store) {
		s := inmem.New()
		t.Cleanup(func() { s.Close() })
		return s, s
	})
}

// waitFixture is a ledger over an inmem store on the real clock, with a
// pending claim of key in namespace ns.
func waitFixture(t *testing.T, ns, key string) (*spent.Ledger, spent.Answer) {
	t.Helper()
	s := inmem.New()
	t.Cleanup(func() { s.Close() })
	l, err := spent.NewLedger(context.Background(), s, waittest.Config(1))
	if err != nil {
		t.Fatal(err)
	}
	first, err := l.Claim(context.Background(), spent.Claim{Namespace: ns, Key: key})
	if err != nil || first.Outcome != spent.Fresh {
		t.Fatalf("first claim: got %v, %v; want fresh", first.Outcome, err)
	}
	return l, first
}

// untilWaiting waits until n claims wait on l.
func untilWaiting(t *testing.T, l *spent.Ledger, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); l.Waiting() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d claims waiting, want %d", l.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWaitRefused(t *testing.T) {
	l, _ := waitFixture(t, waittest.NSRetake, "k")
	for _, d := range []time.Duration{-time.Second, spent.MaxWait + time.Nanosecond} {
		_, err := l.Claim(context.Background(), spent.Claim{Namespace: waittest.NSRetake, Key: "k", Wait: d})
		wantCode(t, "wait "+d.String(), err, spent.EInvalid)
		if !strings.Contains(err.Error(), "wait of") {
			t.Fatalf("wait %v: error %q does not name the wait", d, err)
		}
	}
	if n := l.Waiting(); n != 0 {
		t.Fatalf("%d waiters after refusals, want 0", n)
	}
}

// TestWaitFreeKeyAnswersAtOnce: a wait changes nothing for a free key, a
// complete one, or an unknown outcome.
func TestWaitFreeKeyAnswersAtOnce(t *testing.T) {
	l, first := waitFixture(t, waittest.NSRetake, "k")
	ctx := context.Background()
	start := time.Now()
	a, err := l.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: "other", Wait: time.Minute})
	if err != nil || a.Outcome != spent.Fresh {
		t.Fatalf("free key: got %v, %v; want fresh", a.Outcome, err)
	}
	if _, err := l.Complete(ctx, spent.Completion{Namespace: waittest.NSRetake, Key: "k", Seq: first.Record.Seq, Result: []byte("r")}); err != nil {
		t.Fatal(err)
	}
	a, err = l.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: "k", Wait: time.Minute})
	if err != nil || a.Outcome != spent.Replayed || string(a.Record.Result) != "r" {
		t.Fatalf("complete key: got %v %q, %v; want replayed \"r\"", a.Outcome, a.Record.Result, err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("answers took %v: they should not have waited", el)
	}
}

// TestWaitCancelled: a waiter whose context ends answers in_progress.
func TestWaitCancelled(t *testing.T) {
	l, _ := waitFixture(t, waittest.NSRetake, "k")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan spent.Answer, 1)
	go func() {
		a, err := l.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: "k", Wait: time.Minute})
		if err != nil {
			t.Errorf("cancelled waiter: %v", err)
		}
		done <- a
	}()
	untilWaiting(t, l, 1)
	cancel()
	select {
	case a := <-done:
		if a.Outcome != spent.InProgress || a.RetryAfter <= 0 {
			t.Fatalf("got %v retry_after %v; want in_progress with retry_after", a.Outcome, a.RetryAfter)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled waiter still waiting")
	}
}

// TestStopWaiting: StopWaiting answers every waiter in_progress at once,
// and later claims do not wait.
func TestStopWaiting(t *testing.T) {
	l, _ := waitFixture(t, waittest.NSRetake, "k")
	const n = 5
	var wg sync.WaitGroup
	answers := make([]spent.Answer, n)
	for i := range n {
		wg.Go(func() {
			answers[i], _ = l.Claim(context.Background(), spent.Claim{Namespace: waittest.NSRetake, Key: "k", Wait: time.Minute})
		})
	}
	untilWaiting(t, l, n)
	l.StopWaiting()
	wg.Wait()
	for i, a := range answers {
		if a.Outcome != spent.InProgress {
			t.Fatalf("waiter %d: got %v, want in_progress", i, a.Outcome)
		}
	}
	start := time.Now()
	a, err := l.Claim(context.Background(), spent.Claim{Namespace: waittest.NSRetake, Key: "k", Wait: time.Minute})
	if err != nil || a.Outcome != spent.InProgress || time.Since(start) > 10*time.Second {
		t.Fatalf("after StopWaiting: got %v, %v after %v; want in_progress at once", a.Outcome, err, time.Since(start))
	}
}

// TestWaitManyWaitersOneFresh: of the waiters of a released key, exactly
// one gets it; once it completes, the others replay its result.
func TestWaitManyWaitersOneFresh(t *testing.T) {
	l, first := waitFixture(t, waittest.NSRetake, "k")
	ctx := context.Background()
	const n = 8
	answers := make(chan spent.Answer, n)
	for range n {
		go func() {
			a, err := l.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: "k", Wait: 30 * time.Second})
			if err != nil {
				t.Errorf("waiter: %v", err)
			}
			answers <- a
		}()
	}
	untilWaiting(t, l, n)
	if err := l.Release(ctx, spent.Release{Namespace: waittest.NSRetake, Key: "k", Seq: first.Record.Seq}); err != nil {
		t.Fatal(err)
	}
	var fresh spent.Answer
	select {
	case fresh = <-answers:
	case <-time.After(10 * time.Second):
		t.Fatal("no waiter answered after the release")
	}
	if fresh.Outcome != spent.Fresh {
		t.Fatalf("first answer after the release: got %v, want fresh", fresh.Outcome)
	}
	if _, err := l.Complete(ctx, spent.Completion{Namespace: waittest.NSRetake, Key: "k", Seq: fresh.Record.Seq, Result: []byte("won")}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		select {
		case a := <-answers:
			if a.Outcome != spent.Replayed || string(a.Record.Result) != "won" {
				t.Fatalf("waiter: got %v %q, want replayed \"won\"", a.Outcome, a.Record.Result)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d waiters not answered after the completion", n-i)
		}
	}
}

// TestWaitBatchIgnored: ClaimBatch answers in_progress at once whatever
// Wait says.
func TestWaitBatchIgnored(t *testing.T) {
	l, _ := waitFixture(t, waittest.NSRetake, "k")
	start := time.Now()
	out, err := l.ClaimBatch(context.Background(), []spent.Claim{{Namespace: waittest.NSRetake, Key: "k", Wait: time.Minute}})
	if err != nil || len(out) != 1 || out[0].Outcome != spent.InProgress || time.Since(start) > 10*time.Second {
		t.Fatalf("batch: got %v, %v after %v; want in_progress at once", out, err, time.Since(start))
	}
}

// TestWaitersBounded: past the bound on waiters, a claim with a wait
// answers at once, as without one.
func TestWaitersBounded(t *testing.T) {
	defer spent.SetMaxWaiters(2)()
	l, _ := waitFixture(t, waittest.NSRetake, "k")
	done := make(chan struct{})
	defer close(done)
	for range 2 {
		go func() {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-done; cancel() }()
			l.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: "k", Wait: time.Minute})
		}()
	}
	untilWaiting(t, l, 2)
	start := time.Now()
	a, err := l.Claim(context.Background(), spent.Claim{Namespace: waittest.NSRetake, Key: "k", Wait: time.Minute})
	if err != nil || a.Outcome != spent.InProgress || time.Since(start) > 10*time.Second || l.Waiting() != 2 {
		t.Fatalf("third waiter: got %v, %v after %v with %d waiting; want in_progress at once", a.Outcome, err, time.Since(start), l.Waiting())
	}
}
