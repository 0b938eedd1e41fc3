package pebble_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/barepebble"
	"github.com/spentledger/spent/internal/cputime"
	"github.com/spentledger/spent/pebble"
)

// Every benchmark claims fresh random keys, durably, and reports claims/s.
// The figures depend on the disk's fsync latency; see BENCHMARKS.md for the
// machine and the command.

// benchOp returns a one-step claim of a fresh random key, the size of a
// ticket-gate record, made now (as the ledger does, so that expiry times
// increase as they do in service).
func benchOp(rng *rand.Rand, seq uint64) spent.ClaimOp {
	now := time.Now()
	var h spent.Hash
	binary.LittleEndian.PutUint64(h[:8], rng.Uint64())
	binary.LittleEndian.PutUint64(h[8:], rng.Uint64())
	return spent.ClaimOp{
		Now: now,
		Record: spent.Record{
			Namespace: "tickets", Hash: h, FirstSeen: now, Place: "gate-12",
			State: spent.StateComplete, Result: []byte{}, ExpiresAt: now.Add(30 * time.Hour),
			Seq: spent.Seq{Node: 1, Counter: seq},
		},
	}
}

// runClaimers runs b.N claims from workers goroutines, each calling claim
// with its own random source, and reports claims/s.
func runClaimers(b *testing.B, workers int, claim func(rng *rand.Rand, seq uint64) error) {
	b.Helper()
	var next atomic.Int64
	var seqs atomic.Uint64
	var wg sync.WaitGroup
	cpu := cputime.Used()
	b.ResetTimer()
	for w := 0; w < workers; w++ {
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
	reportRate(b, cpu)
}

// reportRate reports claims/s and the CPU time the whole process spent per
// claim, which depends less than claims/s on what else the machine runs.
func reportRate(b *testing.B, cpuBefore time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
	b.ReportMetric(float64(cputime.Used()-cpuBefore)/1e3/float64(b.N), "cpu-µs/claim")
}

// runBatches is runClaimers for callers that send size claims at a time.
func runBatches(b *testing.B, callers, size int, claim func(ops []spent.ClaimOp) error) {
	b.Helper()
	var next atomic.Int64
	var seqs atomic.Uint64
	var wg sync.WaitGroup
	cpu := cputime.Used()
	b.ResetTimer()
	for c := 0; c < callers; c++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			ops := make([]spent.ClaimOp, size)
			for {
				n := int(min(int64(size), int64(b.N)-(next.Add(int64(size))-int64(size))))
				if n <= 0 {
					return
				}
				for i := range ops[:n] {
					ops[i] = benchOp(rng, seqs.Add(1))
				}
				if err := claim(ops[:n]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportRate(b, cpu)
}

func openBench(b *testing.B) *pebble.Store {
	b.Helper()
	s, err := pebble.Open(b.TempDir(), pebble.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func reportStats(b *testing.B, s *pebble.Store) {
	st := s.Stats()
	if st.Rounds > 0 {
		b.ReportMetric(float64(st.Claims)/float64(st.Rounds), "claims/round")
	}
	if st.FilterEntries > 0 {
		b.ReportMetric(float64(st.FilterBytes)/float64(st.FilterEntries), "filter-B/record")
	}
}

// BenchmarkClaim measures the store: Claim from 64 goroutines and from 4,096
// goroutines, and ClaimBatch in batches of 100.
func BenchmarkClaim(b *testing.B) {
	for _, workers := range []int{64, 4096} {
		b.Run("Concurrent"+strconv.Itoa(workers), func(b *testing.B) {
			s := openBench(b)
			ctx := context.Background()
			runClaimers(b, workers, func(rng *rand.Rand, seq uint64) error {
				_, err := s.Claim(ctx, benchOp(rng, seq))
				return err
			})
			reportStats(b, s)
		})
	}
	for _, callers := range []int{1, 41} {
		b.Run("Batch100x"+strconv.Itoa(callers), func(b *testing.B) {
			s := openBench(b)
			ctx := context.Background()
			runBatches(b, callers, 100, func(ops []spent.ClaimOp) error {
				_, err := s.ClaimBatch(ctx, ops)
				return err
			})
			reportStats(b, s)
		})
	}
}

// BenchmarkBareEngine is the baseline: pebble alone, one Set of the encoded
// record per claim in its own pebble.Sync batch (pebble's commit pipeline
// still groups the concurrent fsyncs), no read, no filter, no index.
func BenchmarkBareEngine(b *testing.B) {
	for _, workers := range []int{64, 4096} {
		b.Run("Concurrent"+strconv.Itoa(workers), func(b *testing.B) {
			db := barepebble.Open(b)
			runClaimers(b, workers, func(rng *rand.Rand, seq uint64) error {
				op := benchOp(rng, seq)
				return db.Set(pebble.RecordKey(op.Record.Hash), pebble.EncodeRecord(&op.Record), pdb.Sync)
			})
		})
	}
	for _, callers := range []int{1, 41} {
		b.Run("Batch100x"+strconv.Itoa(callers), func(b *testing.B) {
			db := barepebble.Open(b)
			runBatches(b, callers, 100, func(ops []spent.ClaimOp) error {
				batch := db.NewBatch()
				for i := range ops {
					batch.Set(pebble.RecordKey(ops[i].Record.Hash), pebble.EncodeRecord(&ops[i].Record), nil)
				}
				return batch.Commit(pdb.Sync)
			})
		})
	}
}

// BenchmarkLedgerClaim runs the whole claim path of spent.Ledger over the
// store: validation, HMAC of the key, seq allocation, the store, the answer.
func BenchmarkLedgerClaim(b *testing.B) {
	for _, workers := range []int{64, 4096} {
		b.Run("Concurrent"+strconv.Itoa(workers), func(b *testing.B) {
			s := openBench(b)
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
			runClaimers(b, workers, func(rng *rand.Rand, _ uint64) error {
				var key [24]byte
				binary.LittleEndian.PutUint64(key[:], rng.Uint64())
				binary.LittleEndian.PutUint64(key[8:], rng.Uint64())
				_, err := l.Claim(ctx, spent.Claim{Namespace: "tickets", Key: string(key[:16]), Place: "gate-12", Result: []byte{}})
				return err
			})
			reportStats(b, s)
		})
	}
}

// BenchmarkOpen measures the start-up cost of a store of 500,000 records,
// also reported per record: with the filter saved at Close (Saved: read
// the file, replay the journal, check a sample), and with the file removed
// (Rebuild: Open, then the background build from the record keys, until
// the filter is complete), side by side in one run.
//
//	go test ./pebble -run '^$' -bench Open -benchtime 5x -count 3
func BenchmarkOpen(b *testing.B) {
	const records = 500000
	dir := b.TempDir()
	s, err := pebble.Open(dir, pebble.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ops := make([]spent.ClaimOp, 5000)
	for n := 0; n < records; n += len(ops) {
		for i := range ops {
			ops[i] = benchOp(rng, uint64(n+i+1))
		}
		if _, err := s.ClaimBatch(context.Background(), ops); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for _, rebuild := range []bool{false, true} {
		name := "Saved"
		if rebuild {
			name = "Rebuild"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if rebuild {
					b.StopTimer()
					os.Remove(filepath.Join(dir, pebble.FilterFile))
					b.StartTimer()
				}
				s, err := pebble.Open(dir, pebble.DefaultOptions())
				if err != nil {
					b.Fatal(err)
				}
				for s.Stats().FilterBuilding {
					time.Sleep(time.Millisecond)
				}
				if rebuild {
					// The decision goroutine takes the built filter
					// with the next request.
					if _, err := s.Get(context.Background(), spent.Hash{}, time.Now()); err != nil && !errors.Is(err, spent.ErrNotFound) {
						b.Fatal(err)
					}
				}
				if got := s.Stats().FilterEntries; got != records {
					b.Fatalf("got %d filter entries, want %d", got, records)
				}
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/records, "ns/record")
		})
	}
}

// BenchmarkWALPrefill measures what zero-filling the WAL ahead of its writes
// gains (see the package documentation): claims from 1, 8 and 64 goroutines
// on a new store, whose WAL every round extends, with the WAL zero-filled
// ("Prefilled", the default) and without ("Plain"), side by side in one run.
// With one claimer each claim waits for its own sync, so claims/s is about
// one over the sync time.
//
//	go test ./pebble -run '^$' -bench WALPrefill -benchtime 2s -count 2
func BenchmarkWALPrefill(b *testing.B) {
	for _, workers := range []int{1, 8, 64} {
		for _, c := range []struct {
			name string
			opts func(pebble.Options) pebble.Options
		}{
			{"Prefilled", func(o pebble.Options) pebble.Options { return o }},
			{"Plain", pebble.WithPlainWAL},
		} {
			b.Run(c.name+"/Concurrent"+strconv.Itoa(workers), func(b *testing.B) {
				s, err := pebble.Open(b.TempDir(), c.opts(pebble.DefaultOptions()))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				runClaimers(b, workers, func(rng *rand.Rand, seq uint64) error {
					_, err := s.Claim(ctx, benchOp(rng, seq))
					return err
				})
				reportStats(b, s)
			})
		}
	}
}

// BenchmarkSyncedWrite measures what one durable write costs the machine,
// below pebble: a 4 KiB write over a file's existing blocks, then
// fdatasync, from one goroutine. It reports the wall time and the CPU time
// the process spent per write (a virtual machine's disk can cost tens of
// µs of CPU a sync), which bound what a WAL sync costs the store.
//
//	go test ./pebble -run '^$' -bench SyncedWrite -benchtime 2000x -count 3
func BenchmarkSyncedWrite(b *testing.B) {
	f, err := os.Create(b.TempDir() + "/synced")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const blocks = 2048
	buf := make([]byte, 4096)
	if _, err := f.Write(make([]byte, blocks*len(buf))); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	cpu := cputime.Used()
	b.ResetTimer()
	for i := range b.N {
		if _, err := f.WriteAt(buf, int64(i%blocks)*int64(len(buf))); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Used()-cpu)/1e3/float64(b.N), "cpu-µs/write")
}
