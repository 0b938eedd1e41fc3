package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
)

// namespace is the namespace of every record: spent serve's default one,
// so that the records loaded into its store answer its claims.
const namespace = "default"

// seqNode is the node of the loaded and claimed records' seqs: not a node
// spent serve uses (it runs as node 1), so that no seq it reserves collides.
const seqNode = 4242

// Expiry of the loaded records, from the start of the load: one in ten
// (key numbers divisible by 10) expire after expireSoon, the rest after
// expireLate. The sweep runs at the ledger time sweepAt after the start,
// when the first have expired and the others are live: the stores judge
// expiry by the time they are given, so nobody waits two days.
const (
	expireSoon = 48 * time.Hour
	expireLate = 30 * 24 * time.Hour
	sweepAt    = 49 * time.Hour
)

// keyer turns key numbers into stored hashes as a ledger with the secret
// does (spent.Ledger.HashKey), so that spent serve with that secret finds
// the records under the keys "k<number>".
type keyer struct{ l *spent.Ledger }

func newKeyer(secret []byte) (*keyer, error) {
	cfg := spent.DefaultConfig()
	cfg.Secret = secret
	cfg.Namespaces = map[string]spent.Policy{namespace: {
		Mode: spent.ModeEcho, Retention: 24 * time.Hour, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold,
	}}
	l, err := spent.NewLedger(context.Background(), inmem.New(), cfg)
	if err != nil {
		return nil, err
	}
	return &keyer{l}, nil
}

func keyName(i int64) string { return "k" + strconv.FormatInt(i, 10) }

func (k *keyer) hash(i int64) spent.Hash { return k.l.HashKey(namespace, keyName(i)) }

// loadOp is the claim that loads record i at now, base being the start of
// the load.
func (k *keyer) loadOp(i int64, base, now time.Time) spent.ClaimOp {
	exp := base.Add(expireLate)
	if i%10 == 0 {
		exp = base.Add(expireSoon)
	}
	return spent.ClaimOp{Now: now, Record: spent.Record{
		Namespace: namespace, Hash: k.hash(i), FirstSeen: now, Place: "gate-12",
		State: spent.StateComplete, Result: []byte{}, ExpiresAt: exp,
		Seq: spent.Seq{Node: seqNode, Counter: uint64(i) + 1},
	}}
}

// expiring is how many of n loaded records expire at sweepAt.
func expiring(n int64) int64 { return (n + 9) / 10 }

// load claims the records from..n-1 in batches of batch from workers
// goroutines, and returns the rate. Every claim must insert.
func load(ctx context.Context, s spent.Store, k *keyer, from, n int64, base time.Time, workers, batch int) (float64, error) {
	var next, done atomic.Int64
	next.Store(from)
	start := time.Now()
	stop := make(chan struct{})
	go progress(stop, &done, n-from, start)
	defer close(stop)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			ops := make([]spent.ClaimOp, 0, batch)
			for {
				lo := next.Add(int64(batch)) - int64(batch)
				if lo >= n {
					return
				}
				hi, now := min(lo+int64(batch), n), time.Now()
				ops = ops[:0]
				for i := lo; i < hi; i++ {
					ops = append(ops, k.loadOp(i, base, now))
				}
				res, err := s.ClaimBatch(ctx, ops)
				if err == nil {
					err = allInserted(res, "load")
				}
				if err != nil {
					errs <- err
					next.Store(n)
					return
				}
				done.Add(hi - lo)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(n-from) / time.Since(start).Seconds(), nil
}

func progress(stop chan struct{}, done *atomic.Int64, total int64, start time.Time) {
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			d := done.Load()
			rate := float64(d) / time.Since(start).Seconds()
			log.Printf("  loaded %d of %d (%.0f/s, %.0f s to go)", d, total, rate, float64(total-d)/max(rate, 1))
		}
	}
}

func allInserted(res []spent.ClaimAnswer, what string) error {
	for i := range res {
		if !res[i].Inserted {
			return fmt.Errorf("%s: a fresh key was not inserted: the store answered with the record of seq %v", what, res[i].Record.Seq)
		}
	}
	return nil
}

// checkLoaded claims sample random keys among the first n loaded (the
// live ones: not those that expire at sweepAt) and fails unless every one
// finds its record.
func checkLoaded(ctx context.Context, s spent.Store, k *keyer, n int64, sample int, base time.Time) error {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for range sample {
		i := liveKey(rng, n)
		op := k.loadOp(i, base, time.Now())
		// Another seq than the load's: a store takes a claim carrying the
		// seq of the record it finds for a resend of that claim, and
		// answers it inserted (spent's invariant 8).
		op.Record.Seq = spent.Seq{Node: seqNode + 2, Counter: uint64(i) + 1}
		res, err := s.Claim(ctx, op)
		if err != nil {
			return fmt.Errorf("check of loaded key %d: %w", i, err)
		}
		if res.Inserted {
			return fmt.Errorf("check: loaded key %d (%s) was answered fresh: the store lost it", i, keyName(i))
		}
	}
	return nil
}

// liveKey returns a random key number below n that does not expire at
// sweepAt.
func liveKey(rng *rand.Rand, n int64) int64 {
	for {
		if i := rng.Int64N(n); i%10 != 0 {
			return i
		}
	}
}

// rate is what a claim measurement found.
type rate struct {
	claims  int64
	perSec  float64
	p99Ms   float64
	elapsed time.Duration
}

// freshOp is a one-step claim of a random fresh key, live for 30 days.
func freshOp(rng *rand.Rand, seq uint64) spent.ClaimOp {
	now := time.Now()
	var h spent.Hash
	binary.LittleEndian.PutUint64(h[:8], rng.Uint64())
	binary.LittleEndian.PutUint64(h[8:], rng.Uint64())
	return spent.ClaimOp{Now: now, Record: spent.Record{
		Namespace: namespace, Hash: h, FirstSeen: now, Place: "gate-12",
		State: spent.StateComplete, Result: []byte{}, ExpiresAt: now.Add(expireLate),
		Seq: spent.Seq{Node: seqNode + 1, Counter: seq},
	}}
}

// measure runs calls of size claims each (1: Claim, more: ClaimBatch) from
// workers goroutines for d, and returns claims/s and the p99 of a call.
// Every claim must insert.
func measure(ctx context.Context, s spent.Store, workers, size int, d time.Duration, seqs *atomic.Uint64) (rate, error) {
	var wg sync.WaitGroup
	lat := make([][]time.Duration, workers)
	errs := make(chan error, workers)
	deadline := time.Now().Add(d)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			ops := make([]spent.ClaimOp, size)
			for time.Now().Before(deadline) {
				for i := range ops {
					ops[i] = freshOp(rng, seqs.Add(1))
				}
				t := time.Now()
				var res []spent.ClaimAnswer
				var err error
				if size == 1 {
					var a spent.ClaimAnswer
					a, err = s.Claim(ctx, ops[0])
					res = []spent.ClaimAnswer{a}
				} else {
					res, err = s.ClaimBatch(ctx, ops)
				}
				lat[w] = append(lat[w], time.Since(t))
				if err == nil {
					err = allInserted(res, "measure")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return rate{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	calls := int64(len(all))
	r := rate{claims: calls * int64(size), elapsed: elapsed}
	r.perSec = float64(r.claims) / elapsed.Seconds()
	if calls > 0 {
		r.p99Ms = float64(all[min(calls-1, calls*99/100)]) / 1e6
	}
	return r, nil
}

// measureBoth measures single claims (16 goroutines) then batches of 100
// (batchers goroutines), each for d, and fills run.
func measureBoth(ctx context.Context, s spent.Store, d time.Duration, batchers int, run *Run) (claimed int64, err error) {
	var seqs atomic.Uint64
	log.Printf("  claims: Claim from 16 goroutines for %s", d)
	one, err := measure(ctx, s, 16, 1, d, &seqs)
	if err != nil {
		return 0, err
	}
	log.Printf("  %.0f claims/s, p99 %.2f ms; ClaimBatch of 100 from %d goroutines for %s", one.perSec, one.p99Ms, batchers, d)
	many, err := measure(ctx, s, batchers, 100, d, &seqs)
	if err != nil {
		return 0, err
	}
	log.Printf("  %.0f claims/s, p99 %.2f ms per batch", many.perSec, many.p99Ms)
	run.ClaimsPerSecSingle, run.P99SingleMs = round(one.perSec, 0), round(one.p99Ms, 3)
	run.ClaimsPerSecBatch, run.P99BatchMs = round(many.perSec, 0), round(many.p99Ms, 3)
	return one.claims + many.claims, nil
}

// sweep calls DeleteExpired at the ledger time base+sweepAt in batches of
// batch (the sweeper's) until it returns 0, and returns the time and count.
func sweep(ctx context.Context, s spent.Store, base time.Time, batch int) (time.Duration, int64, error) {
	start := time.Now()
	var total int64
	for {
		n, err := s.DeleteExpired(ctx, base.Add(sweepAt), batch)
		if err != nil {
			return 0, total, fmt.Errorf("sweep: %w", err)
		}
		total += int64(n)
		if n == 0 {
			return time.Since(start), total, nil
		}
	}
}
