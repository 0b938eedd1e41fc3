package storetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/spentledger/spent"
)

// bigRecord is a complete record of key i whose result is n bytes long.
func bigRecord(i, n int) spent.Record {
	r := completeRecord(nsEchoHold, i, epoch.Add(testRetention))
	r.Result = bytes.Repeat([]byte{byte('a' + i%26)}, n)
	return r
}

// wantOmitted checks that res answers with rec, its result left out.
func wantOmitted(tb testing.TB, what string, res spent.ClaimAnswer, rec spent.Record) {
	tb.Helper()
	if res.Inserted || !res.ResultOmitted || res.Record.Result != nil || res.ResultLen != len(rec.Result) {
		tb.Fatalf("%s: got inserted %v, omitted %v, %d result bytes, length %d; want the live record without its %d-byte result",
			what, res.Inserted, res.ResultOmitted, len(res.Record.Result), res.ResultLen, len(rec.Result))
	}
	want := rec
	want.Result = nil
	checkRecord(tb, what, res.Record, want)
}

// wantWhole checks that res answers with rec, result and all.
func wantWhole(tb testing.TB, what string, res spent.ClaimAnswer, rec spent.Record) {
	tb.Helper()
	if res.Inserted || res.ResultOmitted || res.ResultLen != 0 {
		tb.Fatalf("%s: got inserted %v, omitted %v, length %d; want the live record with its result", what, res.Inserted, res.ResultOmitted, res.ResultLen)
	}
	checkRecord(tb, what, res.Record, rec)
}

// testResultLimit checks ClaimOp.ResultLimit on the store, and the batch
// budget it serves through the ledger (and the service, when wrapped).
func testResultLimit(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("ClaimLeavesLongResultOut", func(t *testing.T) {
		s := newEnv(t, h).store
		rec := bigRecord(1, 1000)
		put(t, s, rec, epoch)
		other := bigRecord(1, 10)
		other.Seq.Counter = 9000
		for _, tc := range []struct {
			limit   int
			omitted bool
		}{{999, true}, {1, true}, {1000, false}, {1001, false}, {0, false}, {-1, false}} {
			res, err := s.Claim(ctx, spent.ClaimOp{Record: other, Now: epoch, ResultLimit: tc.limit})
			wantErr(t, "Claim", err, nil)
			what := "Claim with ResultLimit " + itoa(tc.limit)
			if tc.omitted {
				wantOmitted(t, what, res, rec)
			} else {
				wantWhole(t, what, res, rec)
			}
		}
		// The record is untouched.
		got, err := s.Get(ctx, rec.Hash, epoch)
		wantErr(t, "Get", err, nil)
		checkRecord(t, "record after limited claims", got, rec)
	})

	t.Run("LimitNeverChangesWhatIsDecided", func(t *testing.T) {
		s := newEnv(t, h).store
		// An insert returns its own record, whatever its size.
		mine := bigRecord(1, 1000)
		res, err := s.Claim(ctx, spent.ClaimOp{Record: mine, Now: epoch, ResultLimit: 10})
		wantErr(t, "Claim", err, nil)
		if !res.Inserted || res.ResultOmitted {
			t.Fatalf("inserting claim with a small limit: got inserted %v, omitted %v; want inserted, not omitted", res.Inserted, res.ResultOmitted)
		}
		// A pending record and an empty result have nothing to leave out.
		p := pendingRecord(nsEchoHold, 2, epoch.Add(testLease), epoch.Add(testRetention))
		put(t, s, p, epoch)
		empty := completeRecord(nsEchoHold, 3, epoch.Add(testRetention))
		empty.Result = []byte{}
		put(t, s, empty, epoch)
		for i, rec := range []spent.Record{p, empty} {
			op := bigRecord(20+i, 1)
			op.Hash, op.Seq.Counter = rec.Hash, uint64(9100+i)
			res, err := s.Claim(ctx, spent.ClaimOp{Record: op, Now: epoch, ResultLimit: 1})
			wantErr(t, "Claim", err, nil)
			wantWhole(t, "claim of a "+rec.State.String()+" record with ResultLimit 1", res, rec)
		}
		// A retake of an expired lease still inserts.
		retaken := bigRecord(2, 5)
		retaken.Seq.Counter = 9200
		res, err = s.Claim(ctx, spent.ClaimOp{Record: retaken, Now: epoch.Add(testLease), Retake: true, ResultLimit: 1})
		wantErr(t, "Claim", err, nil)
		if !res.Inserted {
			t.Fatalf("retake with a limit: got not inserted, want inserted")
		}
	})

	t.Run("ClaimBatchLimitsEachOp", func(t *testing.T) {
		s := newEnv(t, h).store
		stored := bigRecord(1, 1000)
		put(t, s, stored, epoch)
		// Key 2 is written by the batch itself, then claimed again in it.
		inBatch := bigRecord(2, 500)
		again := bigRecord(2, 1)
		again.Seq.Counter = 9300
		other := bigRecord(1, 1)
		other.Seq.Counter = 9301
		ops := []spent.ClaimOp{
			{Record: other, Now: epoch, ResultLimit: 100},
			{Record: other, Now: epoch},
			{Record: inBatch, Now: epoch, ResultLimit: 100},
			{Record: again, Now: epoch, ResultLimit: 499},
			{Record: again, Now: epoch, ResultLimit: 500},
			{Record: other, Now: epoch, ResultLimit: 2000},
		}
		res, err := s.ClaimBatch(ctx, ops)
		wantErr(t, "ClaimBatch", err, nil)
		if len(res) != len(ops) {
			t.Fatalf("results: got %d, want %d", len(res), len(ops))
		}
		wantOmitted(t, "ops[0], limit 100", res[0], stored)
		wantWhole(t, "ops[1], no limit", res[1], stored)
		if !res[2].Inserted || res[2].ResultOmitted {
			t.Fatalf("ops[2]: got inserted %v, omitted %v; want inserted", res[2].Inserted, res[2].ResultOmitted)
		}
		wantOmitted(t, "ops[3], the batch's own record over the limit", res[3], inBatch)
		wantWhole(t, "ops[4], the batch's own record at the limit", res[4], inBatch)
		wantWhole(t, "ops[5], limit 2000", res[5], stored)
	})

	t.Run("BatchKeepsToItsBudget", func(t *testing.T) {
		// Through the ledger (and the wrapping service, if any): a batch
		// whose replays hold more than the budget carries the first ones
		// that fit and marks the others; Get reads the rest.
		const budget, size = 100 << 10, 30 << 10
		e := newEnv(t, h, withConfig(func(c *spent.Config) { c.MaxBatchResult = budget }))
		big := bytes.Repeat([]byte("R"), size)
		e.claimWant(oneStep(nsEchoRetake, "big", big), spent.Fresh)
		e.claimWant(oneStep(nsEchoRetake, "small", []byte("s")), spent.Fresh)
		cs := []spent.Claim{twoStep(nsEchoRetake, "big"), twoStep(nsEchoRetake, "small")}
		for range 6 {
			cs = append(cs, twoStep(nsEchoRetake, "big"))
		}
		cs = append(cs, twoStep(nsEchoRetake, "small"), twoStep(nsEchoRetake, "new"))
		res, err := e.svc.ClaimBatch(ctx, cs)
		wantCode(t, "ClaimBatch", err, "")
		if len(res) != len(cs) {
			t.Fatalf("results: got %d, want %d", len(res), len(cs))
		}
		total, carried := 0, 0
		for i, r := range res[:len(res)-1] {
			if r.Outcome != spent.Replayed {
				t.Fatalf("results[%d]: got %v, want replayed", i, r.Outcome)
			}
			switch {
			case r.ResultOmitted && r.Record.Result == nil:
			case !r.ResultOmitted && cs[i].Key == "big" && bytes.Equal(r.Record.Result, big):
				carried++
			case !r.ResultOmitted && cs[i].Key == "small" && string(r.Record.Result) == "s":
			default:
				t.Fatalf("results[%d]: got %d bytes, omitted %v; want the stored result or none and omitted", i, len(r.Record.Result), r.ResultOmitted)
			}
			total += len(r.Record.Result)
		}
		if want := budget / size; carried != want {
			t.Fatalf("replays of big carrying the result: got %d, want %d (the first that fit in %d bytes)", carried, want, budget)
		}
		if total > budget {
			t.Fatalf("result bytes: got %d, want at most %d", total, budget)
		}
		if res[0].ResultOmitted || res[1].ResultOmitted || res[len(res)-2].ResultOmitted {
			t.Fatalf("the first replays and the small one: got omitted, want their results carried")
		}
		if last := res[len(res)-1]; last.Outcome != spent.Fresh || last.ResultOmitted {
			t.Fatalf("new key: got %v, omitted %v; want fresh", last.Outcome, last.ResultOmitted)
		}
		r, err := e.get(nsEchoRetake, "big")
		wantCode(t, "Get of an omitted result", err, "")
		if !bytes.Equal(r.Result, big) {
			t.Fatalf("Get of an omitted result: got %d bytes, want the %d stored", len(r.Result), size)
		}
		// A single claim carries the result whatever its size.
		one := e.claimWant(twoStep(nsEchoRetake, "big"), spent.Replayed)
		if one.ResultOmitted || !bytes.Equal(one.Record.Result, big) {
			t.Fatalf("single claim: got %d bytes, omitted %v; want the stored result", len(one.Record.Result), one.ResultOmitted)
		}
	})
}
