package redis_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/redis"
)

var t0 = time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.UTC)

func randHash(rng *rand.Rand) spent.Hash {
	var h spent.Hash
	for i := range h {
		h[i] = byte(rng.Uint32())
	}
	return h
}

func hashOf(s string) spent.Hash {
	sum := sha256.Sum256([]byte(s))
	var h spent.Hash
	copy(h[:], sum[:])
	return h
}

// oneStep returns a one-step claim of h at t0.
func oneStep(h spent.Hash, counter uint64) spent.ClaimOp {
	return spent.ClaimOp{Now: t0, Record: spent.Record{
		Namespace: "ns", Hash: h, FirstSeen: t0, Place: "gate", Fingerprint: make([]byte, 32),
		State: spent.StateComplete, Result: []byte("result"), ExpiresAt: t0.Add(time.Hour),
		Seq: spent.Seq{Node: 9, Counter: counter},
	}}
}

// testScriptCacheFlushed checks that the store sends a script in full when
// the server has lost it (a restart or a failover empties the cache).
func testScriptCacheFlushed(t *testing.T, s *redis.Store, flush func() error) {
	ctx := context.Background()
	if err := flush(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	res, err := s.Claim(ctx, oneStep(hashOf("after flush"), 1))
	if err != nil || !res.Inserted {
		t.Fatalf("Claim after SCRIPT FLUSH: got %v, %v, want inserted", res.Inserted, err)
	}
	if err := flush(); err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
	ops := make([]spent.ClaimOp, 50)
	for i := range ops {
		ops[i] = oneStep(hashOf(fmt.Sprint("batch after flush ", i%25)), uint64(10+i))
	}
	out, err := s.ClaimBatch(ctx, ops)
	if err != nil {
		t.Fatalf("ClaimBatch after SCRIPT FLUSH: %v", err)
	}
	for i, r := range out {
		if r.Inserted != (i < 25) {
			t.Fatalf("op %d after SCRIPT FLUSH: got inserted %v, want %v", i, r.Inserted, i < 25)
		}
	}
}

// testCorruptRecord checks that a value the store did not write fails
// closed: an error, never a fresh claim.
func testCorruptRecord(t *testing.T, s *redis.Store, set func(key, value string) error) {
	ctx := context.Background()
	h := hashOf("corrupt")
	for _, v := range []string{"x", "\x02" + strings.Repeat("\x00", 60), "\x01\x02" + strings.Repeat("\xff", 10)} {
		if err := set(s.RecordKey(h), v); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, h, t0); !errors.Is(err, redis.ErrCorrupt) {
			t.Fatalf("Get of %q: got %v, want ErrCorrupt", v, err)
		}
		if res, err := s.Claim(ctx, oneStep(h, 1)); err == nil {
			t.Fatalf("Claim over %q: got inserted=%v, want an error", v, res.Inserted)
		}
		if _, err := s.Complete(ctx, h, spent.Seq{Node: 9, Counter: 1}, nil, t0); err == nil {
			t.Fatalf("Complete over %q: got no error", v)
		}
	}
}

// testResentClaim checks that a claim run twice (a resend after a lost
// reply) is still answered as inserted: the record carries its own seq.
func testResentClaim(t *testing.T, s *redis.Store) {
	ctx := context.Background()
	op := oneStep(hashOf("resent"), 77)
	for i := range 2 {
		res, err := s.Claim(ctx, op)
		if err != nil || !res.Inserted {
			t.Fatalf("Claim %d of the same op: got %v, %v, want inserted", i, res.Inserted, err)
		}
	}
	other := op
	other.Record.Seq.Counter++
	res, err := s.Claim(ctx, other)
	if err != nil || res.Inserted || res.Record.Seq != op.Record.Seq {
		t.Fatalf("Claim with another seq: got inserted %v seq %v, %v, want the first record", res.Inserted, res.Record.Seq, err)
	}
}

// testPendingIndexTrimmed checks that the pending index loses the entries
// of records the engine forgot, through DeleteExpired and ListPending, and
// that DeleteExpired goes round an index whose oldest leases are live.
func testPendingIndexTrimmed(t *testing.T, s *redis.Store, zcard func(key string) (int64, error)) {
	ctx := context.Background()
	real0 := time.Now()
	before := real0.Add(-time.Hour)
	// All in one hash tag: 8 live records with the oldest leases, then 12
	// that Redis forgets in 200ms.
	key := func(i int) spent.Hash {
		h := hashOf(fmt.Sprint("pending in one tag ", i))
		h[0] = 0x5a
		return h
	}
	for i := range 20 {
		exp := real0.Add(time.Hour)
		if i >= 8 {
			exp = real0.Add(200 * time.Millisecond)
		}
		op := spent.ClaimOp{Now: before, Record: spent.Record{
			Namespace: "ns", Hash: key(i), FirstSeen: before, Place: "p", State: spent.StatePending,
			LeaseUntil: before.Add(time.Duration(i+1) * time.Second), ExpiresAt: exp,
			Seq: spent.Seq{Node: 3, Counter: uint64(i + 1)},
		}}
		if res, err := s.Claim(ctx, op); err != nil || !res.Inserted {
			t.Fatalf("Claim: %v, %v", res.Inserted, err)
		}
	}
	entries := func() int64 {
		n, err := zcard(s.PendingKey(key(0)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := entries(); n != 20 {
		t.Fatalf("pending index entries: got %d, want 20", n)
	}
	time.Sleep(time.Until(real0.Add(300 * time.Millisecond)))
	for i := range 10 {
		if got, err := s.DeleteExpired(ctx, time.Now(), 3); err != nil || got != 0 {
			t.Fatalf("DeleteExpired: got %d, %v, want 0, nil", got, err)
		}
		if n := entries(); i == 0 && n != 20 {
			t.Fatalf("pending index entries after one DeleteExpired of 3 live ones: got %d, want 20", n)
		}
	}
	if n := entries(); n != 8 {
		t.Fatalf("pending index entries after 10 DeleteExpired of 3: got %d, want the 8 live ones", n)
	}
	recs, err := s.ListPending(ctx, "", before.Add(time.Hour), 100)
	if err != nil || len(recs) != 8 {
		t.Fatalf("ListPending: got %d records, %v, want 8", len(recs), err)
	}

	// ListPending trims too.
	for i := 20; i < 30; i++ {
		op := spent.ClaimOp{Now: before, Record: spent.Record{
			Namespace: "ns", Hash: key(i), FirstSeen: before, Place: "p", State: spent.StatePending,
			LeaseUntil: before.Add(time.Minute), ExpiresAt: time.Now().Add(100 * time.Millisecond),
			Seq: spent.Seq{Node: 3, Counter: uint64(i + 1)},
		}}
		if res, err := s.Claim(ctx, op); err != nil || !res.Inserted {
			t.Fatalf("Claim: %v, %v", res.Inserted, err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if recs, err := s.ListPending(ctx, "", before.Add(time.Hour), 100); err != nil || len(recs) != 8 {
		t.Fatalf("ListPending: got %d records, %v, want 8", len(recs), err)
	}
	if n := entries(); n != 8 {
		t.Fatalf("pending index entries after ListPending: got %d, want 8", n)
	}
}

// testBatchOverStoredFreeRecords checks the second round of ClaimBatch: a
// one-step op whose key holds a record that is free by the ledger's clock
// (expired, or pending past its lease under retake) is written by the claim
// script, and an op whose key holds a live record gets that record.
func testBatchOverStoredFreeRecords(t *testing.T, s *redis.Store) {
	ctx := context.Background()
	expired := oneStep(hashOf("stored expired"), 1)
	expired.Record.ExpiresAt = t0.Add(time.Second)
	lapsed := spent.ClaimOp{Now: t0, Record: spent.Record{
		Namespace: "ns", Hash: hashOf("stored lapsed lease"), FirstSeen: t0, Place: "p", State: spent.StatePending,
		LeaseUntil: t0.Add(time.Second), ExpiresAt: t0.Add(time.Hour), Seq: spent.Seq{Node: 9, Counter: 2},
	}}
	live := oneStep(hashOf("stored live"), 3)
	for _, op := range []spent.ClaimOp{expired, lapsed, live} {
		if res, err := s.Claim(ctx, op); err != nil || !res.Inserted {
			t.Fatalf("Claim: got %v, %v, want inserted", res.Inserted, err)
		}
	}
	now := t0.Add(2 * time.Second)
	at := func(op spent.ClaimOp, counter uint64, retake bool) spent.ClaimOp {
		op.Now, op.Retake = now, retake
		op.Record.State, op.Record.LeaseUntil, op.Record.Result = spent.StateComplete, time.Time{}, []byte("new")
		op.Record.FirstSeen, op.Record.ExpiresAt = now, now.Add(time.Hour)
		op.Record.Seq.Counter = counter
		return op
	}
	ops := []spent.ClaimOp{at(expired, 11, false), at(lapsed, 12, true), at(live, 13, false), at(oneStep(hashOf("new key"), 0), 14, false)}
	out, err := s.ClaimBatch(ctx, ops)
	if err != nil {
		t.Fatalf("ClaimBatch: %v", err)
	}
	for i, want := range []bool{true, true, false, true} {
		if out[i].Inserted != want {
			t.Fatalf("op %d: got inserted %v, want %v", i, out[i].Inserted, want)
		}
	}
	if out[2].Record.Seq.Counter != 3 {
		t.Fatalf("op 2: got the record of seq %v, want the live record of seq 3", out[2].Record.Seq)
	}
	for i, op := range ops {
		r, err := s.Get(ctx, op.Record.Hash, now)
		want := op.Record.Seq.Counter
		if i == 2 {
			want = 3
		}
		if err != nil || r.Seq.Counter != want {
			t.Fatalf("Get op %d: got seq %v, %v, want counter %d", i, r.Seq, err, want)
		}
	}
	// The retaken pending record left the pending index.
	if recs, err := s.ListPending(ctx, "", now, 10); err != nil || len(recs) != 0 {
		t.Fatalf("ListPending: got %d records, %v, want none", len(recs), err)
	}
}

// testTwoLedgers races two ledgers (two spent servers, each with its own
// connections and node number) on one keyspace: of every key claimed
// through both at once, exactly one claim is fresh, and both agree on it.
func testTwoLedgers(t *testing.T, options func(dir string) redis.Options) {
	ctx := context.Background()
	dir := t.TempDir()
	ledgers := make([]*spent.Ledger, 2)
	for i := range ledgers {
		// One server sends its calls one by one, the other autopipelined.
		opts := options(dir)
		opts.AutoPipeline = i == 0
		cfg := spent.DefaultConfig()
		cfg.Secret = []byte("the two servers share this secret, 32+ bytes")
		cfg.Node = uint32(i + 1)
		cfg.Namespaces = map[string]spent.Policy{"tickets": {
			Mode: spent.ModeRefuse, Retention: time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold,
		}}
		l, err := spent.NewLedger(ctx, MustOpen(t, opts), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ledgers[i] = l
	}
	const keys, perLedger = 200, 4
	type answer struct {
		outcome spent.Outcome
		seq     spent.Seq
	}
	answers := make([][]answer, keys)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, l := range ledgers {
		for w := range perLedger {
			wg.Go(func() {
				<-start
				for k := w; k < keys+w; k++ {
					key := fmt.Sprint("ticket-", k%keys)
					res, err := l.Claim(ctx, spent.Claim{Namespace: "tickets", Key: key, Place: "gate", Result: []byte{}})
					if err != nil {
						t.Errorf("Claim(%s): %v", key, err)
						return
					}
					mu.Lock()
					answers[k%keys] = append(answers[k%keys], answer{res.Outcome, res.Record.Seq})
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	nodes := map[uint32]int{}
	for k, as := range answers {
		fresh := 0
		var seq spent.Seq
		for _, a := range as {
			if a.outcome == spent.Fresh {
				fresh++
				seq = a.seq
			}
		}
		if len(as) != 2*perLedger || fresh != 1 {
			t.Fatalf("key %d: got %d fresh of %d answers, want 1 of %d", k, fresh, len(as), 2*perLedger)
		}
		for _, a := range as {
			if a.seq != seq || (a.outcome != spent.Fresh && a.outcome != spent.Refused) {
				t.Fatalf("key %d: got %v with seq %v, want fresh or refused with seq %v", k, a.outcome, a.seq, seq)
			}
		}
		nodes[seq.Node]++
	}
	t.Logf("fresh claims per node: %v", nodes)
}

// testClosed checks that calls after Close fail with spent.ErrClosed.
func testClosed(t *testing.T, s *redis.Store) {
	ctx := context.Background()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	checks := map[string]error{}
	_, checks["Claim"] = s.Claim(ctx, oneStep(hashOf("x"), 1))
	_, checks["ClaimBatch"] = s.ClaimBatch(ctx, []spent.ClaimOp{oneStep(hashOf("x"), 1)})
	_, checks["Complete"] = s.Complete(ctx, hashOf("x"), spent.Seq{Node: 1, Counter: 1}, nil, t0)
	checks["Release"] = s.Release(ctx, hashOf("x"), spent.Seq{Node: 1, Counter: 1}, t0)
	_, checks["Get"] = s.Get(ctx, hashOf("x"), t0)
	_, checks["ListPending"] = s.ListPending(ctx, "", t0, 1)
	_, checks["DeleteExpired"] = s.DeleteExpired(ctx, t0, 1)
	_, checks["ReserveSeq"] = s.ReserveSeq(ctx, 1, 1)
	_, checks["Count"] = s.Count(ctx, spent.CountOp{Key: hashOf("x"), Limit: 1, ExpiresAt: t0.Add(time.Hour), Now: t0})
	for name, err := range checks {
		if !errors.Is(err, spent.ErrClosed) || !strings.HasPrefix(err.Error(), "redis: ") {
			t.Errorf("%s after Close: got %v, want a redis: error wrapping spent.ErrClosed", name, err)
		}
	}
}

// testConcurrentBatches races batches that share keys, checking that each
// key is inserted once however the batches interleave over the primaries.
func testConcurrentBatches(t *testing.T, s *redis.Store) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, uint64(time.Now().UnixNano())))
	keys := make([]spent.Hash, 300)
	for i := range keys {
		keys[i] = randHash(rng)
	}
	const batches = 8
	results := make([][]spent.ClaimAnswer, batches)
	perms := make([][]int, batches)
	var wg sync.WaitGroup
	errs := make([]error, batches)
	for b := range batches {
		perms[b] = rng.Perm(len(keys))
		ops := make([]spent.ClaimOp, len(keys))
		for i, k := range perms[b] {
			ops[i] = oneStep(keys[k], uint64(b*1000+i+1))
		}
		wg.Go(func() { results[b], errs[b] = s.ClaimBatch(ctx, ops) })
	}
	wg.Wait()
	winners := map[int]spent.Seq{}
	for b := range batches {
		if errs[b] != nil {
			t.Fatalf("batch %d: %v", b, errs[b])
		}
		for i, k := range perms[b] {
			if results[b][i].Inserted {
				if w, ok := winners[k]; ok {
					t.Fatalf("key %d inserted twice: seqs %v and %v", k, w, results[b][i].Record.Seq)
				}
				winners[k] = results[b][i].Record.Seq
			}
		}
	}
	for b := range batches {
		for i, k := range perms[b] {
			if got, want := results[b][i].Record.Seq, winners[k]; got != want {
				t.Fatalf("batch %d key %d: got seq %v, want the winner's %v", b, k, got, want)
			}
		}
	}
	if len(winners) != len(keys) {
		t.Fatalf("keys inserted: got %d, want %d", len(winners), len(keys))
	}
}

// commonTests are the store's own tests, run on a single server and on a
// cluster.
func commonTests(t *testing.T, options func(dir string) redis.Options, admin goredis.UniversalClient) {
	ctx := context.Background()
	open := func(t *testing.T) *redis.Store { return MustOpen(t, options(t.TempDir())) }
	t.Run("ScriptCacheFlushed", func(t *testing.T) {
		testScriptCacheFlushed(t, open(t), func() error {
			if c, ok := admin.(*goredis.ClusterClient); ok {
				return c.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error { return n.ScriptFlush(ctx).Err() })
			}
			return admin.ScriptFlush(ctx).Err()
		})
	})
	t.Run("CorruptRecordFailsClosed", func(t *testing.T) {
		testCorruptRecord(t, open(t), func(k, v string) error { return admin.Set(ctx, k, v, 0).Err() })
	})
	t.Run("ResentClaimIsInserted", func(t *testing.T) { testResentClaim(t, open(t)) })
	t.Run("PendingIndexTrimmed", func(t *testing.T) {
		testPendingIndexTrimmed(t, open(t), func(k string) (int64, error) { return admin.ZCard(ctx, k).Result() })
	})
	t.Run("ConcurrentBatches", func(t *testing.T) { testConcurrentBatches(t, open(t)) })
	t.Run("SeqOneTag", func(t *testing.T) { testSeqOneTag(t, open(t)) })
	t.Run("SeqIndexTrimmed", func(t *testing.T) {
		testSeqIndexTrimmed(t, open(t), func(k string) (int64, error) { return admin.ZCard(ctx, k).Result() })
	})
	t.Run("BatchOverStoredFreeRecords", func(t *testing.T) { testBatchOverStoredFreeRecords(t, open(t)) })
	t.Run("TwoLedgersOneFresh", func(t *testing.T) { testTwoLedgers(t, options) })
	t.Run("WithoutAutoPipeline", func(t *testing.T) {
		noAP := func(t *testing.T) *redis.Store {
			o := options(t.TempDir())
			o.AutoPipeline = false
			return MustOpen(t, o)
		}
		t.Run("ResentClaimIsInserted", func(t *testing.T) { testResentClaim(t, noAP(t)) })
		t.Run("BatchOverStoredFreeRecords", func(t *testing.T) { testBatchOverStoredFreeRecords(t, noAP(t)) })
		t.Run("Closed", func(t *testing.T) { testClosed(t, noAP(t)) })
	})
	t.Run("Closed", func(t *testing.T) { testClosed(t, open(t)) })
}
