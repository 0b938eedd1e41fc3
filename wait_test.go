package spent_test

import (
	"context"
	"errors"
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

// watchedStore is an inmem store with the EndWatcher capability, whose
// notifications the test sends itself: it stands for a shared store whose
// ends are written by other servers.
type watchedStore struct {
	*inmem.Store
	mu    sync.Mutex
	ended func(spent.Hash)
	lost  func()
	subs  int
	fail  error
	stops int
}

func (s *watchedStore) WatchEnds(ctx context.Context, ended func(spent.Hash), lost func()) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs++
	if s.fail != nil {
		return nil, s.fail
	}
	s.ended, s.lost = ended, lost
	return func() { s.mu.Lock(); s.stops++; s.mu.Unlock() }, nil
}

// TestWaitEndWatcher: a ledger over an EndWatcher subscribes once, at the
// first waiter; an end told by the store wakes the waiter of its hash, and
// lost wakes every waiter to look again (here the key was completed by
// "another server", straight in the store, with no notice); StopWaiting
// ends the subscription.
func TestWaitEndWatcher(t *testing.T) {
	s := &watchedStore{Store: inmem.New()}
	l, err := spent.NewLedger(context.Background(), s, waittest.Config(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claim := func(key string) spent.Answer {
		a, err := l.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: key})
		if err != nil || a.Outcome != spent.Fresh {
			t.Fatalf("claim %q: %v, %v", key, a.Outcome, err)
		}
		return a
	}
	waitFor := func(key string) <-chan spent.Answer {
		ch := make(chan spent.Answer, 1)
		go func() {
			a, _ := l.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: key, Wait: time.Minute})
			ch <- a
		}()
		return ch
	}
	receive := func(ch <-chan spent.Answer, what string) spent.Answer {
		select {
		case a := <-ch:
			return a
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: waiter not answered", what)
			return spent.Answer{}
		}
	}
	a1, a2 := claim("one"), claim("two")
	w1, w2 := waitFor("one"), waitFor("two")
	untilWaiting(t, l, 2)
	time.Sleep(200 * time.Millisecond) // past their first looks (one inmem claim each)
	// "Another server" completes both keys in the store: no notice yet.
	for _, a := range []spent.Answer{a1, a2} {
		if _, err := s.Store.Complete(ctx, a.Record.Hash, a.Record.Seq, []byte("r"), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	ended, lost, subs := s.ended, s.lost, s.subs
	s.mu.Unlock()
	if subs != 1 {
		t.Fatalf("%d subscriptions, want 1", subs)
	}
	ended(a1.Record.Hash)
	if a := receive(w1, "one"); a.Outcome != spent.Replayed {
		t.Fatalf("one: got %v, want replayed", a.Outcome)
	}
	select {
	case a := <-w2:
		t.Fatalf("two answered %v before any notice of it", a.Outcome)
	case <-time.After(50 * time.Millisecond):
	}
	lost()
	if a := receive(w2, "two"); a.Outcome != spent.Replayed {
		t.Fatalf("two after lost: got %v, want replayed", a.Outcome)
	}
	l.StopWaiting()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stops != 1 {
		t.Fatalf("subscription stopped %d times, want once", s.stops)
	}
}

// TestWaitSubscriptionFails: when the store cannot subscribe, a claim with
// a wait answers at once, as without one.
func TestWaitSubscriptionFails(t *testing.T) {
	s := &watchedStore{Store: inmem.New(), fail: errors.New("engine unreachable")}
	l, err := spent.NewLedger(context.Background(), s, waittest.Config(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a, err := l.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: "k", Wait: time.Minute})
	if err != nil || a.Outcome != spent.InProgress || time.Since(start) > 10*time.Second {
		t.Fatalf("got %v, %v after %v; want in_progress at once", a.Outcome, err, time.Since(start))
	}
}
