package etcd_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/internal/etcdtest"
)

// The benchmarks run against the shared cluster ($SPENT_ETCDTEST_ENDPOINTS,
// which bench/etcd.sh sets, or a 3-member cluster started for the run), each
// under a prefix of its own, and report claims/s. BenchmarkClaim measures
// spent's store and the bare engine operation at the same concurrency, in
// alternating phases of one run: the bare operation is one transaction per
// claim, If the key was never created Then put the same encoded record Else
// get it, without the bucket's lease.

// benchConcurrency are the numbers of goroutines that claim at once.
var benchConcurrency = []int{16, 64}

// benchOp returns a one-step claim of a fresh random key, the size of a
// ticket-gate record, made now and expiring in 30 hours.
func benchOp(rng *rand.Rand, seq uint64) spent.ClaimOp {
	now := time.Now()
	var h spent.Hash
	binary.LittleEndian.PutUint64(h[:8], rng.Uint64())
	binary.LittleEndian.PutUint64(h[8:], rng.Uint64())
	return spent.ClaimOp{Now: now, Record: spent.Record{
		Namespace: "tickets", Hash: h, FirstSeen: now, Place: "gate-12",
		State: spent.StateComplete, Result: []byte{}, ExpiresAt: now.Add(30 * time.Hour),
		Seq: spent.Seq{Node: 1, Counter: seq},
	}}
}

var benchRun atomic.Int64

// benchOptions returns options for the shared cluster under a new prefix,
// with the default (1-minute) lease buckets.
func benchOptions(b *testing.B) etcd.Options {
	o := etcd.DefaultOptions()
	o.Endpoints = etcdtest.Shared(b)
	o.Prefix = "/spent-bench/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(benchRun.Add(1), 10) + "/"
	o.Logger = quietLogger()
	return o
}

// claimFunc makes one call (of per claims, seqs from seq on).
type claimFunc func(rng *rand.Rand, seq uint64) error

// seqs hands out seq counters to the benchmarks.
var seqs atomic.Uint64

// runCalls makes calls calls of claim from workers goroutines and returns
// how long they took.
func runCalls(b *testing.B, workers, calls, per int, claim claimFunc) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for next.Add(1) <= int64(calls) {
				if err := claim(rng, seqs.Add(uint64(per))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// runClaimers runs b.N claims, in calls of per claims, from workers
// goroutines, and reports claims/s.
func runClaimers(b *testing.B, workers, per int, claim claimFunc) {
	b.Helper()
	calls := (b.N + per - 1) / per
	b.ResetTimer()
	runCalls(b, workers, calls, per, claim)
	b.StopTimer()
	b.ReportMetric(float64(calls*per)/b.Elapsed().Seconds(), "claims/s")
}

// sideBySide runs b.N claims from workers goroutines, alternating between
// spent's store and the bare transaction in phases (spent, bare, bare,
// spent, ...) of 20 claims per goroutine, so that both see the same machine
// load, and reports the claims/s of each and their ratio.
func sideBySide(b *testing.B, workers int, spentClaim, bareClaim claimFunc) {
	b.Helper()
	phase := 20 * workers
	var took [2]time.Duration
	var done [2]int
	b.ResetTimer()
	for i, left := 0, b.N; left > 0; i++ {
		k := min(phase, left)
		which := (i + i/2) % 2 // 0 1 1 0 0 1 1 0 ...
		fn := spentClaim
		if which == 1 {
			fn = bareClaim
		}
		took[which] += runCalls(b, workers, k, 1, fn)
		done[which] += k
		left -= k
	}
	b.StopTimer()
	rate := func(i int) float64 {
		if took[i] == 0 {
			return 0
		}
		return float64(done[i]) / took[i].Seconds()
	}
	b.ReportMetric(rate(0), "spent-claims/s")
	b.ReportMetric(rate(1), "bare-claims/s")
	if rate(1) > 0 {
		b.ReportMetric(rate(0)/rate(1), "spent/bare")
	}
}

// BenchmarkClaim measures, for 16 and 64 goroutines, the store's Claim of
// fresh keys and the bare transaction side by side (see sideBySide); then
// ClaimBatch of 100 fresh keys from 1 and 4 goroutines.
func BenchmarkClaim(b *testing.B) {
	for _, n := range benchConcurrency {
		b.Run("Concurrent"+strconv.Itoa(n), func(b *testing.B) {
			ctx := context.Background()
			s := MustOpen(b, benchOptions(b))
			o := benchOptions(b)
			cli, err := clientv3.New(clientv3.Config{Endpoints: o.Endpoints, DialTimeout: o.DialTimeout, Logger: zap.NewNop()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cli.Close() })
			spentClaim := func(rng *rand.Rand, seq uint64) error {
				_, err := s.Claim(ctx, benchOp(rng, seq))
				return err
			}
			bareClaim := func(rng *rand.Rand, seq uint64) error {
				op := benchOp(rng, seq)
				k := etcd.RecordKey(o.Prefix, op.Record.Hash)
				_, err := cli.Txn(ctx).
					If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
					Then(clientv3.OpPut(k, string(etcd.EncodeRecord(&op.Record)))).
					Else(clientv3.OpGet(k)).
					Commit()
				return err
			}
			sideBySide(b, n, spentClaim, bareClaim)
		})
	}
	for _, callers := range []int{1, 4} {
		b.Run("Batch100x"+strconv.Itoa(callers), func(b *testing.B) {
			s := MustOpen(b, benchOptions(b))
			ctx := context.Background()
			runClaimers(b, callers, 100, func(rng *rand.Rand, seq uint64) error {
				ops := make([]spent.ClaimOp, 100)
				for i := range ops {
					ops[i] = benchOp(rng, seq+uint64(i))
				}
				_, err := s.ClaimBatch(ctx, ops)
				return err
			})
		})
	}
}

// BenchmarkLedgerClaim runs the whole claim path of spent.Ledger over the
// store: validation, HMAC of the key, seq allocation, the store, the answer.
func BenchmarkLedgerClaim(b *testing.B) {
	n := benchConcurrency[len(benchConcurrency)-1]
	b.Run("Concurrent"+strconv.Itoa(n), func(b *testing.B) {
		s := MustOpen(b, benchOptions(b))
		cfg := spent.DefaultConfig()
		cfg.Secret = make([]byte, spent.MinSecretLen)
		cfg.Namespaces = map[string]spent.Policy{"tickets": {
			Mode: spent.ModeRefuse, Retention: 30 * time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold,
		}}
		l, err := spent.NewLedger(context.Background(), s, cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		runClaimers(b, n, 1, func(rng *rand.Rand, _ uint64) error {
			var key [16]byte
			binary.LittleEndian.PutUint64(key[:], rng.Uint64())
			binary.LittleEndian.PutUint64(key[8:], rng.Uint64())
			_, err := l.Claim(ctx, spent.Claim{Namespace: "tickets", Key: string(key[:]), Place: "gate-12", Result: []byte{}})
			return err
		})
	})
}
