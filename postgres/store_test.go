package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
)

func TestStore(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	open := func(t *testing.T) *postgres.Store {
		return MustOpen(t, testOptions(t, dsn, freshSchema(t, dsn)))
	}

	t.Run("RecordsRoundTripExactly", func(t *testing.T) {
		s := open(t)
		fp := make([]byte, 32)
		for i := range fp {
			fp[i] = byte(i)
		}
		cases := map[string]spent.Record{
			"EmptyResultNilFingerprint": {Namespace: "default", Hash: hashOf("a"), FirstSeen: t0, Place: "gate",
				State: spent.StateComplete, Result: []byte{}, ExpiresAt: t0.Add(time.Hour), Seq: spent.Seq{Node: 3, Counter: 1}},
			"EmptyFingerprintNilResult": {Namespace: "default", Hash: hashOf("b"), FirstSeen: t0, Fingerprint: []byte{},
				State: spent.StateComplete, ExpiresAt: t0.Add(time.Hour), Seq: spent.Seq{Node: 3, Counter: 2}},
			"BinaryTextAndHugeSeq": {Namespace: "n\x00s\xff", Hash: hashOf("c"), RawKey: "raw\x00key\xfe", FirstSeen: t0.Add(time.Nanosecond),
				Place: "pl\x00ce\xc3", Fingerprint: fp, State: spent.StateComplete, Result: []byte{0, 1, 2, 0},
				ExpiresAt: t0.Add(24*time.Hour + 1), Seq: spent.Seq{Node: math.MaxUint32, Counter: math.MaxUint64}},
			"SeqCounterPast2To63": {Namespace: "default", Hash: hashOf("d"), FirstSeen: t0, Place: "gate",
				State: spent.StateComplete, Result: []byte("x"), ExpiresAt: t0.Add(time.Hour), Seq: spent.Seq{Node: 1, Counter: 1<<63 + 5}},
			"PendingWithLease": {Namespace: "pay", Hash: hashOf("e"), FirstSeen: t0, Place: "node-7",
				State: spent.StatePending, ExpiresAt: t0.Add(time.Hour), LeaseUntil: t0.Add(30*time.Second + 7), Seq: spent.Seq{Node: 2, Counter: 9}},
			"ZeroFirstSeen": {Namespace: "default", Hash: hashOf("f"), State: spent.StateComplete, Result: []byte("y"),
				ExpiresAt: t0.Add(time.Hour), Seq: spent.Seq{Node: 1, Counter: 10}},
			"FarFuture": {Namespace: "default", Hash: hashOf("g"), FirstSeen: t0, State: spent.StateComplete, Result: []byte("z"),
				ExpiresAt: time.Date(2262, 1, 1, 0, 0, 0, 1, time.UTC), Seq: spent.Seq{Node: 1, Counter: 11}},
		}
		for name, rec := range cases {
			t.Run(name, func(t *testing.T) {
				res := mustClaim(t, s, spent.ClaimOp{Record: rec, Now: t0})
				if !res.Inserted {
					t.Fatalf("Claim: got not inserted, want inserted")
				}
				wantRecord(t, "Claim's answer", res.Record, rec)
				got, err := s.Get(ctx, rec.Hash, t0)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				wantRecord(t, "Get", got, rec)
				res = mustClaim(t, s, spent.ClaimOp{Record: func() spent.Record { r := rec; r.Seq.Counter--; return r }(), Now: t0})
				if res.Inserted {
					t.Fatalf("second Claim: got inserted, want the stored record")
				}
				wantRecord(t, "second Claim's answer", res.Record, rec)
			})
		}
	})

	t.Run("TimesOutsideInt8NanosecondsAreRefused", func(t *testing.T) {
		s := open(t)
		op := completeOp("late", 1, t0)
		op.Record.ExpiresAt = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
		if _, err := s.Claim(ctx, op); err == nil {
			t.Fatalf("Claim expiring in 2300: got no error, want one")
		}
		op = completeOp("early", 2, time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))
		if _, err := s.Claim(ctx, op); err == nil {
			t.Fatalf("Claim made in 1600: got no error, want one")
		}
		if _, err := s.Get(ctx, hashOf("late"), t0); !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("Get after the refused claim: got %v, want ErrNotFound", err)
		}
	})

	t.Run("InvalidRecordIsRefused", func(t *testing.T) {
		s := open(t)
		op := completeOp("k", 0, t0) // no seq
		op.Record.Seq = spent.Seq{}
		if _, err := s.Claim(ctx, op); err == nil {
			t.Fatal("Claim of a record without seq: got no error, want one")
		}
		if _, err := s.ClaimBatch(ctx, []spent.ClaimOp{completeOp("ok", 1, t0), op}); err == nil {
			t.Fatal("ClaimBatch with a record without seq: got no error, want one")
		}
		if _, err := s.Get(ctx, hashOf("ok"), t0); !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("Get of the valid op of the refused batch: got %v, want ErrNotFound (nothing written)", err)
		}
	})

	t.Run("BatchOfMaxBatchIsOneTransaction", func(t *testing.T) {
		s := open(t)
		ops := make([]spent.ClaimOp, spent.MaxBatch)
		for i := range ops {
			ops[i] = completeOp(fmt.Sprintf("k%d", i%(spent.MaxBatch-100)), uint64(i+1), t0)
		}
		res, err := s.ClaimBatch(ctx, ops)
		if err != nil {
			t.Fatalf("ClaimBatch of %d: %v", len(ops), err)
		}
		inserted := 0
		for i := range res {
			if res[i].Inserted {
				inserted++
			}
			first := i % (spent.MaxBatch - 100)
			if got, want := res[i].Record.Seq, ops[first].Record.Seq; got != want {
				t.Fatalf("ops[%d]: got seq %v, want %v (the first op on its key)", i, got, want)
			}
		}
		if inserted != spent.MaxBatch-100 {
			t.Fatalf("inserted: got %d, want %d", inserted, spent.MaxBatch-100)
		}
	})

	t.Run("ConcurrentBatchesOverlapWithoutDeadlock", func(t *testing.T) {
		s := open(t)
		const callers, size, keys = 8, 50, 60
		var mu sync.Mutex
		winners := map[spent.Hash]spent.Seq{}
		inserts := map[spent.Hash]bool{}
		var wg sync.WaitGroup
		errs := make(chan error, callers*size*5)
		for c := range callers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(c), 7))
				for round := range 5 {
					ops := make([]spent.ClaimOp, size)
					for i := range ops {
						ops[i] = completeOp(fmt.Sprintf("hot-%d", rng.IntN(keys)), uint64(c*100000+round*1000+i+1), t0)
					}
					res, err := s.ClaimBatch(ctx, ops)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					for i := range res {
						k := ops[i].Record.Hash
						if w, ok := winners[k]; ok && res[i].Record.Seq != w {
							errs <- fmt.Errorf("key %v: got seq %v, want the winner's %v", k, res[i].Record.Seq, w)
						}
						winners[k] = res[i].Record.Seq
						if res[i].Inserted {
							if inserts[k] {
								errs <- fmt.Errorf("key %v inserted twice", k)
							}
							inserts[k] = true
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if len(inserts) != len(winners) {
			t.Fatalf("keys inserted: got %d of %d claimed", len(inserts), len(winners))
		}
	})

	t.Run("Count", func(t *testing.T) {
		s := open(t)
		key := hashOf("quota")
		exp := t0.Add(time.Minute)
		count := func(limit uint64, now time.Time) spent.CountAnswer {
			t.Helper()
			r, err := s.Count(ctx, spent.CountOp{Key: key, Limit: limit, ExpiresAt: now.Add(time.Minute), Now: now})
			if err != nil {
				t.Fatalf("Count: %v", err)
			}
			return r
		}
		for i := uint64(1); i <= 3; i++ {
			if r := count(3, t0.Add(time.Duration(i))); !r.Added || r.Value != i || !r.ExpiresAt.Equal(exp.Add(time.Nanosecond)) {
				t.Fatalf("Count %d: got %+v, want added, value %d, expiring at the first op's expiry", i, r, i)
			}
		}
		if r := count(3, t0.Add(time.Second)); r.Added || r.Value != 3 {
			t.Fatalf("Count at the limit: got %+v, want value 3, not added", r)
		}
		if r := count(0, t0.Add(time.Second)); r.Added || r.Value != 3 {
			t.Fatalf("Count with limit 0 on a live counter: got %+v, want value 3, not added", r)
		}
		if r := count(5, t0.Add(time.Second)); !r.Added || r.Value != 4 {
			t.Fatalf("Count under a higher limit: got %+v, want value 4, added", r)
		}
		// Expired exactly at its expires_at: it starts again from one.
		later := exp.Add(time.Nanosecond)
		if r := count(3, later); !r.Added || r.Value != 1 || !r.ExpiresAt.Equal(later.Add(time.Minute)) {
			t.Fatalf("Count at the counter's expiry: got %+v, want a new counter at 1", r)
		}
		if r := count(0, later.Add(2*time.Minute)); r.Added || r.Value != 0 || !r.ExpiresAt.Equal(later.Add(3*time.Minute)) {
			t.Fatalf("Count with limit 0 on an expired counter: got %+v, want value 0, not added, the op's expiry", r)
		}
		// Counters and records with the same key are unrelated.
		rec := completeOp("quota", 1, t0).Record
		if !mustClaim(t, s, spent.ClaimOp{Record: rec, Now: t0}).Inserted {
			t.Fatal("Claim of a key that names a counter: got not inserted")
		}
	})

	t.Run("CountConcurrentAddsAtMostLimit", func(t *testing.T) {
		s := open(t)
		const n, limit = 64, 20
		var wg sync.WaitGroup
		var mu sync.Mutex
		added := 0
		values := map[uint64]bool{}
		for range n {
			wg.Go(func() {
				r, err := s.Count(ctx, spent.CountOp{Key: hashOf("hot"), Limit: limit, ExpiresAt: t0.Add(time.Hour), Now: t0})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if r.Added {
					added++
					if values[r.Value] {
						t.Errorf("value %d answered to two adds", r.Value)
					}
					values[r.Value] = true
				} else if r.Value != limit {
					t.Errorf("not added: got value %d, want the limit %d", r.Value, limit)
				}
			})
		}
		wg.Wait()
		if added != limit {
			t.Fatalf("%d concurrent Counts with limit %d: got %d added, want %d", n, limit, added, limit)
		}
	})

	t.Run("DeleteExpiredCountsCountersWithinLimit", func(t *testing.T) {
		s := open(t)
		for i := range 5 {
			mustClaim(t, s, func() spent.ClaimOp {
				op := completeOp(fmt.Sprintf("r%d", i), uint64(i+1), t0)
				op.Record.ExpiresAt = t0.Add(time.Duration(i+1) * time.Second)
				return op
			}())
			if _, err := s.Count(ctx, spent.CountOp{Key: hashOf(fmt.Sprintf("c%d", i)), Limit: 9,
				ExpiresAt: t0.Add(time.Duration(i+1) * time.Second), Now: t0}); err != nil {
				t.Fatal(err)
			}
		}
		now := t0.Add(time.Hour)
		var got []int
		for range 5 {
			n, err := s.DeleteExpired(ctx, now, 3)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
		}
		if fmt.Sprint(got) != "[3 3 3 1 0]" {
			t.Fatalf("DeleteExpired with limit 3 over 5 records and 5 counters: got %v, want [3 3 3 1 0]", got)
		}
		if r, err := s.Count(ctx, spent.CountOp{Key: hashOf("c0"), Limit: 9, ExpiresAt: now.Add(time.Hour), Now: t0}); err != nil || r.Value != 1 {
			t.Fatalf("Count of a swept counter, at a time it was live: got %+v, %v, want a new counter at 1", r, err)
		}
	})

	t.Run("ReserveSeq", func(t *testing.T) {
		s := open(t)
		first, err := s.ReserveSeq(ctx, 9, 10)
		if err != nil || first != 1 {
			t.Fatalf("first block: got %d, %v, want 1", first, err)
		}
		if first, err = s.ReserveSeq(ctx, 9, 5); err != nil || first != 11 {
			t.Fatalf("second block: got %d, %v, want 11", first, err)
		}
		if first, err = s.ReserveSeq(ctx, 10, 5); err != nil || first != 1 {
			t.Fatalf("another node's first block: got %d, %v, want 1", first, err)
		}
		if _, err = s.ReserveSeq(ctx, 9, math.MaxInt64); err == nil {
			t.Fatalf("a block past int8: got no error, want one")
		}
		if first, err = s.ReserveSeq(ctx, 9, 1); err != nil || first != 16 {
			t.Fatalf("block after a refused one: got %d, %v, want 16", first, err)
		}
	})

	t.Run("CanceledContextWritesNothingOrFails", func(t *testing.T) {
		s := open(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Claim(cctx, completeOp("k", 1, t0)); !errors.Is(err, context.Canceled) {
			t.Fatalf("Claim with a canceled context: got %v, want context.Canceled", err)
		}
	})
}

// TestTwoServersOneSchema is two spent servers on one schema: two stores
// (two connection pools) under two ledgers with different nodes, claims of
// the same keys racing through both. Each key is fresh exactly once, and
// both servers then answer with the winner's seq.
func TestTwoServersOneSchema(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := freshSchema(t, dsn)
	ctx := context.Background()
	ledgers := make([]*spent.Ledger, 2)
	for i := range ledgers {
		s := MustOpen(t, testOptions(t, dsn, schema))
		cfg := spent.DefaultConfig()
		cfg.Secret = []byte("one secret shared by both servers, 32+ bytes")
		cfg.Node = uint32(i + 1)
		l, err := spent.NewLedger(ctx, s, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ledgers[i] = l
	}
	const keys, perServer = 200, 3
	type answer struct {
		fresh bool
		seq   spent.Seq
	}
	answers := make([][]answer, keys)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, l := range ledgers {
		for g := range perServer {
			wg.Go(func() {
				for k := range keys {
					key := fmt.Sprintf("key-%d", (k+g*7+i*13)%keys)
					res, err := l.Claim(ctx, spent.Claim{Namespace: "default", Key: key, Result: []byte("r")})
					if err != nil {
						t.Error(err)
						return
					}
					var idx int
					fmt.Sscanf(key, "key-%d", &idx)
					mu.Lock()
					answers[idx] = append(answers[idx], answer{res.Outcome == spent.Fresh, res.Record.Seq})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for k, as := range answers {
		fresh := 0
		for _, a := range as {
			if a.fresh {
				fresh++
			}
			if a.seq != as[0].seq {
				t.Fatalf("key-%d: answered with seqs %v and %v, want one", k, as[0].seq, a.seq)
			}
		}
		if fresh != 1 || len(as) != 2*perServer {
			t.Fatalf("key-%d: got %d fresh of %d answers, want 1 of %d", k, fresh, len(as), 2*perServer)
		}
	}
}
