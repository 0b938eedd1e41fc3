package redis_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/redis"
)

// seqOp is a one-step claim of key h by node with counter, expiring at exp.
func seqOp(h spent.Hash, node uint32, counter uint64, now, exp time.Time) spent.ClaimOp {
	return spent.ClaimOp{Now: now, Record: spent.Record{
		Namespace: "ns", Hash: h, FirstSeen: now, Place: "p", State: spent.StateComplete,
		Result: []byte("result"), ExpiresAt: exp, Seq: spent.Seq{Node: node, Counter: counter},
	}}
}

// testSeqOneTag lists records that all sit in one hash tag, more than a
// first page holds, beside records spread over the tags: ListSeq must ask
// that tag again and again, and still answer in counter order.
func testSeqOneTag(t *testing.T, s *redis.Store) {
	ctx := context.Background()
	now := time.Now()
	var ops []spent.ClaimOp
	for i := 1; i <= 400; i++ {
		h := hashOf(fmt.Sprint("seq key ", i))
		if i%8 != 0 {
			h[0] = 0x42 // 350 of 400 in one tag
		}
		ops = append(ops, seqOp(h, 5, uint64(i), now, now.Add(time.Hour)))
	}
	if _, err := s.ClaimBatch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		q          spent.SeqQuery
		first, end uint64
	}{
		{"First300", spent.SeqQuery{Node: 5, To: math.MaxUint64, Limit: 300}, 1, 300},
		{"Last300", spent.SeqQuery{Node: 5, To: math.MaxUint64, Limit: 300, Descending: true}, 400, 101},
		{"Range", spent.SeqQuery{Node: 5, From: 17, To: 333, Limit: 1000}, 17, 333},
		{"RangeDescending", spent.SeqQuery{Node: 5, From: 17, To: 333, Limit: 100, Descending: true}, 333, 234},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Now = now
			recs, err := s.ListSeq(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			step := uint64(1)
			if tc.first > tc.end {
				step = math.MaxUint64 // -1
			}
			want := tc.first
			for i, r := range recs {
				if r.Seq != (spent.Seq{Node: 5, Counter: want}) || r.ResultLen != len("result") {
					t.Fatalf("record %d: got seq %s, result length %d; want 5:%d, %d", i, r.Seq, r.ResultLen, want, len("result"))
				}
				want += step
			}
			if n := int(max(tc.first, tc.end) - min(tc.first, tc.end) + 1); len(recs) != n {
				t.Fatalf("got %d records, want %d", len(recs), n)
			}
		})
	}
}

// testSeqIndexTrimmed checks that the entries of records Redis forgot at
// their expiry leave the seq index: DeleteExpired trims them, going round
// the index, and ListSeq removes those it steps over.
func testSeqIndexTrimmed(t *testing.T, s *redis.Store, zcard func(key string) (int64, error)) {
	ctx := context.Background()
	real0 := time.Now()
	const node = 9
	if _, err := s.ReserveSeq(ctx, node, 100); err != nil {
		t.Fatal(err)
	}
	key := func(i int) spent.Hash {
		h := hashOf(fmt.Sprint("seq trim ", i))
		h[0] = 0x6b
		return h
	}
	for i := range 20 {
		exp := real0.Add(time.Hour)
		if i%2 == 1 {
			exp = real0.Add(200 * time.Millisecond)
		}
		if res, err := s.Claim(ctx, seqOp(key(i), node, uint64(i+1), real0, exp)); err != nil || !res.Inserted {
			t.Fatalf("Claim: %v, %v", res.Inserted, err)
		}
	}
	entries := func() int64 {
		n, err := zcard(s.SeqIndexKey(key(0), node))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := entries(); n != 20 {
		t.Fatalf("seq index entries: got %d, want 20", n)
	}
	time.Sleep(time.Until(real0.Add(300 * time.Millisecond)))
	for range 10 {
		if _, err := s.DeleteExpired(ctx, time.Now(), 3); err != nil {
			t.Fatal(err)
		}
	}
	if n := entries(); n != 10 {
		t.Fatalf("seq index entries after 10 DeleteExpired of 3: got %d, want the 10 live ones", n)
	}
	// Forgotten again, now left for ListSeq to remove.
	for i := 20; i < 30; i++ {
		if _, err := s.Claim(ctx, seqOp(key(i), node, uint64(i+1), real0, time.Now().Add(100*time.Millisecond))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	recs, err := s.ListSeq(ctx, spent.SeqQuery{Node: node, To: math.MaxUint64, Limit: 100, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 10 {
		t.Fatalf("ListSeq: got %d records, want the 10 live ones", len(recs))
	}
	if n := entries(); n != 10 {
		t.Fatalf("seq index entries after ListSeq: got %d, want 10", n)
	}
}
