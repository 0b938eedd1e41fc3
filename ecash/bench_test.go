package ecash_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/spentledger/spent/ecash"
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
