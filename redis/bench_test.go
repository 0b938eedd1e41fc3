package redis_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/cputime"
	"github.com/spentledger/spent/internal/redistest"
)

// Every benchmark claims fresh random keys on one durable server
// (appendonly yes, appendfsync always) and reports claims/s. bench/redis.sh
// starts that server, runs redis-benchmark on it, and passes its address in
// SPENT_REDIS_BENCH_ADDR; without it, the benchmark starts its own.

// benchTTL is the expiry of a claim: 30 h, a token key's life (108000 s).
const benchTTL = 30 * time.Hour

// benchConcurrency is the number of goroutines claiming at once, matching
// redis-benchmark -c 50.
const benchConcurrency = 50

// benchOp returns a one-step claim of a fresh random key, the size of a
// ticket-gate record, made now.
func benchOp(rng *rand.Rand, seq uint64) spent.ClaimOp {
	now := time.Now()
	var h spent.Hash
	binary.LittleEndian.PutUint64(h[:8], rng.Uint64())
	binary.LittleEndian.PutUint64(h[8:], rng.Uint64())
	return spent.ClaimOp{Now: now, Record: spent.Record{
		Namespace: "tickets", Hash: h, FirstSeen: now, Place: "gate-12",
		State: spent.StateComplete, Result: []byte{}, ExpiresAt: now.Add(benchTTL),
		Seq: spent.Seq{Node: 1, Counter: seq},
	}}
}

// runClaimers runs b.N claims from workers goroutines and reports claims/s.
func runClaimers(b *testing.B, workers int, claim func(rng *rand.Rand, seq uint64) error) {
	b.Helper()
	var next atomic.Int64
	var seqs atomic.Uint64
	var wg sync.WaitGroup
	cpu := cputime.Used()
	b.ResetTimer()
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for next.Add(1) <= int64(b.N) {
				if err := claim(rng, seqs.Add(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportRate(b, b.N, cpu)
}

// runBatches runs b.N claims in batches of size from callers goroutines.
func runBatches(b *testing.B, callers, size int, claim func(rng *rand.Rand, seqs *atomic.Uint64, n int) error) {
	b.Helper()
	var next atomic.Int64
	var seqs atomic.Uint64
	var wg sync.WaitGroup
	cpu := cputime.Used()
	b.ResetTimer()
	for c := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			for {
				n := int(min(int64(size), int64(b.N)-(next.Add(int64(size))-int64(size))))
				if n <= 0 {
					return
				}
				if err := claim(rng, &seqs, n); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportRate(b, b.N, cpu)
}

func reportRate(b *testing.B, n int, cpuBefore time.Duration) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "claims/s")
	b.ReportMetric(float64(cputime.Used()-cpuBefore)/1e3/float64(n), "client-cpu-µs/claim")
}

// bareAutoPipeline returns an autopipeliner over the bare client, as the
// store uses one (Options.AutoPipeline).
func bareAutoPipeline(b *testing.B, c *goredis.Client) *goredis.AutoPipeliner {
	ap, err := c.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ap.Close() })
	return ap
}

// benchAddr returns the server to benchmark on.
func benchAddr(b *testing.B) string {
	if addr := os.Getenv("SPENT_REDIS_BENCH_ADDR"); addr != "" {
		return addr
	}
	return redistest.Start(b).Addr
}

// BenchmarkClaim compares, on one server in one run, spent's store with the
// bare engine: Claim from 50 goroutines against SET key val NX EX 108000
// from 50 goroutines (the same client options, so the same pool of
// connections), sent one by one as redis-benchmark does and autopipelined
// as the store does; two-step claims, which run the claim script; the whole
// ledger claim path; and ClaimBatch in batches of 100 against the bare
// SET NX EX pipelined by 100.
func BenchmarkClaim(b *testing.B) {
	addr := benchAddr(b)
	opts := serverOptions(addr, "bench "+strconv.FormatInt(time.Now().UnixNano(), 10))
	ctx := context.Background()
	s := MustOpen(b, opts)
	bare := goredis.NewClient(&goredis.Options{
		Addr: addr, PoolSize: opts.PoolSize, DialTimeout: opts.DialTimeout, ReadTimeout: opts.ReadTimeout,
		WriteTimeout: opts.WriteTimeout, ContextTimeoutEnabled: true, DisableIdentity: true,
	})
	b.Cleanup(func() { bare.Close() })
	bareKey := func(rng *rand.Rand) string {
		var k [16]byte
		binary.LittleEndian.PutUint64(k[:8], rng.Uint64())
		binary.LittleEndian.PutUint64(k[8:], rng.Uint64())
		return opts.Prefix + "bare:" + hex.EncodeToString(k[:])
	}
	c := "c" + strconv.Itoa(benchConcurrency)

	b.Run("BareSETNX/"+c, func(b *testing.B) {
		runClaimers(b, benchConcurrency, func(rng *rand.Rand, _ uint64) error {
			return bare.SetNX(ctx, bareKey(rng), "val", benchTTL).Err()
		})
	})
	b.Run("BareSETNXAutoPipeline/"+c, func(b *testing.B) {
		ap := bareAutoPipeline(b, bare)
		runClaimers(b, benchConcurrency, func(rng *rand.Rand, _ uint64) error {
			return ap.SetNX(ctx, bareKey(rng), "val", benchTTL).Err()
		})
	})
	b.Run("Store/"+c, func(b *testing.B) {
		runClaimers(b, benchConcurrency, func(rng *rand.Rand, seq uint64) error {
			_, err := s.Claim(ctx, benchOp(rng, seq))
			return err
		})
	})
	b.Run("StorePending/"+c, func(b *testing.B) {
		// Two-step claims always run the claim script (the pending index).
		runClaimers(b, benchConcurrency, func(rng *rand.Rand, seq uint64) error {
			op := benchOp(rng, seq)
			op.Record.State, op.Record.Result, op.Record.LeaseUntil = spent.StatePending, nil, op.Now.Add(time.Minute)
			_, err := s.Claim(ctx, op)
			return err
		})
	})
	b.Run("Ledger/"+c, func(b *testing.B) {
		cfg := spent.DefaultConfig()
		cfg.Secret = make([]byte, spent.MinSecretLen)
		cfg.Namespaces = map[string]spent.Policy{"tickets": {
			Mode: spent.ModeRefuse, Retention: benchTTL, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold,
		}}
		l, err := spent.NewLedger(ctx, s, cfg)
		if err != nil {
			b.Fatal(err)
		}
		runClaimers(b, benchConcurrency, func(rng *rand.Rand, _ uint64) error {
			var key [16]byte
			binary.LittleEndian.PutUint64(key[:8], rng.Uint64())
			binary.LittleEndian.PutUint64(key[8:], rng.Uint64())
			_, err := l.Claim(ctx, spent.Claim{Namespace: "tickets", Key: string(key[:]), Place: "gate-12", Result: []byte{}})
			return err
		})
	})
	for _, callers := range []int{1, 4} {
		b.Run("BareSETNXPipeline100/callers"+strconv.Itoa(callers), func(b *testing.B) {
			runBatches(b, callers, 100, func(rng *rand.Rand, _ *atomic.Uint64, n int) error {
				pipe := bare.Pipeline()
				for range n {
					pipe.SetNX(ctx, bareKey(rng), "val", benchTTL)
				}
				_, err := pipe.Exec(ctx)
				return err
			})
		})
		b.Run("StoreBatch100/callers"+strconv.Itoa(callers), func(b *testing.B) {
			runBatches(b, callers, 100, func(rng *rand.Rand, seqs *atomic.Uint64, n int) error {
				ops := make([]spent.ClaimOp, n)
				for i := range ops {
					ops[i] = benchOp(rng, seqs.Add(1))
				}
				_, err := s.ClaimBatch(ctx, ops)
				return err
			})
		})
	}
}

// BenchmarkClaimInterleaved measures the same contenders as BenchmarkClaim,
// but in alternating rounds of 2,000 claims each (bare SET NX EX, the same
// autopipelined, store Claim, two-step store Claim, ledger claim, store
// ClaimBatch of 100 from 4 callers), so that all of them see the same drift
// of a shared machine; it reports each one's claims/s and its ratio to the
// bare SET NX EX. b.N is the number of claims of each contender.
func BenchmarkClaimInterleaved(b *testing.B) {
	addr := benchAddr(b)
	opts := serverOptions(addr, "bench interleaved "+strconv.FormatInt(time.Now().UnixNano(), 10))
	ctx := context.Background()
	s := MustOpen(b, opts)
	bare := goredis.NewClient(&goredis.Options{
		Addr: addr, PoolSize: opts.PoolSize, DialTimeout: opts.DialTimeout, ReadTimeout: opts.ReadTimeout,
		WriteTimeout: opts.WriteTimeout, ContextTimeoutEnabled: true, DisableIdentity: true,
	})
	b.Cleanup(func() { bare.Close() })
	cfg := spent.DefaultConfig()
	cfg.Secret = make([]byte, spent.MinSecretLen)
	cfg.Namespaces = map[string]spent.Policy{"tickets": {
		Mode: spent.ModeRefuse, Retention: benchTTL, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold,
	}}
	l, err := spent.NewLedger(ctx, s, cfg)
	if err != nil {
		b.Fatal(err)
	}
	bareAP := bareAutoPipeline(b, bare)
	var seqs atomic.Uint64
	randKey := func(rng *rand.Rand) [16]byte {
		var k [16]byte
		binary.LittleEndian.PutUint64(k[:8], rng.Uint64())
		binary.LittleEndian.PutUint64(k[8:], rng.Uint64())
		return k
	}
	// Each contender claims n keys from its goroutines.
	concurrent := func(claim func(rng *rand.Rand) error) func(n int) error {
		return func(n int) error {
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, benchConcurrency)
			for w := range benchConcurrency {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
					for next.Add(1) <= int64(n) {
						if err := claim(rng); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			return <-errs
		}
	}
	contenders := []struct {
		name string
		run  func(n int) error
	}{
		{"bare", concurrent(func(rng *rand.Rand) error {
			k := randKey(rng)
			return bare.SetNX(ctx, opts.Prefix+"bare:"+hex.EncodeToString(k[:]), "val", benchTTL).Err()
		})},
		{"bare-autopipelined", concurrent(func(rng *rand.Rand) error {
			k := randKey(rng)
			return bareAP.SetNX(ctx, opts.Prefix+"bare:"+hex.EncodeToString(k[:]), "val", benchTTL).Err()
		})},
		{"store", concurrent(func(rng *rand.Rand) error {
			_, err := s.Claim(ctx, benchOp(rng, seqs.Add(1)))
			return err
		})},
		{"pending", concurrent(func(rng *rand.Rand) error {
			op := benchOp(rng, seqs.Add(1))
			op.Record.State, op.Record.Result, op.Record.LeaseUntil = spent.StatePending, nil, op.Now.Add(time.Minute)
			_, err := s.Claim(ctx, op)
			return err
		})},
		{"ledger", concurrent(func(rng *rand.Rand) error {
			k := randKey(rng)
			_, err := l.Claim(ctx, spent.Claim{Namespace: "tickets", Key: string(k[:]), Place: "gate-12", Result: []byte{}})
			return err
		})},
		{"batch100x4", func(n int) error {
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for c := range 4 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
					for {
						m := int(min(100, int64(n)-(next.Add(100)-100)))
						if m <= 0 {
							return
						}
						ops := make([]spent.ClaimOp, m)
						for i := range ops {
							ops[i] = benchOp(rng, seqs.Add(1))
						}
						if _, err := s.ClaimBatch(ctx, ops); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			return <-errs
		}},
	}
	const round = 2000
	took := make([]time.Duration, len(contenders))
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		for i, c := range contenders {
			start := time.Now()
			if err := c.run(n); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			took[i] += time.Since(start)
		}
	}
	b.StopTimer()
	rate := func(i int) float64 { return float64(b.N) / took[i].Seconds() }
	for i, c := range contenders {
		b.ReportMetric(rate(i), c.name+"-claims/s")
		if i > 0 {
			b.ReportMetric(rate(i)/rate(0), c.name+"/bare")
		}
	}
}

// BenchmarkMemoryPerRecord reports the server memory (INFO used_memory) per
// record, for one-step records (a ticket-gate record) and for pending ones
// (whose pending-index entry counts too), on a server of its own so that no
// other key is counted:
//
//	go test ./redis -run '^$' -bench MemoryPerRecord -benchtime 20000x
func BenchmarkMemoryPerRecord(b *testing.B) {
	for _, tc := range []struct {
		name    string
		pending bool
	}{{"OneStep", false}, {"Pending", true}} {
		b.Run(tc.name, func(b *testing.B) {
			addr := redistest.Start(b).Addr
			opts := serverOptions(addr, "memory")
			s := MustOpen(b, opts)
			ctx := context.Background()
			c := goredis.NewClient(&goredis.Options{Addr: addr})
			b.Cleanup(func() { c.Close() })
			used := func() float64 {
				info, err := c.Info(ctx, "memory").Result()
				if err != nil {
					b.Fatal(err)
				}
				for _, line := range strings.Split(info, "\r\n") {
					if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
						n, err := strconv.ParseFloat(v, 64)
						if err != nil {
							b.Fatal(err)
						}
						return n
					}
				}
				b.Fatal("INFO memory has no used_memory")
				return 0
			}
			rng := rand.New(rand.NewPCG(1, 2))
			before := used()
			b.ResetTimer()
			for i := range b.N {
				op := benchOp(rng, uint64(i+1))
				if tc.pending {
					op.Record.State, op.Record.Result = spent.StatePending, nil
					op.Record.LeaseUntil = op.Now.Add(30 * time.Second)
				}
				if _, err := s.Claim(ctx, op); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric((used()-before)/float64(b.N), "bytes/record")
		})
	}
}
