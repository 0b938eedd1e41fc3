package spent_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/storetest"
)

// resultBytes sums the result bytes a batch answer carries.
func resultBytes(res []spent.Answer) int {
	n := 0
	for i := range res {
		n += len(res[i].Record.Result)
	}
	return n
}

// countingStore counts the result bytes its store returns to claims.
type countingStore struct {
	*inmem.Store
	claimed int
}

func (s *countingStore) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	res, err := s.Store.ClaimBatch(ctx, ops)
	for i := range res {
		if !res[i].Inserted {
			s.claimed += len(res[i].Record.Result)
		}
	}
	return res, err
}

// TestClaimBatchAnswerWithinBudget replays a key holding a 1 MiB result 20
// times in one batch: the answer carries at most the default budget of
// result bytes, the store never returns more than the budget either, the
// first replays carry the result, and the rest are marked omitted.
func TestClaimBatchAnswerWithinBudget(t *testing.T) {
	store := &countingStore{Store: inmem.New()}
	clock := storetest.NewClock(testEpoch)
	cfg := testConfig(clock)
	cfg.MaxResult = 1 << 20
	l, err := spent.NewLedger(context.Background(), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("r"), 1<<20)
	if _, err := l.Claim(context.Background(), spent.Claim{Namespace: nsEcho, Key: "big", Fingerprint: fpA, Result: big}); err != nil {
		t.Fatal(err)
	}
	cs := make([]spent.Claim, 20)
	for i := range cs {
		cs[i] = spent.Claim{Namespace: nsEcho, Key: "big", Fingerprint: fpA}
	}
	res, err := l.ClaimBatch(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	if n := resultBytes(res); n > spent.DefaultMaxBatchResult {
		t.Fatalf("result bytes in the answer: got %d, want at most %d", n, spent.DefaultMaxBatchResult)
	}
	if store.claimed > spent.DefaultMaxBatchResult {
		t.Fatalf("result bytes the store returned: got %d, want at most %d", store.claimed, spent.DefaultMaxBatchResult)
	}
	fit := spent.DefaultMaxBatchResult / len(big)
	for i := range res {
		wantOutcome(t, "repeat", res[i], spent.Replayed)
		if i < fit {
			if res[i].ResultOmitted || !bytes.Equal(res[i].Record.Result, big) {
				t.Fatalf("results[%d]: got %d bytes, omitted %v, want the stored result", i, len(res[i].Record.Result), res[i].ResultOmitted)
			}
		} else if !res[i].ResultOmitted || res[i].Record.Result != nil {
			t.Fatalf("results[%d]: got %d bytes, omitted %v, want the result omitted", i, len(res[i].Record.Result), res[i].ResultOmitted)
		}
	}
	// A single claim is not limited.
	r, err := l.Claim(context.Background(), cs[0])
	if err != nil || r.ResultOmitted || !bytes.Equal(r.Record.Result, big) {
		t.Fatalf("single claim: got %d bytes, omitted %v, %v, want the stored result", len(r.Record.Result), r.ResultOmitted, err)
	}
}

// TestClaimBatchBudgetCases checks the budget with small figures: results
// that fit are carried, in order, whoever read them (the store or the
// ledger), and only replays are ever marked.
func TestClaimBatchBudgetCases(t *testing.T) {
	const budget = 1000
	ctx := context.Background()
	setup := func(t *testing.T) *fixture {
		f := mustOpen(t, func(c *spent.Config) { c.MaxBatchResult = budget })
		f.claim(t, spent.Claim{Namespace: nsEcho, Key: "a", Fingerprint: fpA, Result: bytes.Repeat([]byte("a"), 400)})
		f.claim(t, spent.Claim{Namespace: nsEcho, Key: "b", Fingerprint: fpA, Result: bytes.Repeat([]byte("b"), 300)})
		f.claim(t, spent.Claim{Namespace: nsEcho, Key: "small", Fingerprint: fpA, Result: []byte("s")})
		f.claim(t, spent.Claim{Namespace: nsRefuse, Key: "a", Result: bytes.Repeat([]byte("x"), 900)})
		return f
	}
	batch := []spent.Claim{
		{Namespace: nsEcho, Key: "a", Fingerprint: fpA},     // 400, fits (400)
		{Namespace: nsEcho, Key: "small", Fingerprint: fpA}, // 1 (401)
		{Namespace: nsEcho, Key: "a", Fingerprint: fpB},     // mismatch: no result
		{Namespace: nsRefuse, Key: "a"},                     // refused: no result
		{Namespace: nsEcho, Key: "b", Fingerprint: fpA},     // 300 (701)
		{Namespace: nsEcho, Key: "a", Fingerprint: fpA},     // 400 would make 1101: omitted
		{Namespace: nsEcho, Key: "b", Fingerprint: fpA},     // 300 (1001): omitted
		{Namespace: nsEcho, Key: "small", Fingerprint: fpA}, // 1 (702)
		{Namespace: nsEcho, Key: "fresh", Fingerprint: fpA}, // fresh two-step
		{Namespace: nsEcho, Key: "fresh", Fingerprint: fpA}, // in progress
	}
	want := []struct {
		outcome spent.Outcome
		n       int
		omitted bool
	}{
		{spent.Replayed, 400, false}, {spent.Replayed, 1, false}, {spent.Mismatch, 0, false}, {spent.Refused, 0, false},
		{spent.Replayed, 300, false}, {spent.Replayed, 0, true}, {spent.Replayed, 0, true}, {spent.Replayed, 1, false},
		{spent.Fresh, 0, false}, {spent.InProgress, 0, false},
	}
	check := func(t *testing.T, res []spent.Answer) {
		t.Helper()
		if len(res) != len(want) {
			t.Fatalf("results: got %d, want %d", len(res), len(want))
		}
		for i, w := range want {
			r := res[i]
			if r.Outcome != w.outcome || len(r.Record.Result) != w.n || r.ResultOmitted != w.omitted {
				t.Fatalf("results[%d]: got %v with %d bytes, omitted %v; want %v with %d, omitted %v",
					i, r.Outcome, len(r.Record.Result), r.ResultOmitted, w.outcome, w.n, w.omitted)
			}
		}
		if n := resultBytes(res); n > budget {
			t.Fatalf("result bytes: got %d, want at most %d", n, budget)
		}
	}
	t.Run("StoreAnswers", func(t *testing.T) {
		f := setup(t)
		res, err := f.ledger.ClaimBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		check(t, res)
		if !bytes.Equal(res[0].Record.Result, bytes.Repeat([]byte("a"), 400)) {
			t.Fatalf("results[0]: got other bytes than the stored result")
		}
	})
	t.Run("AmbiguousFailureReadBack", func(t *testing.T) {
		// The store writes the batch, then fails: the ledger reads every
		// key back and keeps the same budget.
		f := setup(t)
		f.store.SetFaults(inmem.Faults{After: func(op string) error {
			if op == "claim_batch" {
				return errors.New("acknowledgement lost")
			}
			return nil
		}})
		res, err := f.ledger.ClaimBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		check(t, res)
	})
	t.Run("AmbiguousFreshKeepsItsResult", func(t *testing.T) {
		// A one-step claim written before the failure is read back as
		// the op's own: fresh, with the result it sent, however long.
		f := mustOpen(t, func(c *spent.Config) { c.MaxBatchResult = budget })
		f.store.SetFaults(inmem.Faults{After: func(op string) error {
			if op == "claim_batch" {
				return errors.New("acknowledgement lost")
			}
			return nil
		}})
		mine := bytes.Repeat([]byte("m"), 900)
		res, err := f.ledger.ClaimBatch(ctx, []spent.Claim{
			{Namespace: nsEcho, Key: "mine", Fingerprint: fpA, Result: mine},
			{Namespace: nsEcho, Key: "other", Fingerprint: fpA},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Outcome != spent.Fresh || res[0].ResultOmitted || !bytes.Equal(res[0].Record.Result, mine) {
			t.Fatalf("results[0]: got %v with %d bytes, omitted %v; want fresh with the 900 bytes sent", res[0].Outcome, len(res[0].Record.Result), res[0].ResultOmitted)
		}
	})
	t.Run("ReadFailsLeavesOmitted", func(t *testing.T) {
		// When the ledger cannot read an omitted result, the replay keeps
		// its outcome and is marked: the caller reads it later.
		f := mustOpen(t, func(c *spent.Config) { c.MaxBatchResult = 1000 })
		f.claim(t, spent.Claim{Namespace: nsEcho, Key: "a", Fingerprint: fpA, Result: bytes.Repeat([]byte("a"), 400)})
		f.store.SetFaults(inmem.Faults{Before: func(op string) error {
			if op == "get" {
				return errors.New("read failed")
			}
			return nil
		}})
		cs := []spent.Claim{{Namespace: nsEcho, Key: "a", Fingerprint: fpA}, {Namespace: nsEcho, Key: "a", Fingerprint: fpA}, {Namespace: nsEcho, Key: "a", Fingerprint: fpA}}
		res, err := f.ledger.ClaimBatch(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range res {
			if res[i].Outcome != spent.Replayed || !res[i].ResultOmitted || res[i].Record.Result != nil {
				t.Fatalf("results[%d]: got %v with %d bytes, omitted %v; want replayed, omitted", i, res[i].Outcome, len(res[i].Record.Result), res[i].ResultOmitted)
			}
		}
	})
}

func TestMaxBatchResultValidated(t *testing.T) {
	for _, n := range []int{0, -1} {
		cfg := spent.DefaultConfig()
		cfg.Secret = testSecret
		cfg.MaxBatchResult = n
		if err := cfg.Validate(); err == nil {
			t.Fatalf("MaxBatchResult %d: got no error, want one", n)
		}
	}
}

func TestQuoteInput(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"ns", `"ns"`},
		{string(bytes.Repeat([]byte("a"), spent.MaxQuote)), `"` + string(bytes.Repeat([]byte("a"), spent.MaxQuote)) + `"`},
		{string(bytes.Repeat([]byte("a"), 30<<20)), `"` + string(bytes.Repeat([]byte("a"), spent.MaxQuote)) + `"… (31457280 bytes)`},
		// A cut never splits a character: é is 2 bytes, so 63 'a' + é is
		// cut before é.
		{string(bytes.Repeat([]byte("a"), spent.MaxQuote-1)) + "éé", `"` + string(bytes.Repeat([]byte("a"), spent.MaxQuote-1)) + `"… (67 bytes)`},
	}
	for _, tc := range cases {
		if got := spent.QuoteInput(tc.in); got != tc.want {
			t.Fatalf("QuoteInput of %d bytes: got %.100s, want %.100s", len(tc.in), got, tc.want)
		}
	}
}
