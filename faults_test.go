package spent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/storetest"
)

var errStore = errors.New("store failure (injected)")

// failOn returns a hook that fails the named operations.
func failOn(ops ...string) func(string) error {
	return func(op string) error {
		for _, o := range ops {
			if op == o {
				return errStore
			}
		}
		return nil
	}
}

func TestFailClosed(t *testing.T) {
	ctx := context.Background()
	t.Run("ClaimNeverFreshWhenStoreFails", func(t *testing.T) {
		for _, c := range []spent.Claim{
			{Namespace: nsEcho, Key: "one-step", Result: []byte("r")},
			{Namespace: nsEcho, Key: "two-step"},
			{Namespace: nsRefuse, Key: "ticket", Result: []byte{}},
		} {
			f := mustOpen(t)
			f.store.SetFaults(inmem.Faults{Before: failOn("claim")})
			r, err := f.ledger.Claim(ctx, c)
			wantCode(t, "Claim over a failing store", err, spent.EUnavailable)
			if r.Outcome == spent.Fresh {
				t.Fatalf("Claim over a failing store: got fresh, want no outcome")
			}
			if !errors.Is(err, errStore) {
				t.Fatalf("Claim: got %v, want an error wrapping the store's", err)
			}
			// Nothing was written: the retry is fresh.
			f.store.SetFaults(inmem.Faults{})
			wantOutcome(t, "retry", f.claim(t, c), spent.Fresh)
		}
	})
	t.Run("NoReadBackEitherIsUnavailable", func(t *testing.T) {
		f := mustOpen(t)
		f.store.SetFaults(inmem.Faults{Before: failOn("claim", "get")})
		_, err := f.ledger.Claim(ctx, spent.Claim{Namespace: nsEcho, Key: "k"})
		wantCode(t, "Claim", err, spent.EUnavailable)
	})
	t.Run("BatchNeverFreshWhenStoreFails", func(t *testing.T) {
		f := mustOpen(t)
		f.store.SetFaults(inmem.Faults{Before: failOn("claim_batch")})
		res, err := f.ledger.ClaimBatch(ctx, []spent.Claim{{Namespace: nsEcho, Key: "a"}, {Namespace: nsRefuse, Key: "b"}})
		wantCode(t, "ClaimBatch", err, spent.EUnavailable)
		if res != nil {
			t.Fatalf("ClaimBatch: got %v, want no results", res)
		}
		if n := f.store.Len(); n != 0 {
			t.Fatalf("records: got %d, want 0", n)
		}
	})
	t.Run("SeqReservationFails", func(t *testing.T) {
		f := mustOpen(t, func(cfg *spent.Config) { cfg.SeqBlock = 1 })
		wantOutcome(t, "first claim", f.claim(t, spent.Claim{Namespace: nsEcho, Key: "a"}), spent.Fresh)
		f.store.SetFaults(inmem.Faults{Before: failOn("reserve_seq")})
		r, err := f.ledger.Claim(ctx, spent.Claim{Namespace: nsEcho, Key: "b"})
		wantCode(t, "Claim needing a new seq block", err, spent.EUnavailable)
		if r.Outcome == spent.Fresh {
			t.Fatalf("Claim needing a new seq block: got fresh, want no outcome")
		}
	})
	t.Run("OtherOperations", func(t *testing.T) {
		f := mustOpen(t)
		r := f.claim(t, spent.Claim{Namespace: nsEcho, Key: "k"})
		f.store.SetFaults(inmem.Faults{Before: failOn("get", "complete", "release", "list_pending", "delete_expired")})
		_, err := f.ledger.Get(ctx, nsEcho, "k")
		wantCode(t, "Get", err, spent.EUnavailable)
		_, err = f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: "k", Seq: r.Record.Seq, Result: []byte("r")})
		wantCode(t, "Complete", err, spent.EUnavailable)
		err = f.ledger.Release(ctx, spent.Release{Namespace: nsEcho, Key: "k", Seq: r.Record.Seq})
		wantCode(t, "Release", err, spent.EUnavailable)
		_, err = f.ledger.Unknown(ctx, "", 10)
		wantCode(t, "Unknown", err, spent.EUnavailable)
		_, err = f.ledger.Sweep(ctx, 10)
		wantCode(t, "Sweep", err, spent.EUnavailable)
		f.store.SetFaults(inmem.Faults{Before: failOn("complete", "release")})
		_, err = f.ledger.Complete(ctx, spent.Completion{Namespace: nsEcho, Key: "k", Seq: r.Record.Seq, Result: []byte("r")})
		wantCode(t, "Complete", err, spent.EUnavailable)
		err = f.ledger.Release(ctx, spent.Release{Namespace: nsEcho, Key: "k", Seq: r.Record.Seq})
		wantCode(t, "Release", err, spent.EUnavailable)
		f.store.SetFaults(inmem.Faults{})
		wantOutcome(t, "claim after the failures", f.claim(t, spent.Claim{Namespace: nsEcho, Key: "k"}), spent.InProgress)
	})
}

func TestAmbiguousWrite(t *testing.T) {
	ctx := context.Background()
	t.Run("OwnWriteIsFresh", func(t *testing.T) {
		for _, c := range []spent.Claim{
			{Namespace: nsEcho, Key: "one-step", Fingerprint: fpA, Result: []byte("r")},
			{Namespace: nsEcho, Key: "two-step", Fingerprint: fpA},
			{Namespace: nsRefuse, Key: "ticket", Result: []byte{}},
		} {
			f := mustOpen(t)
			f.store.SetFaults(inmem.Faults{After: failOn("claim")})
			r := f.claim(t, c)
			wantOutcome(t, "ambiguous claim of "+c.Key, r, spent.Fresh)
			f.store.SetFaults(inmem.Faults{})
			stored, err := f.ledger.Get(ctx, c.Namespace, c.Key)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Seq != r.Record.Seq {
				t.Fatalf("stored seq: got %v, want the fresh claim's %v", stored.Seq, r.Record.Seq)
			}
			if again := f.claim(t, c); again.Outcome == spent.Fresh || again.Record.Seq != r.Record.Seq {
				t.Fatalf("repeat: got %v from %v, want a second answer from %v", again.Outcome, again.Record.Seq, r.Record.Seq)
			}
		}
	})
	t.Run("OtherWritersRecordGivesSecondAnswer", func(t *testing.T) {
		cases := []struct {
			name  string
			first spent.Claim
			again spent.Claim
			want  spent.Outcome
		}{
			{"Replayed", spent.Claim{Namespace: nsEcho, Key: "k", Fingerprint: fpA, Result: []byte("first")},
				spent.Claim{Namespace: nsEcho, Key: "k", Fingerprint: fpA, Result: []byte("second")}, spent.Replayed},
			{"Mismatch", spent.Claim{Namespace: nsEcho, Key: "k", Fingerprint: fpA, Result: []byte("first")},
				spent.Claim{Namespace: nsEcho, Key: "k", Fingerprint: fpB, Result: []byte("second")}, spent.Mismatch},
			{"Refused", spent.Claim{Namespace: nsRefuse, Key: "k", Result: []byte{}},
				spent.Claim{Namespace: nsRefuse, Key: "k", Result: []byte{}}, spent.Refused},
			{"InProgress", spent.Claim{Namespace: nsEcho, Key: "k"},
				spent.Claim{Namespace: nsEcho, Key: "k"}, spent.InProgress},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				f := mustOpen(t)
				first := f.claim(t, tc.first)
				f.store.SetFaults(inmem.Faults{After: failOn("claim")})
				r := f.claim(t, tc.again)
				wantOutcome(t, "ambiguous repeat", r, tc.want)
				if r.Record.Seq != first.Record.Seq {
					t.Fatalf("ambiguous repeat: got seq %v, want the first writer's %v", r.Record.Seq, first.Record.Seq)
				}
				if tc.want == spent.Replayed && string(r.Record.Result) != "first" {
					t.Fatalf("replayed result: got %q, want %q", r.Record.Result, "first")
				}
			})
		}
	})
	t.Run("ReadBackFailingIsUnavailable", func(t *testing.T) {
		f := mustOpen(t)
		f.store.SetFaults(inmem.Faults{After: failOn("claim"), Before: failOn("get")})
		r, err := f.ledger.Claim(ctx, spent.Claim{Namespace: nsEcho, Key: "k", Result: []byte("r")})
		wantCode(t, "Claim", err, spent.EUnavailable)
		if r.Outcome == spent.Fresh {
			t.Fatalf("Claim: got fresh, want no outcome")
		}
		if !errors.Is(err, errStore) {
			t.Fatalf("Claim: got %v, want an error wrapping the store's", err)
		}
	})
	t.Run("BatchOwnWritesAreFresh", func(t *testing.T) {
		f := mustOpen(t)
		f.claim(t, spent.Claim{Namespace: nsRefuse, Key: "taken", Result: []byte{}})
		f.store.SetFaults(inmem.Faults{After: failOn("claim_batch")})
		res, err := f.ledger.ClaimBatch(ctx, []spent.Claim{
			{Namespace: nsEcho, Key: "a", Result: []byte("ra")},
			{Namespace: nsRefuse, Key: "taken", Result: []byte{}},
			{Namespace: nsEcho, Key: "b"},
		})
		wantCode(t, "ambiguous ClaimBatch", err, "")
		want := []spent.Outcome{spent.Fresh, spent.Refused, spent.Fresh}
		for i := range want {
			wantOutcome(t, fmt.Sprintf("claims[%d]", i), res[i], want[i])
		}
		if res[0].Record.Seq == res[2].Record.Seq {
			t.Fatalf("fresh seqs: got %v twice, want distinct", res[0].Record.Seq)
		}
	})
	t.Run("BatchReadBackFailingIsUnavailable", func(t *testing.T) {
		f := mustOpen(t)
		f.store.SetFaults(inmem.Faults{After: failOn("claim_batch"), Before: failOn("get")})
		_, err := f.ledger.ClaimBatch(ctx, []spent.Claim{{Namespace: nsEcho, Key: "a"}})
		wantCode(t, "ClaimBatch", err, spent.EUnavailable)
	})
}

// rewound is a store whose seq counter can be made to go back, as a Redis
// replica promoted before it received the primary's last reservations.
type rewound struct {
	spent.Store
	back atomic.Bool
}

func (s *rewound) ReserveSeq(ctx context.Context, node uint32, n uint64) (uint64, error) {
	first, err := s.Store.ReserveSeq(ctx, node, n)
	if s.back.Load() {
		return 1, err
	}
	return first, err
}

// TestSeqBehindFailsClosed: a store that hands out counters the ledger
// already used lost acknowledged writes; the ledger refuses every claim
// from then on, naming the cause and the way out, and never reuses a seq.
func TestSeqBehindFailsClosed(t *testing.T) {
	ctx := context.Background()
	st := &rewound{Store: inmem.New()}
	t.Cleanup(func() { st.Close() })
	cfg := testConfig(storetest.NewClock(testEpoch))
	cfg.SeqBlock = 4
	l, err := spent.NewLedger(ctx, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[spent.Seq]bool{}
	claim := func(i int) (spent.Answer, error) {
		return l.Claim(ctx, spent.Claim{Namespace: nsEcho, Key: fmt.Sprintf("k%d", i), Result: []byte("r")})
	}
	for i := range 6 {
		a, err := claim(i)
		if err != nil || a.Outcome != spent.Fresh || seen[a.Record.Seq] {
			t.Fatalf("claim %d: got %v %v %v, want fresh with a new seq", i, a.Outcome, a.Record.Seq, err)
		}
		seen[a.Record.Seq] = true
	}
	st.back.Store(true)
	refused := 0
	for i := 6; i < 12; i++ {
		a, err := claim(i)
		if err == nil {
			if refused > 0 || seen[a.Record.Seq] {
				t.Fatalf("claim %d after the counter went back: got %v seq %v, want a refusal", i, a.Outcome, a.Record.Seq)
			}
			seen[a.Record.Seq] = true
			continue
		}
		refused++
		wantCode(t, "claim after the counter went back", err, spent.EUnavailable)
		if !errors.Is(err, spent.ErrSeqBehind) || !strings.Contains(err.Error(), "spent audit") {
			t.Fatalf("claim %d: got %v, want ErrSeqBehind naming the audit", i, err)
		}
		st.back.Store(false) // a healthy block later changes nothing
	}
	if refused == 0 {
		t.Fatal("no claim refused after the store's counter went back")
	}
}
