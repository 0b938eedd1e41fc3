package ecash_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/internal/cputime"
	"github.com/spentledger/spent/pebble"
)

// benchEnv is an issuer on the embedded pebble store (durable: every claim
// is synced to its WAL before the answer), served over HTTP on loopback.
func benchEnv(b *testing.B) *env {
	st, err := pebble.Open(b.TempDir(), pebble.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	e := newEnv(b, st, func(c *ecash.Config) { c.IssueValue = ecash.MaxOutputs * 8 })
	// Keep a connection per client goroutine: the default transport keeps
	// two idle connections per host, and would measure TCP handshakes.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	e.client.HTTPClient = &http.Client{Transport: tr}
	b.Cleanup(tr.CloseIdleConnections)
	return e
}

// spendBodies issues n tokens of 8 and builds, for each, a spend that pays
// 2 and asks two change tokens back (4 + 2).
func spendBodies(b *testing.B, e *env, n int) [][]byte {
	var coins []ecash.Coin
	for len(coins) < n {
		k := min(n-len(coins), ecash.MaxOutputs)
		ds := make([]uint64, k)
		for i := range ds {
			ds[i] = 8
		}
		coins = append(coins, e.coins(b, ds...)...)
	}
	l, cur := e.currentKeys(b)
	bodies := make([][]byte, n)
	for i, c := range coins {
		seed := make([]byte, ecash.SeedSize)
		rand.Read(seed)
		p, err := ecash.NewOutputs(l.TokenChallenge, []*ecash.Key{cur[4], cur[2]}, seed)
		if err != nil {
			b.Fatal(err)
		}
		bodies[i], err = (&ecash.Spend{Token: c.Token, Return: 6, Outputs: p.Outputs}).MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
	}
	return bodies
}

// BenchmarkSpendInProcess measures the issuer's own cost, without HTTP: first
// spends with two change outputs and replays, side by side on one issuer and
// one store, from 8 goroutines per CPU.
func BenchmarkSpendInProcess(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	b.Run("First", func(b *testing.B) {
		bodies := spendBodies(b, e, b.N)
		var next atomic.Int64
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if a, err := e.iss.Spend(ctx, bodies[next.Add(1)-1]); err != nil || a.Replayed {
					b.Errorf("spend: %v (replayed %v)", err, a.Replayed)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "spends/s")
	})
	b.Run("Replay", func(b *testing.B) {
		const distinct = 256
		bodies := spendBodies(b, e, distinct)
		for _, body := range bodies {
			if _, err := e.iss.Spend(ctx, body); err != nil {
				b.Fatal(err)
			}
		}
		var next atomic.Int64
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if a, err := e.iss.Spend(ctx, bodies[(next.Add(1)-1)%distinct]); err != nil || !a.Replayed {
					b.Errorf("replay: %v (replayed %v)", err, a.Replayed)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "replays/s")
	})
}

// BenchmarkSpend measures, side by side on one issuer and one store, first
// spends with two change outputs and replays of spends already recorded,
// each over HTTP from 8 goroutines per CPU. Request bodies are built before
// the timer starts: the figures are the issuer's (parse, ledger read,
// verify, two blind signatures, one durable claim; or parse and one ledger
// read for a replay).
func BenchmarkSpend(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	const par = 8

	b.Run("First", func(b *testing.B) {
		bodies := spendBodies(b, e, b.N)
		var next atomic.Int64
		b.SetParallelism(par)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				a, err := e.client.Send(ctx, ecash.SpendPath, bodies[next.Add(1)-1])
				if err != nil || a.Replayed {
					b.Errorf("spend: %v (replayed %v)", err, a.Replayed)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "spends/s")
	})

	b.Run("Replay", func(b *testing.B) {
		const distinct = 256
		bodies := spendBodies(b, e, distinct)
		for _, body := range bodies {
			if _, err := e.client.Send(ctx, ecash.SpendPath, body); err != nil {
				b.Fatal(err)
			}
		}
		var next atomic.Int64
		b.SetParallelism(par)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				a, err := e.client.Send(ctx, ecash.SpendPath, bodies[(next.Add(1)-1)%distinct])
				if err != nil || !a.Replayed {
					b.Errorf("replay: %v (replayed %v)", err, a.Replayed)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "replays/s")
	})
}

// BenchmarkSpendVsReplay alternates, in every iteration, a phase of 64 first
// spends (two change outputs each) and a phase of 1,024 replays (16 of each
// of 64 spends already recorded), both over HTTP from 16 goroutines, so that
// both see the same load on a shared machine and both phases last tens of
// milliseconds (a phase of 64 replays, about 4 ms, measured mostly the
// goroutines' start and the last stragglers). It reports the mean wall time per first
// spend, per replay, and their ratio, and the same in CPU time of the process
// (client and server together).
func BenchmarkSpendVsReplay(b *testing.B) {
	e := benchEnv(b)
	ctx := context.Background()
	const phase, workers, repeats = 64, 16, 16
	recorded := spendBodies(b, e, phase)
	for _, body := range recorded {
		if _, err := e.client.Send(ctx, ecash.SpendPath, body); err != nil {
			b.Fatal(err)
		}
	}
	var replays [][]byte
	for range repeats {
		replays = append(replays, recorded...)
	}
	var firstCPU, replayCPU time.Duration
	run := func(bodies [][]byte, replayed bool, cpu *time.Duration) time.Duration {
		c0 := cputime.Used()
		defer func() { *cpu += cputime.Used() - c0 }()
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1) - 1; i < int64(len(bodies)); i = next.Add(1) - 1 {
					a, err := e.client.Send(ctx, ecash.SpendPath, bodies[i])
					if err != nil || a.Replayed != replayed {
						b.Errorf("send: %v (replayed %v)", err, a.Replayed)
						return
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	var first, replay time.Duration
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		bodies := spendBodies(b, e, phase)
		b.StartTimer()
		first += run(bodies, false, &firstCPU)
		replay += run(replays, true, &replayCPU)
	}
	spends, replayed := float64(b.N*phase), float64(b.N*len(replays))
	perSpend, perReplay := first.Seconds()/spends, replay.Seconds()/replayed
	b.ReportMetric(perSpend*1e6, "µs/spend")
	b.ReportMetric(perReplay*1e6, "µs/replay")
	b.ReportMetric(1/perSpend, "spends/s")
	b.ReportMetric(1/perReplay, "replays/s")
	b.ReportMetric(perSpend/perReplay, "ratio")
	cpuSpend, cpuReplay := firstCPU.Seconds()/spends, replayCPU.Seconds()/replayed
	b.ReportMetric(cpuSpend*1e6, "cpu-µs/spend")
	b.ReportMetric(cpuReplay*1e6, "cpu-µs/replay")
	b.ReportMetric(cpuSpend/cpuReplay, "cpu-ratio")
}
