package etcd_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent"
)

// TestSeqIndexFollowsRecords checks that every write that removes or
// replaces a record removes its seq-index entry in the same transaction:
// after releases, retakes and a purge, the store holds one entry per
// record, and ListSeq pages through more entries than one read returns.
func TestSeqIndexFollowsRecords(t *testing.T) {
	ctx := context.Background()
	opts := testOptions(t, prefixFor(t.TempDir()))
	s := MustOpen(t, opts)
	exp := t0.Add(time.Hour)
	var ops []spent.ClaimOp
	for i := range 600 {
		key := fmt.Sprint("seq key ", i)
		op := completeOp(key, uint64(i+1), t0, exp)
		switch i % 3 {
		case 0: // released below
			op = pendingOp("ns", key, uint64(i+1), t0, t0.Add(time.Minute), exp)
		case 1: // retaken below
			op = pendingOp("retake", key, uint64(i+1), t0, t0.Add(time.Minute), exp)
		}
		ops = append(ops, op)
	}
	if _, err := s.ClaimBatch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	for i, op := range ops {
		r := op.Record
		switch i % 3 {
		case 0:
			if err := s.Release(ctx, r.Hash, r.Seq, t0); err != nil {
				t.Fatal(err)
			}
		case 1:
			r.Seq.Counter += 10000
			r.LeaseUntil = t0.Add(2 * time.Minute)
			if res := mustClaim(t, s, spent.ClaimOp{Record: r, Now: t0.Add(time.Minute), Retake: true}); !res.Inserted {
				t.Fatalf("retake of record %d: got not inserted, want inserted", i)
			}
		}
	}
	count := func(prefix string) int64 {
		resp, err := s.Client().Get(ctx, opts.Prefix+prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if r, q := count("r/"), count("q/"); r != 400 || q != r {
		t.Fatalf("got %d records and %d seq-index entries, want 400 of each", r, q)
	}
	recs, err := s.ListSeq(ctx, spent.SeqQuery{Node: 1, To: math.MaxUint64, Descending: true, Limit: 1000, Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 400 || recs[0].Seq.Counter != 10599 || recs[399].Seq.Counter != 3 {
		t.Fatalf("ListSeq: got %d records, from %v to %v; want 400, from 1:10599 down to 1:3", len(recs), recs[0].Seq, recs[len(recs)-1].Seq)
	}
	for {
		n, err := s.Purge(ctx, "retake", 100)
		if err != nil {
			t.Fatal(err)
		}
		if n < 100 {
			break
		}
	}
	if r, q := count("r/"), count("q/"); r != 200 || q != r {
		t.Fatalf("after the purge: got %d records and %d seq-index entries, want 200 of each", r, q)
	}
}
