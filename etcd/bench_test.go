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
// spent's store and, right after it, the bare engine operation at the same
// concurrency: one transaction per claim, If the key was never created Then
// put the same encoded record Else get it, without the bucket's lease.

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
		Namespace: "tickets", Key: h, FirstSeen: now, Place: "gate-12",
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

// runClaimers runs b.N calls of claim from workers goroutines and reports
// claims/s; each call claims per keys.
func runClaimers(b *testing.B, workers, per int, claim func(rng *rand.Rand, seq uint64) error) {
	b.Helper()
	var next atomic.Int64
	var seqs atomic.Uint64
	var wg sync.WaitGroup
	calls := (b.N + per - 1) / per
	b.ResetTimer()
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
	b.StopTimer()
	b.ReportMetric(float64(calls*per)/b.Elapsed().Seconds(), "claims/s")
}

// BenchmarkClaim measures, for 16 and 64 goroutines, the store's Claim of
// fresh keys (Spent) and then the bare transaction (Bare) at the same
// concurrency, back to back on the same cluster; then ClaimBatch of 100
// fresh keys from 1 and 4 goroutines.
func BenchmarkClaim(b *testing.B) {
	for _, n := range benchConcurrency {
		b.Run("Concurrent"+strconv.Itoa(n), func(b *testing.B) {
			b.Run("Spent", func(b *testing.B) {
				s := MustOpen(b, benchOptions(b))
				ctx := context.Background()
				runClaimers(b, n, 1, func(rng *rand.Rand, seq uint64) error {
					_, err := s.Claim(ctx, benchOp(rng, seq))
					return err
				})
			})
			b.Run("Bare", func(b *testing.B) {
				o := benchOptions(b)
				cli, err := clientv3.New(clientv3.Config{Endpoints: o.Endpoints, DialTimeout: o.DialTimeout, Logger: zap.NewNop()})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cli.Close() })
				ctx := context.Background()
				runClaimers(b, n, 1, func(rng *rand.Rand, seq uint64) error {
					op := benchOp(rng, seq)
					k := etcd.RecordKey(o.Prefix, op.Record.Key)
					_, err := cli.Txn(ctx).
						If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
						Then(clientv3.OpPut(k, string(etcd.EncodeRecord(&op.Record)))).
						Else(clientv3.OpGet(k)).
						Commit()
					return err
				})
			})
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
			Mode: spent.ModeRefuse, Retention: 30 * time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.Hold,
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
