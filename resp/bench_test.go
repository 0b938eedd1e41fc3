package resp_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/redis/go-redis/v9"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/barepebble"
)

// BenchmarkClaim measures claims of fresh keys from 64 goroutines over the
// embedded store: straight into the ledger (the bare engine, as a service
// in the same process would claim), one claim a call and batches of 16,
// and through the RESP listener with go-redis, one command per round trip
// and pipelines of 16. Each op is one
// claim; compare the claims/s metrics side by side:
//
//	go test ./resp -run '^$' -bench Claim -benchtime 200000x -count 3
func BenchmarkClaim(b *testing.B) {
	var n atomic.Int64
	key := func() string { return fmt.Sprintf("k%d", n.Add(1)) }
	par := max(1, 64/runtime.GOMAXPROCS(0))
	b.Run("ledger", func(b *testing.B) {
		f := start(b, false, nil)
		ctx := context.Background()
		b.SetParallelism(par)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				a, err := f.ledger.Claim(ctx, spent.Claim{Namespace: "refuse", Key: key(), Result: []byte("v")})
				if err != nil || a.Outcome != spent.Fresh {
					b.Errorf("claim: %v, %v", a.Outcome, err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
	})
	b.Run("ledger-batch-16", func(b *testing.B) {
		f := start(b, false, nil)
		ctx := context.Background()
		b.SetParallelism(par)
		b.ResetTimer()
		var done atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			batch := make([]spent.Claim, 0, 16)
			for {
				batch = batch[:0]
				for len(batch) < 16 && pb.Next() {
					batch = append(batch, spent.Claim{Namespace: "refuse", Key: key(), Result: []byte("v")})
				}
				if len(batch) == 0 {
					return
				}
				as, err := f.ledger.ClaimBatch(ctx, batch)
				if err != nil || as[0].Outcome != spent.Fresh {
					b.Errorf("claim batch: %v", err)
					return
				}
				done.Add(int64(len(batch)))
			}
		})
		b.ReportMetric(float64(done.Load())/b.Elapsed().Seconds(), "claims/s")
	})
	for _, pipe := range []int{1, 16} {
		b.Run(fmt.Sprintf("resp-pipeline-%d", pipe), func(b *testing.B) {
			f := start(b, false, nil)
			c := redis.NewClient(&redis.Options{Addr: f.addr, PoolSize: 64})
			defer c.Close()
			ctx := context.Background()
			b.SetParallelism(par)
			b.ResetTimer()
			var done atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				p := c.Pipeline()
				for {
					k := 0
					for k < pipe && pb.Next() {
						p.SetNX(ctx, "t:"+key(), "v", 0)
						k++
					}
					if k == 0 {
						return
					}
					cmds, err := p.Exec(ctx)
					if err != nil {
						b.Errorf("pipeline: %v", err)
						return
					}
					for _, cmd := range cmds {
						if !cmd.(*redis.BoolCmd).Val() {
							b.Errorf("a fresh key answered as a repeat")
							return
						}
					}
					done.Add(int64(k))
				}
			})
			b.ReportMetric(float64(done.Load())/b.Elapsed().Seconds(), "claims/s")
		})
	}
}

// BenchmarkBarePebble measures Pebble alone, with the options of the
// embedded store, as the bound of any front end over it: 64 goroutines each
// commit batches of 16 "claims" with a synced write, and no spent code runs.
// With keys-1 a claim writes one key, the least a durable index of claims
// can write; with keys-3 it writes as many keys as the embedded store does
// (barepebble.SetClaim). Compare its claims/s with BenchmarkClaim's
// ledger-batch-16 in the same run:
//
//	go test ./resp -run '^$' -bench 'BarePebble|Claim/ledger-batch-16' -benchtime 800000x -count 2
func BenchmarkBarePebble(b *testing.B) {
	for _, keys := range []int{1, 3} {
		b.Run(fmt.Sprintf("keys-%d", keys), func(b *testing.B) {
			db, err := pdb.Open(b.TempDir(), barepebble.ClaimOptions())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			var seq atomic.Uint64
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			var done atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				var h [32]byte
				for {
					bt := db.NewBatch()
					exp := time.Now().Add(30 * time.Hour)
					n := 0
					for n < 16 && pb.Next() {
						rand.Read(h[:])
						if err := barepebble.SetClaim(bt, &h, exp, seq.Add(1), keys == 3); err != nil {
							b.Error(err)
							return
						}
						n++
					}
					if n == 0 {
						bt.Close()
						return
					}
					if err := bt.Commit(pdb.Sync); err != nil {
						b.Error(err)
						return
					}
					bt.Close()
					done.Add(int64(n))
				}
			})
			b.ReportMetric(float64(done.Load())/b.Elapsed().Seconds(), "claims/s")
		})
	}
}
