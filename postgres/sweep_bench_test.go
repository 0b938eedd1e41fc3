package postgres_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
)

// BenchmarkSweep measures, side by side on one server, a sweep of E expired
// records among N in all, as spent serve's sweeper runs it (DeleteExpired
// with a limit of 1,000, called until it returns less):
//
//   - Plain: the records table of schema version 1, unpartitioned, whose
//     sweep deletes rows through the expiry index;
//   - Partitioned: the table of version 2, partitioned by day, whose sweep
//     drops the partition of the day that has ended.
//
// The E expired records expire over the day before the sweep, the others
// over the 9 days after it; they are written in expiry order (as claims
// made over time are) with random keys, then the table is vacuumed and
// analyzed, as autovacuum would leave it. It reports the sweep's time, the
// size of the table with its indexes (pg_total_relation_size, summed over
// the partitions) before and after the sweep and after a VACUUM, and the WAL
// the sweep wrote. Plain then reports how long the Open that migrates the
// N-E records left to partitions (migration 0002) takes.
//
// N is SPENT_BENCH_SWEEP_ROWS; without it the benchmark is skipped. E is
// SPENT_BENCH_SWEEP_EXPIRED (default N/10). The server is the one of
// SPENT_TEST_POSTGRES_DSN, else a throwaway cluster with shared_buffers=1GB
// and max_wal_size=8GB. Run it once: -benchtime=1x.
func BenchmarkSweep(b *testing.B) {
	if os.Getenv("SPENT_BENCH_SWEEP_ROWS") == "" {
		b.Skip("set SPENT_BENCH_SWEEP_ROWS (and SPENT_BENCH_SWEEP_EXPIRED) to run it")
	}
	total := envInt(b, "SPENT_BENCH_SWEEP_ROWS", 0)
	expired := envInt(b, "SPENT_BENCH_SWEEP_EXPIRED", max(1, total/10))
	if expired > total {
		b.Fatalf("SPENT_BENCH_SWEEP_EXPIRED=%d: more than SPENT_BENCH_SWEEP_ROWS=%d", expired, total)
	}
	dsn := os.Getenv(pgtest.EnvDSN)
	if dsn == "" {
		c := pgtest.Start(b, pgtest.Options{Settings: map[string]string{
			"shared_buffers": "1GB", "max_wal_size": "8GB", "maintenance_work_mem": "256MB",
		}})
		dsn = c.DSN()
	}
	for _, layout := range []string{"Plain", "Partitioned"} {
		b.Run(layout+"/rows="+strconv.Itoa(total)+"/expired="+strconv.Itoa(expired), func(b *testing.B) {
			if b.N > 1 {
				b.Skip("runs once: use -benchtime=1x")
			}
			sweepOnce(b, dsn, layout == "Plain", total, expired)
		})
	}
}

func sweepOnce(b *testing.B, dsn string, plain bool, total, expired int) {
	ctx := context.Background()
	o := testOptions(b, dsn, freshSchema(b, dsn))
	undo := func() {}
	if plain {
		undo = postgres.SetMigrateTo(1)
	}
	s := MustOpen(b, o)
	undo()
	day := 24 * time.Hour
	now := time.Date(2031, 3, 14, 12, 0, 0, 0, time.UTC)
	yesterday := now.Truncate(day).Add(-day)
	live := now.Add(time.Hour)
	if !plain {
		var ts []time.Time
		for d := range 11 {
			ts = append(ts, yesterday.Add(time.Duration(d)*day))
		}
		if err := s.MakePartitions(ctx, ts...); err != nil {
			b.Fatal(err)
		}
	}
	records := pgx.Identifier{s.Schema(), "records"}.Sanitize()
	b.StopTimer()
	start := time.Now()
	const chunk = 1_000_000
	for first := 1; first <= total; first += chunk {
		last := min(total, first+chunk-1)
		// Row g < E expires in yesterday, in order; the others over the 9
		// days from an hour after now.
		_, err := s.Pool().Exec(ctx, `INSERT INTO `+records+` (key, namespace, raw_key, first_seen, place, fingerprint, state, result,
	expires_at, lease_until, seq_node, seq_counter)
SELECT decode(md5('k' || g), 'hex'), 'tickets', '', $3::bigint, 'gate-12', NULL, 2, '',
	CASE WHEN g <= $4 THEN $5::bigint + (g - 1) * ($6::bigint / $4::bigint)
	ELSE $7::bigint + (g - $4 - 1) * ($8::bigint / greatest($9::bigint - $4, 1)) END,
	NULL, 1, g
FROM generate_series($1::bigint, $2::bigint) AS g`,
			first, last, now.UnixNano(), expired, yesterday.UnixNano(), int64(day), live.UnixNano(), int64(9*day), total)
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, stmt := range []string{"VACUUM (ANALYZE) " + records, "CHECKPOINT"} {
		if _, err := s.Pool().Exec(ctx, stmt); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("wrote %d records (%d expired) in %v", total, expired, time.Since(start).Round(time.Second))
	sizeBefore := tableSize(b, s)
	walBefore := walLSN(b, s)

	b.StartTimer()
	sweepStart := time.Now()
	removed := 0
	for {
		n, err := s.DeleteExpired(ctx, now, 1000)
		if err != nil {
			b.Fatal(err)
		}
		removed += n
		if n < 1000 {
			break
		}
	}
	took := time.Since(sweepStart)
	b.StopTimer()
	wal := walLSN(b, s) - walBefore
	if removed != expired {
		b.Fatalf("swept %d records, want %d", removed, expired)
	}
	sizeAfter := tableSize(b, s)
	if _, err := s.Pool().Exec(ctx, "VACUUM "+records); err != nil {
		b.Fatal(err)
	}
	sizeVacuumed := tableSize(b, s)
	const mb = 1 << 20
	b.ReportMetric(took.Seconds(), "sweep-s")
	b.ReportMetric(float64(removed), "removed")
	b.ReportMetric(float64(sizeBefore)/mb, "MB-before")
	b.ReportMetric(float64(sizeAfter)/mb, "MB-after")
	b.ReportMetric(float64(sizeVacuumed)/mb, "MB-after-vacuum")
	b.ReportMetric(float64(wal)/mb, "WAL-MB")
	if plain {
		// The plain table left, N-E live records, migrated to partitions.
		s.Close()
		start := time.Now()
		MustOpen(b, o)
		b.ReportMetric(time.Since(start).Seconds(), "migrate-s")
		b.ReportMetric(float64(total-expired), "migrated")
	}
}

// tableSize is pg_total_relation_size of records, summed over its
// partitions if it has any.
func tableSize(b *testing.B, s *postgres.Store) int64 {
	var n int64
	if err := s.Pool().QueryRow(context.Background(), `SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree($1::regclass)),
	pg_total_relation_size($1::regclass))::bigint`,
		pgx.Identifier{s.Schema(), "records"}.Sanitize()).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// walLSN is the server's current WAL position, in bytes.
func walLSN(b *testing.B, s *postgres.Store) int64 {
	var n int64
	if err := s.Pool().QueryRow(context.Background(), "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
