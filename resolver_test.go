package spent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
)

// unknownOutcome claims key two-step in the hold namespace and lets its
// lease run out, so that it is listed as an unknown outcome.
func (f *fixture) unknownOutcome(tb testing.TB, key string) spent.Record {
	tb.Helper()
	a := f.claim(tb, spent.Claim{Namespace: nsEcho, Key: key, Fingerprint: fpA})
	wantOutcome(tb, "claim "+key, a, spent.Fresh)
	f.clock.Advance(testLease)
	return a.Record
}

func (f *fixture) runner(tb testing.TB, svc spent.Service, r spent.Resolver, mod func(*spent.ResolveOptions)) *spent.ResolveRunner {
	tb.Helper()
	o := spent.ResolveOptions{Namespace: nsEcho, Now: f.clock.Now}
	if mod != nil {
		mod(&o)
	}
	rr, err := spent.NewResolveRunner(svc, r, o)
	if err != nil {
		tb.Fatal(err)
	}
	return rr
}

func (f *fixture) pass(tb testing.TB, rr *spent.ResolveRunner) spent.ResolvePass {
	tb.Helper()
	p, err := rr.Pass(context.Background())
	if err != nil {
		tb.Fatalf("Pass: %v", err)
	}
	return p
}

func (f *fixture) unknownCount(tb testing.TB) int {
	tb.Helper()
	recs, err := f.ledger.Unknown(context.Background(), nsEcho, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return len(recs)
}

func TestResolveRunner(t *testing.T) {
	ctx := context.Background()

	t.Run("AppliedCompletesWithTheResult", func(t *testing.T) {
		f := mustOpen(t)
		rec := f.unknownOutcome(t, "pay-1")
		var seen []spent.Record
		rr := f.runner(t, f.ledger, func(_ context.Context, r spent.Record) (spent.Resolution, error) {
			seen = append(seen, r)
			return spent.Resolution{Verdict: spent.Applied, Result: []byte(`{"paid":true}`)}, nil
		}, nil)
		if p := f.pass(t, rr); p.Listed != 1 || p.Tried != 1 || p.Completed != 1 {
			t.Fatalf("pass: got %+v, want 1 listed, tried, completed", p)
		}
		if len(seen) != 1 || seen[0].Hash != rec.Hash || seen[0].Seq != rec.Seq || !bytes.Equal(seen[0].Fingerprint, fpA) {
			t.Fatalf("resolver saw %+v, want the record %s %s", seen, rec.Hash, rec.Seq)
		}
		a := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "pay-1", Fingerprint: fpA})
		if a.Outcome != spent.Replayed || string(a.Record.Result) != `{"paid":true}` {
			t.Fatalf("claim after: got %v %q, want replayed with the resolver's result", a.Outcome, a.Record.Result)
		}
		if n := f.unknownCount(t); n != 0 {
			t.Fatalf("unknown after: got %d, want 0", n)
		}
		if s := rr.Stats(); s.Completed != 1 || s.Released != 0 || s.Left != 0 || s.Waiting != 0 {
			t.Fatalf("stats: got %+v", s)
		}
	})

	t.Run("NotAppliedReleases", func(t *testing.T) {
		f := mustOpen(t)
		f.unknownOutcome(t, "pay-2")
		rr := f.runner(t, f.ledger, func(context.Context, spent.Record) (spent.Resolution, error) {
			return spent.Resolution{Verdict: spent.NotApplied}, nil
		}, nil)
		if p := f.pass(t, rr); p.Released != 1 {
			t.Fatalf("pass: got %+v, want 1 released", p)
		}
		wantOutcome(t, "claim after", f.claim(t, spent.Claim{Namespace: nsEcho, Key: "pay-2", Fingerprint: fpA}), spent.Fresh)
		if s := rr.Stats(); s.Released != 1 || s.Completed != 0 {
			t.Fatalf("stats: got %+v", s)
		}
	})

	t.Run("CannotTellLeavesItWithBackoff", func(t *testing.T) {
		f := mustOpen(t)
		rec := f.unknownOutcome(t, "pay-3")
		calls := 0
		var left []spent.ResolveLeft
		rr := f.runner(t, f.ledger, func(context.Context, spent.Record) (spent.Resolution, error) {
			calls++
			return spent.Resolution{}, nil // zero value: cannot tell
		}, func(o *spent.ResolveOptions) {
			o.OnLeft = func(l spent.ResolveLeft) { left = append(left, l) }
		})
		// The waits between attempts: 1 s doubling, capped at 5 min.
		want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
		for i, w := range want {
			w *= time.Second
			p := f.pass(t, rr)
			if p.Tried != 1 || p.Left != 1 || calls != i+1 {
				t.Fatalf("attempt %d: pass %+v, %d calls; want tried and left", i+1, p, calls)
			}
			l := left[len(left)-1]
			if l.Attempts != i+1 || l.Verdict != spent.CannotTell || l.Err != nil || l.Record.Seq != rec.Seq || !l.Next.Equal(f.clock.Now().Add(w)) {
				t.Fatalf("attempt %d: left %+v, want next in %v", i+1, l, w)
			}
			f.clock.Advance(w - time.Millisecond)
			if p := f.pass(t, rr); p.Listed != 1 || p.Tried != 0 || calls != i+1 {
				t.Fatalf("attempt %d: pass before the backoff ended: %+v, %d calls; want not tried", i+1, p, calls)
			}
			f.clock.Advance(time.Millisecond)
		}
		// Still there for the operator.
		recs, err := f.ledger.Unknown(ctx, nsEcho, 0)
		if err != nil || len(recs) != 1 || recs[0].Seq != rec.Seq {
			t.Fatalf("unknown: got %v %v, want the record left", recs, err)
		}
		if s := rr.Stats(); s.Left != uint64(len(want)) || s.Waiting != 1 {
			t.Fatalf("stats: got %+v, want %d left, 1 waiting", s, len(want))
		}
	})

	t.Run("ErrorsLeaveIt", func(t *testing.T) {
		f := mustOpen(t)
		f.unknownOutcome(t, "pay-4")
		boom := errors.New("provider down")
		var left []spent.ResolveLeft
		results := []func() (spent.Resolution, error){
			func() (spent.Resolution, error) { return spent.Resolution{Verdict: spent.Applied}, boom },
			func() (spent.Resolution, error) { panic("resolver bug") },
			func() (spent.Resolution, error) { return spent.Resolution{Verdict: 9}, nil },
			// Over the ledger's result limit: the completion is refused.
			func() (spent.Resolution, error) {
				return spent.Resolution{Verdict: spent.Applied, Result: make([]byte, testMaxRes+1)}, nil
			},
		}
		i := 0
		rr := f.runner(t, f.ledger, func(context.Context, spent.Record) (spent.Resolution, error) {
			i++
			return results[i-1]()
		}, func(o *spent.ResolveOptions) {
			o.OnLeft = func(l spent.ResolveLeft) { left = append(left, l) }
			o.MaxBackoff = time.Second
		})
		for n := range results {
			if p := f.pass(t, rr); p.Left != 1 {
				t.Fatalf("attempt %d: got %+v, want left", n+1, p)
			}
			f.clock.Advance(time.Second)
		}
		if !errors.Is(left[0].Err, boom) || left[0].Verdict != spent.CannotTell {
			t.Fatalf("error: got %+v, want the resolver's error and cannot_tell", left[0])
		}
		if left[1].Err == nil || left[2].Err == nil {
			t.Fatalf("panic, bad verdict: got %v, %v; want errors", left[1].Err, left[2].Err)
		}
		if spent.ErrorCode(left[3].Err) != spent.ETooLarge || left[3].Verdict != spent.Applied {
			t.Fatalf("result too large: got %+v, want too_large", left[3])
		}
		if n := f.unknownCount(t); n != 1 {
			t.Fatalf("unknown: got %d, want 1", n)
		}
	})

	t.Run("SettledMeanwhileIsNotOverwritten", func(t *testing.T) {
		f := mustOpen(t)
		rec := f.unknownOutcome(t, "pay-5")
		rr := f.runner(t, f.ledger, func(ctx context.Context, r spent.Record) (spent.Resolution, error) {
			// An operator resolves it while the resolver looks it up.
			if _, err := f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Hash: r.Hash, Result: []byte("operator"), Force: true}); err != nil {
				t.Fatal(err)
			}
			return spent.Resolution{Verdict: spent.Applied, Result: []byte("resolver")}, nil
		}, nil)
		if p := f.pass(t, rr); p.Elsewhere != 1 || p.Completed != 0 {
			t.Fatalf("pass: got %+v, want settled elsewhere", p)
		}
		got, err := f.ledger.Get(ctx, nsEcho, "pay-5")
		if err != nil || string(got.Result) != "operator" || got.Seq != rec.Seq {
			t.Fatalf("record: got %q %v, want the operator's result", got.Result, err)
		}
	})

	t.Run("ReleasedAndClaimedAgainIsNotTouched", func(t *testing.T) {
		f := mustOpen(t)
		f.unknownOutcome(t, "pay-6")
		var again spent.Answer
		rr := f.runner(t, f.ledger, func(ctx context.Context, r spent.Record) (spent.Resolution, error) {
			if err := f.ledger.Release(ctx, spent.Release{Namespace: nsEcho, Hash: r.Hash, Force: true}); err != nil {
				t.Fatal(err)
			}
			again = f.claim(t, spent.Claim{Namespace: nsEcho, Key: "pay-6", Fingerprint: fpA})
			return spent.Resolution{Verdict: spent.NotApplied}, nil
		}, nil)
		if p := f.pass(t, rr); p.Elsewhere != 1 || p.Released != 0 {
			t.Fatalf("pass: got %+v, want settled elsewhere", p)
		}
		got, err := f.ledger.Get(ctx, nsEcho, "pay-6")
		if err != nil || got.State != spent.StatePending || got.Seq != again.Record.Seq {
			t.Fatalf("record: got %+v %v, want the new claim's, pending", got, err)
		}
	})

	t.Run("OnlyHoldNamespaces", func(t *testing.T) {
		f := mustOpen(t)
		none := func(context.Context, spent.Record) (spent.Resolution, error) { return spent.Resolution{}, nil }
		for _, ns := range []string{nsRefuse, "nope"} {
			if _, err := spent.NewResolveRunner(f.ledger, none, spent.ResolveOptions{Namespace: ns}); err == nil {
				t.Errorf("namespace %s: got a runner, want a refusal", ns)
			}
		}
		if _, err := spent.NewResolveRunner(f.ledger, nil, spent.ResolveOptions{}); err == nil {
			t.Error("nil resolver: got a runner, want a refusal")
		}
		if _, err := spent.NewResolveRunner(f.ledger, none, spent.ResolveOptions{MinBackoff: time.Minute, MaxBackoff: time.Second}); err == nil {
			t.Error("MaxBackoff under MinBackoff: got a runner, want a refusal")
		}
	})

	t.Run("ListingFails", func(t *testing.T) {
		f := mustOpen(t)
		f.unknownOutcome(t, "pay-7")
		f.store.Close() // every store call now fails
		rr := f.runner(t, f.ledger, func(context.Context, spent.Record) (spent.Resolution, error) {
			t.Fatal("resolver called without a listing")
			return spent.Resolution{}, nil
		}, nil)
		_, err := rr.Pass(ctx)
		if spent.ErrorCode(err) != spent.EUnavailable || rr.Stats().ListErrors != 1 {
			t.Fatalf("pass on a closed store: got %v, %+v; want unavailable, 1 list error", err, rr.Stats())
		}
	})

	t.Run("RunUntilCancelled", func(t *testing.T) {
		f := mustOpen(t)
		for i := range 3 {
			f.claim(t, spent.Claim{Namespace: nsEcho, Key: fmt.Sprint("run-", i), Fingerprint: fpA})
		}
		f.clock.Advance(testLease)
		cctx, cancel := context.WithCancel(ctx)
		tick := make(chan time.Time)
		asked := make(chan struct{}, 2)
		var waits []time.Duration
		rr := f.runner(t, f.ledger, func(_ context.Context, r spent.Record) (spent.Resolution, error) {
			if r.Hash == f.ledger.HashKey(nsEcho, "run-0") && len(waits) == 0 {
				return spent.Resolution{}, nil // left once
			}
			return spent.Resolution{Verdict: spent.Applied, Result: []byte("ok")}, nil
		}, func(o *spent.ResolveOptions) {
			o.Interval = time.Hour
			o.After = func(d time.Duration) <-chan time.Time {
				waits = append(waits, d)
				if len(waits) == 2 {
					cancel()
				}
				asked <- struct{}{}
				return tick
			}
		})
		done := make(chan error, 1)
		go func() { done <- rr.Run(cctx) }()
		// The first pass leaves run-0 for 1 s: Run waits 1 s, not the hour.
		<-asked
		tick <- f.clock.Advance(time.Second)
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: got %v, want context.Canceled", err)
		}
		if len(waits) != 2 || waits[0] != time.Second || waits[1] != time.Hour {
			t.Fatalf("waits: got %v, want [1s 1h]; %+v", waits, rr.Stats())
		}
		if s := rr.Stats(); s.Completed != 3 || s.Left != 1 {
			t.Fatalf("stats: got %+v, want 3 completed, 1 left", s)
		}
	})
}

// TestResolveRunnerOverHTTP: the runner works over the HTTP client as over
// the ledger. A token with the claim scope completes an unknown outcome, but
// releasing one past its lease is an operator's act (a forced release, the
// admin scope): with the claim token the release is left for later, with
// the admin token it is made.
func TestResolveRunnerOverHTTP(t *testing.T) {
	f := mustOpen(t)
	const admin, claim = "admin-token-0123456789", "claim-token-0123456789"
	api, err := sphttp.NewServer(f.ledger, sphttp.Config{Tokens: []sphttp.Token{
		{Token: admin, Scopes: []sphttp.Scope{sphttp.ScopeAdmin}},
		{Token: claim, Scopes: []sphttp.Scope{sphttp.ScopeClaim}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	f.unknownOutcome(t, "applied")
	f.claim(t, spent.Claim{Namespace: nsEcho, Key: "not-applied", Fingerprint: fpA})
	f.clock.Advance(testLease)

	lister := sphttp.NewClient(srv.URL, sphttp.ClientConfig{Token: admin})
	settler := sphttp.NewClient(srv.URL, sphttp.ClientConfig{Token: claim})
	resolve := func(_ context.Context, r spent.Record) (spent.Resolution, error) {
		if r.Hash == f.ledger.HashKey(nsEcho, "applied") {
			return spent.Resolution{Verdict: spent.Applied, Result: []byte("sent")}, nil
		}
		return spent.Resolution{Verdict: spent.NotApplied}, nil
	}
	rr := f.runner(t, splitService{lister, settler}, resolve, nil)
	if p := f.pass(t, rr); p.Completed != 1 || p.Released != 0 || p.Left != 1 {
		t.Fatalf("pass with a claim-scope settler: got %+v, want 1 completed, the release left", p)
	}
	rr = f.runner(t, splitService{lister, lister}, resolve, nil)
	if p := f.pass(t, rr); p.Released != 1 {
		t.Fatalf("pass with an admin settler: got %+v, want 1 released", p)
	}
	a := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "applied", Fingerprint: fpA})
	if a.Outcome != spent.Replayed || string(a.Record.Result) != "sent" {
		t.Fatalf("applied: got %v %q, want replayed sent", a.Outcome, a.Record.Result)
	}
	wantOutcome(t, "not applied", f.claim(t, spent.Claim{Namespace: nsEcho, Key: "not-applied", Fingerprint: fpA}), spent.Fresh)
}

// splitService lists with one client (admin) and settles with another
// (claim scope only), to show that settling needs no force.
type splitService struct {
	lister  spent.Service
	settler spent.Service
}

func (s splitService) Claim(ctx context.Context, c spent.Claim) (spent.Answer, error) {
	return s.settler.Claim(ctx, c)
}
func (s splitService) ClaimBatch(ctx context.Context, cs []spent.Claim) ([]spent.Answer, error) {
	return s.settler.ClaimBatch(ctx, cs)
}
func (s splitService) Complete(ctx context.Context, c spent.Completion) (spent.Record, error) {
	return s.settler.Complete(ctx, c)
}
func (s splitService) Release(ctx context.Context, r spent.Release) error {
	return s.settler.Release(ctx, r)
}
func (s splitService) Get(ctx context.Context, ns, key string) (spent.Record, error) {
	return s.settler.Get(ctx, ns, key)
}
func (s splitService) Unknown(ctx context.Context, ns string, limit int) ([]spent.Record, error) {
	return s.lister.Unknown(ctx, ns, limit)
}

// ExampleResolveRunner resolves an unknown outcome by asking the system the
// effect went to: here a map of the payments a provider made, which voids
// an attempt it has not seen, so that it can never land later.
func ExampleResolveRunner() {
	clock := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("an example secret of at least 32 bytes")
	cfg.Namespaces = map[string]spent.Policy{
		"payments": {Mode: spent.ModeEcho, Retention: 24 * time.Hour, Lease: 10 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
	}
	cfg.Now = func() time.Time { return clock }
	ledger, err := spent.NewLedger(context.Background(), inmem.New(), cfg)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	// Two payments claimed, then their process died: nobody completed them.
	a, _ := ledger.Claim(ctx, spent.Claim{Namespace: "payments", Key: "order-1"})
	ledger.Claim(ctx, spent.Claim{Namespace: "payments", Key: "order-2"})
	clock = clock.Add(time.Minute) // their leases ran out

	provider := map[spent.Seq]string{a.Record.Seq: `{"paid":1000}`} // order-1 reached it
	voided := map[spent.Seq]bool{}
	resolve := func(_ context.Context, r spent.Record) (spent.Resolution, error) {
		if res, ok := provider[r.Seq]; ok {
			return spent.Resolution{Verdict: spent.Applied, Result: []byte(res)}, nil
		}
		voided[r.Seq] = true // the provider refuses this attempt from now on
		return spent.Resolution{Verdict: spent.NotApplied}, nil
	}
	rr, err := spent.NewResolveRunner(ledger, resolve, spent.ResolveOptions{Namespace: "payments"})
	if err != nil {
		panic(err)
	}
	p, err := rr.Pass(ctx)
	fmt.Println(p.Completed, "completed,", p.Released, "released,", err)
	again, _ := ledger.Claim(ctx, spent.Claim{Namespace: "payments", Key: "order-1"})
	fmt.Println(again.Outcome, string(again.Record.Result))
	again, _ = ledger.Claim(ctx, spent.Claim{Namespace: "payments", Key: "order-2"})
	fmt.Println(again.Outcome)
	// Output:
	// 1 completed, 1 released, <nil>
	// replayed {"paid":1000}
	// fresh
}
