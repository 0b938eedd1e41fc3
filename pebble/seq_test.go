package pebble_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/pebble"
)

// seqRecord is a one-step record of key i written by node with counter,
// expiring a day after now.
func seqRecord(node uint32, counter uint64, i int, now time.Time) spent.Record {
	var h spent.Hash
	binary.BigEndian.PutUint32(h[:4], node)
	binary.BigEndian.PutUint64(h[4:12], uint64(i))
	h[15] = 0x5e
	return spent.Record{
		Namespace: "tickets", Hash: h, FirstSeen: now, Place: "gate-12",
		State: spent.StateComplete, Result: []byte("ok"), ExpiresAt: now.Add(24 * time.Hour),
		Seq: spent.Seq{Node: node, Counter: counter},
	}
}

// fillSeq writes n records of node, counters 1..n, in batches of
// spent.MaxBatch claims.
func fillSeq(tb testing.TB, s spent.Store, node uint32, n int, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	ops := make([]spent.ClaimOp, 0, spent.MaxBatch)
	flush := func() {
		if len(ops) == 0 {
			return
		}
		res, err := s.ClaimBatch(ctx, ops)
		if err != nil {
			tb.Fatalf("ClaimBatch: %v", err)
		}
		for i := range res {
			if !res[i].Inserted {
				tb.Fatalf("ClaimBatch: record %s: got not inserted, want inserted", ops[i].Record.Seq)
			}
		}
		ops = ops[:0]
	}
	for i := 1; i <= n; i++ {
		ops = append(ops, spent.ClaimOp{Record: seqRecord(node, uint64(i), i, now), Now: now})
		if len(ops) == cap(ops) {
			flush()
		}
	}
	flush()
}

// steps returns how many keys an iterator stepped over or sought, in the
// engine: a scan of the index would count every entry.
func steps(st pdb.IteratorStats) int {
	k := pdb.InternalIterCall
	return st.ForwardStepCount[k] + st.ReverseStepCount[k] + st.ForwardSeekCount[k] + st.ReverseSeekCount[k]
}

// TestListSeqStepsOverWhatItReturns shows that ListSeq answers from the
// index, not by a scan: with 100,000 records of node 1 and 20,000 of node 2
// stored, each query steps over at most the entries it returns plus a
// constant.
func TestListSeqStepsOverWhatItReturns(t *testing.T) {
	const records = 100_000
	s := MustOpen(t, t.TempDir())
	now := time.Now()
	fillSeq(t, s, 1, records, now)
	fillSeq(t, s, 2, 20_000, now)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	var last pdb.IteratorStats
	pebble.SetSeqIterStats(func(st pdb.IteratorStats) { last = st })
	t.Cleanup(func() { pebble.SetSeqIterStats(nil) })
	for _, tc := range []struct {
		name       string
		q          spent.SeqQuery
		first, end uint64 // the counters listed, first to end, inclusive
	}{
		{"LastHundred", spent.SeqQuery{Node: 1, To: math.MaxUint64, Descending: true, Limit: 100}, records, records - 99},
		{"LastTenThousand", spent.SeqQuery{Node: 1, To: math.MaxUint64, Descending: true, Limit: 10_000}, records, records - 9_999},
		{"AroundTheMiddle", spent.SeqQuery{Node: 1, From: 50_000, To: math.MaxUint64, Limit: 100}, 50_000, 50_099},
		{"BeforeTheMiddle", spent.SeqQuery{Node: 1, To: 49_999, Descending: true, Limit: 100}, 49_999, 49_900},
		{"FirstTen", spent.SeqQuery{Node: 1, From: 1, To: 10, Limit: 1000}, 1, 10},
		{"LastOfNodeTwo", spent.SeqQuery{Node: 2, To: math.MaxUint64, Descending: true, Limit: 50}, 20_000, 19_951},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Now = now
			recs, err := s.ListSeq(context.Background(), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			n := int(max(tc.first, tc.end) - min(tc.first, tc.end) + 1)
			if len(recs) != n {
				t.Fatalf("got %d records, want %d", len(recs), n)
			}
			if recs[0].Seq.Counter != tc.first || recs[n-1].Seq.Counter != tc.end {
				t.Fatalf("got counters %d..%d, want %d..%d", recs[0].Seq.Counter, recs[n-1].Seq.Counter, tc.first, tc.end)
			}
			t.Logf("%d keys stepped over for %d records", steps(last), n)
			if got, most := steps(last), n+4; got > most {
				t.Fatalf("got %d keys stepped over for %d records, want at most %d (a scan steps over %d)", got, n, most, records)
			}
		})
	}
}

// TestSeqIndexBuiltForOlderStore opens a store written without the index,
// as an older version wrote it: Open builds the index, once.
func TestSeqIndexBuiltForOlderStore(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	pebble.SetSeqIndex(false)
	t.Cleanup(func() { pebble.SetSeqIndex(true) })
	s, err := pebble.Open(dir, pebble.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	fillSeq(t, s, 3, 500, now)
	if n, err := s.CountKeys("s/"); err != nil || n != 0 {
		t.Fatalf("index entries written with the index off: got %d (%v), want 0", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	pebble.SetSeqIndex(true)
	s = MustOpen(t, dir)
	if n, err := s.CountKeys("s/"); err != nil || n != 500 {
		t.Fatalf("index entries after Open: got %d (%v), want 500", n, err)
	}
	recs, err := s.ListSeq(context.Background(), spent.SeqQuery{Node: 3, From: 101, To: 103, Limit: 10, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Seq.Counter != 101 || recs[2].Seq.Counter != 103 {
		t.Fatalf("ListSeq 101..103: got %v, want 3:101 to 3:103", recs)
	}
}

// TestSeqIndexLeavesNothingBehind checks that every removal of a record
// removes its index entry in the same write: releases, retakes, sweeps and
// purges leave as many index entries as records.
func TestSeqIndexLeavesNothingBehind(t *testing.T) {
	s := MustOpen(t, t.TempDir())
	ctx := context.Background()
	now := time.Now()
	var ops []spent.ClaimOp
	for i := 1; i <= 40; i++ {
		r := seqRecord(4, uint64(i), i, now)
		switch i % 4 {
		case 0: // pending, released below
			r.State, r.Result, r.LeaseUntil = spent.StatePending, nil, now.Add(time.Second)
		case 1: // pending, retaken below
			r.State, r.Result, r.LeaseUntil = spent.StatePending, nil, now.Add(time.Second)
			r.Namespace = "retake"
		case 2: // expires early, swept below
			r.ExpiresAt = now.Add(time.Minute)
		case 3: // purged below
			r.Namespace = "old"
		}
		ops = append(ops, spent.ClaimOp{Record: r, Now: now})
	}
	if _, err := s.ClaimBatch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		r := op.Record
		switch r.Seq.Counter % 4 {
		case 0:
			if err := s.Release(ctx, r.Hash, r.Seq, now); err != nil {
				t.Fatal(err)
			}
		case 1:
			r.Seq.Counter += 1000
			r.LeaseUntil = now.Add(time.Hour)
			if res, err := s.Claim(ctx, spent.ClaimOp{Record: r, Now: now.Add(time.Second), Retake: true}); err != nil || !res.Inserted {
				t.Fatalf("retake: got inserted %v, error %v; want inserted", res.Inserted, err)
			}
		}
	}
	if n, err := s.DeleteExpired(ctx, now.Add(time.Minute), 100); err != nil || n != 10 {
		t.Fatalf("DeleteExpired: got %d (%v), want 10", n, err)
	}
	if n, err := s.Purge(ctx, "old", 100); err != nil || n != 10 {
		t.Fatalf("Purge: got %d (%v), want 10", n, err)
	}
	recs, err := s.CountKeys("r/")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := s.CountKeys("s/")
	if err != nil {
		t.Fatal(err)
	}
	if recs != 10 || idx != recs {
		t.Fatalf("got %d records and %d index entries, want 10 of each", recs, idx)
	}
	got, err := s.ListSeq(ctx, spent.SeqQuery{Node: 4, To: math.MaxUint64, Limit: 100, Now: now.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if want := uint64(1000 + 1 + 4*i); r.Seq.Counter != want {
			t.Fatalf("record %d: got seq %s, want 4:%d", i, r.Seq, want)
		}
	}
	if len(got) != 10 {
		t.Fatalf("got %d records, want the 10 retaken ones", len(got))
	}
}

// BenchmarkClaimSeqIndex measures what the index by seq costs a claim: the
// same claims with the index and without it (an older store's layout; users
// always get the index).
func BenchmarkClaimSeqIndex(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "NoIndex", true: "Index"}[on]
		b.Run(name+"/Concurrent64", func(b *testing.B) {
			pebble.SetSeqIndex(on)
			defer pebble.SetSeqIndex(true)
			s := openBench(b)
			ctx := context.Background()
			runClaimers(b, 64, func(rng *rand.Rand, seq uint64) error {
				_, err := s.Claim(ctx, benchOp(rng, seq))
				return err
			})
		})
		b.Run(name+"/Batch100x1", func(b *testing.B) {
			pebble.SetSeqIndex(on)
			defer pebble.SetSeqIndex(true)
			s := openBench(b)
			ctx := context.Background()
			runBatches(b, 1, 100, func(ops []spent.ClaimOp) error {
				_, err := s.ClaimBatch(ctx, ops)
				return err
			})
		})
	}
}

// seqBenchSizes returns the store sizes BenchmarkSeqLast runs at:
// $SPENT_SEQ_BENCH_RECORDS (a comma-separated list), or 10,000 and 100,000.
// Building 10 million records takes some minutes, so only a run that asks
// for it pays for it.
func seqBenchSizes(b *testing.B) []int {
	v := os.Getenv("SPENT_SEQ_BENCH_RECORDS")
	if v == "" {
		return []int{10_000, 100_000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 10_000 {
			b.Fatalf("SPENT_SEQ_BENCH_RECORDS: %q: want numbers of at least 10000", f)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkSeqLast measures "the last 10,000 records of node 1", as spent
// seq --node 1 --last 10000 asks it, over stores of growing size: through
// the ledger (Ledger), and through the HTTP server and its Go client, the
// path of spent seq (HTTP). From an index, the time per call does not grow
// with the store.
func BenchmarkSeqLast(b *testing.B) {
	for _, n := range seqBenchSizes(b) {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			s := openBench(b)
			now := time.Now()
			fillSeq(b, s, 1, n, now)
			cfg := spent.DefaultConfig()
			cfg.Secret = []byte("benchmark secret of at least 32 bytes")
			cfg.Node = 2 // its seq reservations stay apart from node 1's records
			l, err := spent.NewLedger(context.Background(), s, cfg)
			if err != nil {
				b.Fatal(err)
			}
			srv, err := sphttp.NewServer(l, sphttp.DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			b.Cleanup(ts.Close)
			client := sphttp.NewClient(ts.URL, sphttp.ClientConfig{})
			ctx := context.Background()
			for _, via := range []struct {
				name string
				seq  func(spent.SeqRequest) (spent.SeqAnswer, error)
			}{
				{"Ledger", func(r spent.SeqRequest) (spent.SeqAnswer, error) { return l.Seq(ctx, r) }},
				{"HTTP", func(r spent.SeqRequest) (spent.SeqAnswer, error) { return client.Seq(ctx, r) }},
			} {
				b.Run(via.name, func(b *testing.B) {
					for b.Loop() {
						a, err := via.seq(spent.SeqRequest{Node: 1, Last: 10_000})
						if err != nil {
							b.Fatal(err)
						}
						if len(a.Records) != 10_000 || a.Records[9_999].Seq.Counter != uint64(n) {
							b.Fatalf("got %d records, want the last 10000 (up to 1:%d)", len(a.Records), n)
						}
					}
					b.ReportMetric(float64(n), "records-stored")
				})
			}
		})
	}
}
