package storetest

import (
	"bytes"
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// seqNodeB is a second node whose records the index tests write beside
// storeNode's, with the same counters, to show that a node never lists
// another's records.
const seqNodeB = storeNode + 1

// seqLister returns the store as a spent.SeqLister, found with
// spent.StoreAs (so under any wrapper store), failing the test when it is
// not one.
func seqLister(tb testing.TB, s spent.Store) spent.SeqLister {
	tb.Helper()
	sl, ok := spent.StoreAs[spent.SeqLister](s)
	if !ok {
		tb.Fatalf("store %T: got no spent.SeqLister, want one (every store keeps the index by seq)", s)
	}
	return sl
}

// listSeq runs q and fails the test on error.
func listSeq(tb testing.TB, s spent.Store, q spent.SeqQuery) []spent.SeqRecord {
	tb.Helper()
	recs, err := seqLister(tb, s).ListSeq(context.Background(), q)
	if err != nil {
		tb.Fatalf("ListSeq(node %d, %d..%d, descending %v, limit %d): got error %v, want none", q.Node, q.From, q.To, q.Descending, q.Limit, err)
	}
	return recs
}

// seqsOf returns the seqs of recs, in order.
func seqsOf(recs []spent.SeqRecord) []spent.Seq {
	out := make([]spent.Seq, len(recs))
	for i := range recs {
		out[i] = recs[i].Seq
	}
	return out
}

// counters returns the seqs of node with the given counters.
func counters(node uint32, cs ...uint64) []spent.Seq {
	out := make([]spent.Seq, len(cs))
	for i, c := range cs {
		out[i] = spent.Seq{Node: node, Counter: c}
	}
	return out
}

// wantSeqs checks that recs list exactly want, in order.
func wantSeqs(tb testing.TB, what string, recs []spent.SeqRecord, want []spent.Seq) {
	tb.Helper()
	if got := seqsOf(recs); !slices.Equal(got, want) {
		tb.Fatalf("%s: got seqs %v, want %v", what, got, want)
	}
}

// seqQuery is a query of node over every counter, ascending, at now.
func seqQuery(node uint32, now time.Time) spent.SeqQuery {
	return spent.SeqQuery{Node: node, From: 0, To: math.MaxUint64, Limit: 1000, Now: now}
}

// testSeq checks the index by seq ([spent.SeqLister]) of the store, and
// [spent.Ledger.Seq] over it.
func testSeq(t *testing.T, h Harness) {
	ctx := context.Background()
	if h.NoSeqIndex {
		t.Skip("storetest: Harness.NoSeqIndex: this test store keeps no index by seq")
	}

	t.Run("OrderRangesAndLimits", func(t *testing.T) {
		s := newEnv(t, h).store
		exp := epoch.Add(testRetention)
		for i := 1; i <= 10; i++ {
			put(t, s, completeRecord(nsEchoHold, i, exp), epoch)
			b := completeRecord(nsRefuseHold, 100+i, exp)
			b.Seq = spent.Seq{Node: seqNodeB, Counter: uint64(1000 + i)}
			put(t, s, b, epoch)
		}
		all := counters(storeNode, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010)
		rev := slices.Clone(all)
		slices.Reverse(rev)
		q := func(from, to uint64, desc bool, limit int) spent.SeqQuery {
			return spent.SeqQuery{Node: storeNode, From: from, To: to, Descending: desc, Limit: limit, Now: epoch}
		}
		for _, tc := range []struct {
			name string
			q    spent.SeqQuery
			want []spent.Seq
		}{
			{"All", q(0, math.MaxUint64, false, 100), all},
			{"AllDescending", q(0, math.MaxUint64, true, 100), rev},
			{"Range", q(1003, 1006, false, 100), all[2:6]},
			{"RangeDescending", q(1003, 1006, true, 100), counters(storeNode, 1006, 1005, 1004, 1003)},
			{"OneCounter", q(1005, 1005, false, 100), all[4:5]},
			{"Limit", q(0, math.MaxUint64, false, 3), all[:3]},
			{"LastThree", q(0, math.MaxUint64, true, 3), rev[:3]},
			{"LimitInRange", q(1004, 1009, true, 2), counters(storeNode, 1009, 1008)},
			{"LimitOfExactlyAll", q(0, math.MaxUint64, false, 10), all},
			{"ZeroLimit", q(0, math.MaxUint64, false, 0), nil},
			{"NegativeLimit", q(0, math.MaxUint64, false, -1), nil},
			{"RangeAbove", q(1011, 5000, false, 100), nil},
			{"RangeBelow", q(1, 1000, true, 100), nil},
			{"FromAfterTo", q(1006, 1003, false, 100), nil},
			{"OtherNode", spent.SeqQuery{Node: seqNodeB, To: math.MaxUint64, Limit: 100, Now: epoch},
				counters(seqNodeB, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010)},
			{"NodeWithoutRecords", spent.SeqQuery{Node: storeNode + 2, To: math.MaxUint64, Limit: 100, Now: epoch}, nil},
			{"NodeZero", spent.SeqQuery{Node: 0, To: math.MaxUint64, Limit: 100, Now: epoch}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantSeqs(t, "ListSeq", listSeq(t, s, tc.q), tc.want)
			})
		}
	})

	t.Run("RecordsComeWithoutResult", func(t *testing.T) {
		s := newEnv(t, h).store
		big := completeRecord(nsEchoHold, 1, epoch.Add(testRetention))
		big.Result = bytes.Repeat([]byte("x"), 100_000)
		big.RawKey = "raw key one"
		empty := completeRecord(nsEchoHold, 2, epoch.Add(testRetention))
		empty.Result = []byte{}
		p := pendingRecord(nsRefuseHold, 3, epoch.Add(testLease), epoch.Add(testRetention))
		for _, r := range []spent.Record{big, empty, p} {
			put(t, s, r, epoch)
		}
		recs := listSeq(t, s, seqQuery(storeNode, epoch))
		wantSeqs(t, "ListSeq", recs, []spent.Seq{big.Seq, empty.Seq, p.Seq})
		for i, tc := range []struct {
			rec spent.Record
			n   int
		}{{big, 100_000}, {empty, 0}, {p, 0}} {
			got := recs[i]
			if got.ResultLen != tc.n {
				t.Fatalf("record %s: got result length %d, want %d", got.Seq, got.ResultLen, tc.n)
			}
			if got.Result != nil {
				t.Fatalf("record %s: got %d result bytes, want none (nil)", got.Seq, len(got.Result))
			}
			want := tc.rec
			want.Result = nil
			// A store may leave the raw key out or in; the ledger
			// clears it.
			got.RawKey = want.RawKey
			checkRecord(t, "listed record", got.Record, want)
		}
	})

	t.Run("SkipsReleasedExpiredAndRetaken", func(t *testing.T) {
		s := newEnv(t, h).store
		exp := epoch.Add(testRetention)
		lease := epoch.Add(testLease)
		// 1: released. 2: complete, stays. 3: pending, retaken by 3003.
		// 4: expires early and is claimed again by 4004. 5: completed.
		// 6: pending, retaken by another node.
		rel := pendingRecord(nsEchoRetake, 1, lease, exp)
		keep := completeRecord(nsEchoRetake, 2, exp)
		taken := pendingRecord(nsEchoRetake, 3, lease, exp)
		short := completeRecord(nsEchoRetake, 4, epoch.Add(2*testLease))
		done := pendingRecord(nsEchoRetake, 5, lease, exp)
		elsewhere := pendingRecord(nsEchoRetake, 6, lease, exp)
		for _, r := range []spent.Record{rel, keep, taken, short, done, elsewhere} {
			put(t, s, r, epoch)
		}
		wantErr(t, "Release", s.Release(ctx, rel.Hash, rel.Seq, epoch), nil)
		_, err := s.Complete(ctx, done.Hash, done.Seq, []byte("done"), epoch)
		wantErr(t, "Complete", err, nil)
		retake := pendingRecord(nsEchoRetake, 3, lease.Add(testLease), exp)
		retake.Seq.Counter = 3003
		res, err := s.Claim(ctx, spent.ClaimOp{Record: retake, Now: lease, Retake: true})
		wantErr(t, "Claim (retake)", err, nil)
		if !res.Inserted {
			t.Fatalf("retake at the end of the lease: got not inserted, want inserted")
		}
		again := completeRecord(nsEchoRetake, 4, exp)
		again.Seq.Counter = 4004
		put(t, s, again, short.ExpiresAt)
		other := pendingRecord(nsEchoRetake, 6, lease.Add(testLease), exp)
		other.Seq = spent.Seq{Node: seqNodeB, Counter: 6006}
		res, err = s.Claim(ctx, spent.ClaimOp{Record: other, Now: lease, Retake: true})
		wantErr(t, "Claim (retake by another node)", err, nil)
		if !res.Inserted {
			t.Fatalf("retake by another node at the end of the lease: got not inserted, want inserted")
		}
		wantSeqs(t, "ListSeq of the other node", listSeq(t, s, seqQuery(seqNodeB, short.ExpiresAt)), []spent.Seq{other.Seq})

		at := short.ExpiresAt
		recs := listSeq(t, s, seqQuery(storeNode, at))
		wantSeqs(t, "ListSeq after release, retake and reclaim", recs, []spent.Seq{keep.Seq, done.Seq, retake.Seq, again.Seq})
		if recs[1].State != spent.StateComplete || recs[1].ResultLen != len("done") {
			t.Fatalf("completed record: got state %v, result length %d; want complete, %d", recs[1].State, recs[1].ResultLen, len("done"))
		}
		// A nanosecond before the reclaim, the short record was still
		// live, but its key now holds the reclaim's record: its seq is
		// never listed again.
		recs = listSeq(t, s, seqQuery(storeNode, at.Add(-time.Nanosecond)))
		wantSeqs(t, "ListSeq a nanosecond earlier", recs, []spent.Seq{keep.Seq, done.Seq, retake.Seq, again.Seq})
		wantSeqs(t, "ListSeq descending, limit 2", listSeq(t, s, spent.SeqQuery{Node: storeNode, To: math.MaxUint64, Descending: true, Limit: 2, Now: at}),
			[]spent.Seq{again.Seq, retake.Seq})
		// At their expires_at, every record is gone.
		wantSeqs(t, "ListSeq at expires_at", listSeq(t, s, seqQuery(storeNode, exp)), nil)
		wantSeqs(t, "ListSeq 1ns before expires_at", listSeq(t, s, seqQuery(storeNode, exp.Add(-time.Nanosecond))),
			[]spent.Seq{keep.Seq, done.Seq, retake.Seq, again.Seq})
	})

	t.Run("SweptAndPurgedAreGone", func(t *testing.T) {
		s := newEnv(t, h).store
		exp := epoch.Add(testRetention)
		a := completeRecord(nsEchoHold, 1, epoch.Add(testLease))
		b := completeRecord(nsRefuseHold, 2, exp)
		c := completeRecord(nsEchoHold, 3, exp)
		for _, r := range []spent.Record{a, b, c} {
			put(t, s, r, epoch)
		}
		if _, err := s.DeleteExpired(ctx, epoch.Add(testLease), 100); err != nil {
			t.Fatalf("DeleteExpired: got error %v, want none", err)
		}
		for {
			n, err := s.Purge(ctx, nsRefuseHold, 100)
			wantErr(t, "Purge", err, nil)
			if n < 100 {
				break
			}
		}
		// Read at the epoch, when the swept record was live: only a
		// store that forgets by itself on the real clock still holds it,
		// so it is read after its expiry there.
		at := epoch
		if h.NativeExpiry {
			at = a.ExpiresAt
		}
		wantSeqs(t, "ListSeq after sweep and purge", listSeq(t, s, seqQuery(storeNode, at)), []spent.Seq{c.Seq})
		// A record claimed under the swept key gets its own seq; the
		// old one stays gone.
		a2 := completeRecord(nsEchoHold, 1, exp)
		a2.Seq.Counter = 5001
		put(t, s, a2, epoch.Add(testLease))
		wantSeqs(t, "ListSeq after a new claim of the swept key", listSeq(t, s, seqQuery(storeNode, epoch.Add(testLease))), []spent.Seq{c.Seq, a2.Seq})
	})

	t.Run("BatchAndDurability", func(t *testing.T) {
		e := newEnv(t, h)
		exp := epoch.Add(testRetention)
		var ops []spent.ClaimOp
		var want []spent.Seq
		for i := 1; i <= 50; i++ {
			r := completeRecord(nsEchoHold, i, exp)
			ops = append(ops, spent.ClaimOp{Record: r, Now: epoch})
			want = append(want, r.Seq)
		}
		// A repeat in the batch inserts nothing: its seq is never listed.
		dup := completeRecord(nsEchoHold, 1, exp)
		dup.Seq.Counter = 9999
		ops = append(ops, spent.ClaimOp{Record: dup, Now: epoch})
		if _, err := e.store.ClaimBatch(ctx, ops); err != nil {
			t.Fatalf("ClaimBatch: got error %v, want none", err)
		}
		wantSeqs(t, "ListSeq after ClaimBatch", listSeq(t, e.store, seqQuery(storeNode, epoch)), want)
		e.reopen()
		wantSeqs(t, "ListSeq after reopen", listSeq(t, e.store, seqQuery(storeNode, epoch)), want)
	})

	t.Run("Ledger", func(t *testing.T) {
		e := newEnv(t, h, withoutWrap())
		var seqs []spent.Seq
		for i := range 12 {
			a := e.claimWant(spent.Claim{Namespace: nsEchoHold, Key: "seq key " + itoa(i), Result: []byte("r" + itoa(i))}, spent.Fresh)
			seqs = append(seqs, a.Record.Seq)
		}
		// A released claim is not listed.
		rel := e.claimWant(spent.Claim{Namespace: nsEchoHold, Key: "released"}, spent.Fresh)
		if err := e.ledger.Release(ctx, spent.Release{Namespace: nsEchoHold, Key: "released", Seq: rel.Record.Seq}); err != nil {
			t.Fatalf("Release: got error %v, want none", err)
		}
		seq := func(t *testing.T, req spent.SeqRequest) []spent.SeqRecord {
			t.Helper()
			a, err := e.ledger.Seq(ctx, req)
			if err != nil {
				t.Fatalf("Seq(%+v): got error %v, want none", req, err)
			}
			if a.Node != req.Node {
				t.Fatalf("Seq(%+v): got node %d, want %d", req, a.Node, req.Node)
			}
			for _, r := range a.Records {
				if r.RawKey != "" || r.Result != nil {
					t.Fatalf("Seq(%+v): record %s: got raw key %q and %d result bytes, want neither", req, r.Seq, r.RawKey, len(r.Result))
				}
				if r.ResultLen != 2 && r.ResultLen != 3 {
					t.Fatalf("Seq(%+v): record %s: got result length %d, want 2 or 3", req, r.Seq, r.ResultLen)
				}
			}
			return a.Records
		}
		mid := seqs[6].Counter
		for _, tc := range []struct {
			name string
			req  spent.SeqRequest
			want []spent.Seq
		}{
			{"LastFive", spent.SeqRequest{Node: testNode, Last: 5}, seqs[7:]},
			{"LastMoreThanThere", spent.SeqRequest{Node: testNode, Last: 100}, seqs},
			{"AroundFour", spent.SeqRequest{Node: testNode, Around: mid, Limit: 4}, seqs[4:8]},
			{"AroundFiveTakesThreeFromIt", spent.SeqRequest{Node: testNode, Around: mid, Limit: 5}, seqs[4:9]},
			{"AroundTheFirst", spent.SeqRequest{Node: testNode, Around: seqs[0].Counter, Limit: 4}, seqs[:2]},
			{"FromTo", spent.SeqRequest{Node: testNode, From: seqs[2].Counter, To: seqs[5].Counter}, seqs[2:6]},
			{"FromToLimit", spent.SeqRequest{Node: testNode, From: seqs[2].Counter, To: seqs[9].Counter, Limit: 3}, seqs[2:5]},
			{"FromOnly", spent.SeqRequest{Node: testNode, From: seqs[10].Counter}, seqs[10:]},
			{"OtherNode", spent.SeqRequest{Node: testNode + 1, Last: 10}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantSeqs(t, "Seq", seq(t, tc.req), tc.want)
			})
		}
	})
}
