package postgres_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/cputime"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
)

// BenchmarkPostgres measures, side by side on one server with the same
// settings, claims of fresh random keys:
//
//   - Bare: the bare engine operation, INSERT ... ON CONFLICT DO NOTHING
//     RETURNING of a row like the store's (same columns and sizes, primary
//     key only) through a pgx pool, from N goroutines;
//   - Claim: the store's Claim from N goroutines;
//   - ClaimBatch100: the store's ClaimBatch, 100 claims per call, from B
//     callers;
//   - BareBatch100: 100 bare INSERTs pipelined in one implicit transaction,
//     from B callers, for comparison with ClaimBatch100.
//
// N is SPENT_BENCH_CONCURRENCY (default 32), B SPENT_BENCH_BATCH_CALLERS
// (default 4); the pool has N (or B) connections. SPENT_BENCH_PARTITIONS
// (default 0) makes the store that many daily partitions of records ahead
// (31 is a 30-day retention's), since a claim looks its key up in each. The server is the one of
// SPENT_TEST_POSTGRES_DSN, or a throwaway cluster with durable settings.
// bench/postgres.sh runs it next to pgbench.
func BenchmarkPostgres(b *testing.B) {
	dsn := pgtest.DSN(b)
	n := envInt(b, "SPENT_BENCH_CONCURRENCY", 32)
	callers := envInt(b, "SPENT_BENCH_BATCH_CALLERS", 4)
	ctx := context.Background()

	b.Run("Bare/c="+strconv.Itoa(n), func(b *testing.B) {
		pool, table := bareTable(b, dsn, n)
		sql := "INSERT INTO " + table + " (" + benchCols + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING RETURNING key"
		runClaimers(b, n, func(rng *rand.Rand, seq uint64) error {
			op := benchOp(rng, seq)
			var k []byte
			return pool.QueryRow(ctx, sql, bareArgs(&op)...).Scan(&k)
		})
	})
	b.Run("Claim/c="+strconv.Itoa(n), func(b *testing.B) {
		s := benchStore(b, dsn, n)
		runClaimers(b, n, func(rng *rand.Rand, seq uint64) error {
			_, err := s.Claim(ctx, benchOp(rng, seq))
			return err
		})
	})
	b.Run("ClaimBatch100/callers="+strconv.Itoa(callers), func(b *testing.B) {
		s := benchStore(b, dsn, callers)
		runBatches(b, callers, 100, func(ops []spent.ClaimOp) error {
			_, err := s.ClaimBatch(ctx, ops)
			return err
		})
	})
	b.Run("BareBatch100/callers="+strconv.Itoa(callers), func(b *testing.B) {
		pool, table := bareTable(b, dsn, callers)
		sql := "INSERT INTO " + table + " (" + benchCols + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING RETURNING key"
		runBatches(b, callers, 100, func(ops []spent.ClaimOp) error {
			batch := &pgx.Batch{}
			for i := range ops {
				batch.Queue(sql, bareArgs(&ops[i])...)
			}
			return pool.SendBatch(ctx, batch).Close()
		})
	})
}

// BenchmarkLedgerClaim runs the whole claim path of spent.Ledger over the
// store (validation, HMAC of the key, seq allocation, the store, the
// answer) from N goroutines.
func BenchmarkLedgerClaim(b *testing.B) {
	dsn := pgtest.DSN(b)
	n := envInt(b, "SPENT_BENCH_CONCURRENCY", 32)
	s := benchStore(b, dsn, n)
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
	b.Run("c="+strconv.Itoa(n), func(b *testing.B) {
		runClaimers(b, n, func(rng *rand.Rand, _ uint64) error {
			var key [16]byte
			binary.LittleEndian.PutUint64(key[:], rng.Uint64())
			binary.LittleEndian.PutUint64(key[8:], rng.Uint64())
			_, err := l.Claim(ctx, spent.Claim{Namespace: "tickets", Key: string(key[:]), Place: "gate-12", Result: []byte{}})
			return err
		})
	})
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// benchOp returns a one-step claim of a fresh random key, the size of a
// ticket-gate record (as pebble's benchmarks use), made now.
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

const benchCols = "key, namespace, raw_key, first_seen, place, fingerprint, state, result, expires_at, lease_until, seq_node, seq_counter"

// bareArgs are the columns of op's record, as the store writes them.
func bareArgs(op *spent.ClaimOp) []any {
	r := &op.Record
	return []any{r.Hash[:], []byte(r.Namespace), []byte(r.RawKey), r.FirstSeen.UnixNano(), []byte(r.Place),
		r.Fingerprint, int16(r.State), r.Result, r.ExpiresAt.UnixNano(), nil, int64(r.Seq.Node), int64(r.Seq.Counter)}
}

// bareTable makes a table like the store's records, with its primary key
// and no other index, in a schema dropped at the end, and a pool of conns
// connections to it.
func bareTable(b *testing.B, dsn string, conns int) (*pgxpool.Pool, string) {
	b.Helper()
	schema := freshSchema(b, dsn)
	table := pgx.Identifier{schema, "bare"}.Sanitize()
	execSQL(b, dsn, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	execSQL(b, dsn, "CREATE TABLE "+table+` (
		key bytea PRIMARY KEY, namespace bytea NOT NULL, raw_key bytea NOT NULL, first_seen bigint, place bytea NOT NULL,
		fingerprint bytea, state smallint NOT NULL, result bytea, expires_at bigint NOT NULL, lease_until bigint,
		seq_node bigint NOT NULL, seq_counter bigint NOT NULL)`)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = int32(conns), int32(conns)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	// Make the connections before the clock starts, as Open does.
	held := make([]*pgxpool.Conn, conns)
	for i := range held {
		if held[i], err = pool.Acquire(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range held {
		c.Release()
	}
	return pool, table
}

// benchStore opens a store in a schema of its own with conns connections.
func benchStore(b *testing.B, dsn string, conns int) *postgres.Store {
	b.Helper()
	o := testOptions(b, dsn, freshSchema(b, dsn))
	o.MaxConns, o.MinConns = int32(conns), int32(conns)
	s := MustOpen(b, o)
	if n := envInt(b, "SPENT_BENCH_PARTITIONS", 1); os.Getenv("SPENT_BENCH_PARTITIONS") != "" {
		ts := make([]time.Time, n)
		for i := range ts {
			ts[i] = time.Now().Add(time.Duration(i) * 24 * time.Hour)
		}
		if err := s.MakePartitions(context.Background(), ts...); err != nil {
			b.Fatal(err)
		}
	}
	return s
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
	reportRate(b, cpu)
}

// runBatches is runClaimers for callers that send size claims at a time.
func runBatches(b *testing.B, callers, size int, claim func(ops []spent.ClaimOp) error) {
	b.Helper()
	var next atomic.Int64
	var seqs atomic.Uint64
	var wg sync.WaitGroup
	cpu := cputime.Used()
	b.ResetTimer()
	for c := range callers {
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

// reportRate reports claims/s and the client's CPU time per claim.
func reportRate(b *testing.B, cpuBefore time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
	b.ReportMetric(float64(cputime.Used()-cpuBefore)/1e3/float64(b.N), "client-cpu-µs/claim")
}
