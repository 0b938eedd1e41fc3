package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
)

// partitions lists the partitions of the store's records table, by name.
func partitions(tb testing.TB, s *postgres.Store) map[string]bool {
	tb.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass($1)`, pgx.Identifier{s.Schema(), "records"}.Sanitize())
	if err != nil {
		tb.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// tableExists reports whether the store's schema has a table named name.
func tableExists(tb testing.TB, s *postgres.Store, name string) bool {
	tb.Helper()
	var ok bool
	if err := s.Pool().QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL",
		pgx.Identifier{s.Schema(), name}.Sanitize()).Scan(&ok); err != nil {
		tb.Fatal(err)
	}
	return ok
}

// rowsOfKey counts the rows of key in every partition.
func rowsOfKey(tb testing.TB, s *postgres.Store, key spent.Hash) int {
	tb.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{s.Schema(), "records"}.Sanitize()+
		" WHERE key = $1", key[:]).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// TestClaimRaceAcrossPartitions has many goroutines claim one key at once,
// each with an expiry in a period of its own (so in a partition of its own,
// where no unique index sees the others' rows): exactly one must be fresh
// and every other answered with its record, and the key must have one row.
// Half claim alone, half within a batch. The partitions do not exist before
// the first race, so its claims also make them at once. Then the same with an
// expired record of the key in an older partition, and with a pending one
// whose lease ran out, which all may retake.
func TestClaimRaceAcrossPartitions(t *testing.T) {
	dsn := pgtest.DSN(t)
	o := testOptions(t, dsn, freshSchema(t, dsn))
	o.PartitionPeriod = time.Hour
	o.MaxConns = 32
	s := MustOpen(t, o)
	ctx := context.Background()
	const n = 24

	race := func(t *testing.T, key string, now time.Time, prep func(op *spent.ClaimOp)) {
		t.Helper()
		answers := make([]spent.ClaimAnswer, n)
		errs := make([]error, n)
		ops := make([]spent.ClaimOp, n)
		for i := range ops {
			ops[i] = pendingOp(key, uint64(1000+i), now)
			ops[i].Record.ExpiresAt = now.Add(time.Duration(i+1) * 61 * time.Minute) // a period each
			ops[i].Record.LeaseUntil = now.Add(time.Minute)
			prep(&ops[i])
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				if i%2 == 0 {
					answers[i], errs[i] = s.Claim(ctx, ops[i])
					return
				}
				other := pendingOp(fmt.Sprintf("%s-other-%d", key, i), uint64(2000+i), now)
				res, err := s.ClaimBatch(ctx, []spent.ClaimOp{other, ops[i]})
				if err == nil {
					answers[i] = res[1]
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("claim %d: %v", i, errs[i])
			}
			if answers[i].Inserted {
				if winner >= 0 {
					t.Fatalf("claims %d and %d of one key (expiring in different partitions) are both fresh", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("no claim of %d was fresh", n)
		}
		for i := range n {
			if i != winner {
				wantRecord(t, fmt.Sprintf("answer to claim %d", i), answers[i].Record, ops[winner].Record)
			}
		}
		if got := rowsOfKey(t, s, hashOf(key)); got != 1 {
			t.Fatalf("rows of the key after the race: got %d, want 1", got)
		}
		got, err := s.Get(ctx, hashOf(key), now)
		if err != nil {
			t.Fatalf("Get after the race: %v", err)
		}
		wantRecord(t, "stored record", got, ops[winner].Record)
	}

	t.Run("NewKey", func(t *testing.T) {
		for round := range 5 {
			race(t, fmt.Sprintf("new-%d", round), t0, func(*spent.ClaimOp) {})
		}
	})
	t.Run("ExpiredRecordInAnOlderPartition", func(t *testing.T) {
		for round := range 5 {
			key := fmt.Sprintf("expired-%d", round)
			old := completeOp(key, 1, t0)
			old.Record.ExpiresAt = t0.Add(time.Minute)
			mustClaim(t, s, old)
			race(t, key, t0.Add(3*time.Hour), func(*spent.ClaimOp) {})
		}
	})
	t.Run("RetakeOfALapsedLease", func(t *testing.T) {
		for round := range 5 {
			key := fmt.Sprintf("lapsed-%d", round)
			old := pendingOp(key, 1, t0) // lease until t0+5s, live for an hour
			mustClaim(t, s, old)
			race(t, key, t0.Add(time.Minute), func(op *spent.ClaimOp) { op.Retake = true })
		}
	})
}

// TestSweepDropsEndedPartitions checks that DeleteExpired drops the
// partitions whose whole period has ended (they leave pg_inherits and the
// schema) and counts their rows, deletes row by row the expired records of
// the current period, keeps every live record, and drops a partition that
// a crashed sweep detached but did not drop.
func TestSweepDropsEndedPartitions(t *testing.T) {
	dsn := pgtest.DSN(t)
	o := testOptions(t, dsn, freshSchema(t, dsn))
	o.PartitionPeriod = time.Hour
	s := MustOpen(t, o)
	ctx := context.Background()
	hour := t0.Truncate(time.Hour) // periods are counted from the epoch
	name := func(t time.Time) string { return "records_" + t.UTC().Format("20060102t150405") }

	// Three records expire in the first hour, two in the second, one early
	// in the third (the current one at the sweep), and four later.
	exps := []time.Duration{5 * time.Minute, 10 * time.Minute, 59 * time.Minute,
		61 * time.Minute, 119 * time.Minute,
		121 * time.Minute,
		170 * time.Minute, 4 * time.Hour, 30 * time.Hour, 24 * 40 * time.Hour}
	var ops []spent.ClaimOp
	for i, d := range exps {
		op := completeOp(fmt.Sprintf("sweep-%d", i), uint64(i+1), hour)
		op.Record.ExpiresAt = hour.Add(d)
		ops = append(ops, op)
	}
	if _, err := s.ClaimBatch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	before := partitions(t, s)
	for _, h := range []time.Time{hour, hour.Add(time.Hour), hour.Add(2 * time.Hour), hour.Add(40 * 24 * time.Hour)} {
		if !before[name(h)] {
			t.Fatalf("partitions before the sweep: %v, want one named %s", before, name(h))
		}
	}

	now := hour.Add(2*time.Hour + 30*time.Minute) // 6 have expired
	// With a limit of 1, the first partition goes whole: it counts 3.
	if got, err := s.DeleteExpired(ctx, now, 1); err != nil || got != 3 {
		t.Fatalf("DeleteExpired(limit 1): got %d, %v, want 3 (the first partition, whole)", got, err)
	}
	if after := partitions(t, s); after[name(hour)] || !after[name(hour.Add(time.Hour))] {
		t.Fatalf("partitions after the first sweep: %v, want %s gone and %s kept", after, name(hour), name(hour.Add(time.Hour)))
	}
	if tableExists(t, s, name(hour)) || tableExists(t, s, "records_swept_"+name(hour)[len("records_"):]) {
		t.Fatalf("the first partition's table is still there after it was swept")
	}
	// The second partition (2) and the expired row of the current one (1).
	if got, err := s.DeleteExpired(ctx, now, 100); err != nil || got != 3 {
		t.Fatalf("DeleteExpired: got %d, %v, want 3", got, err)
	}
	after := partitions(t, s)
	if after[name(hour.Add(time.Hour))] {
		t.Fatalf("partitions after the sweep: %v, want %s gone", after, name(hour.Add(time.Hour)))
	}
	for _, h := range []time.Time{hour.Add(2 * time.Hour), hour.Add(3 * time.Hour), hour.Add(4 * time.Hour), hour.Add(40 * 24 * time.Hour)} {
		if !after[name(h)] {
			t.Fatalf("partitions after the sweep: %v, want %s kept (it may hold live records)", after, name(h))
		}
	}
	if got, err := s.DeleteExpired(ctx, now, 100); err != nil || got != 0 {
		t.Fatalf("DeleteExpired again: got %d, %v, want 0", got, err)
	}
	for i, op := range ops {
		_, err := s.Get(ctx, op.Record.Hash, hour) // all were live then
		if i < 6 {
			wantErr(t, fmt.Sprintf("Get of swept record %d", i), err, spent.ErrNotFound)
			continue
		}
		if err != nil {
			t.Fatalf("Get of live record %d after the sweep: %v", i, err)
		}
		if res := mustClaim(t, s, completeOp(fmt.Sprintf("sweep-%d", i), 100, now)); res.Inserted {
			t.Fatalf("claim of live record %d after the sweep: fresh, want a repeat", i)
		}
	}

	// A sweep that crashed after detaching a partition (renamed, as the
	// sweep renames it) left it behind: the next sweep counts and drops it.
	p := name(hour.Add(4 * time.Hour)) // holds the record expiring at 4h
	records := pgx.Identifier{s.Schema(), "records"}.Sanitize()
	execSQL(t, dsn, "ALTER TABLE "+records+" DETACH PARTITION "+pgx.Identifier{s.Schema(), p}.Sanitize())
	execSQL(t, dsn, "ALTER TABLE "+pgx.Identifier{s.Schema(), p}.Sanitize()+" RENAME TO "+pgx.Identifier{"records_swept_" + p[len("records_"):]}.Sanitize())
	if got, err := s.DeleteExpired(ctx, now, 100); err != nil || got != 1 {
		t.Fatalf("DeleteExpired with a detached partition left behind: got %d, %v, want 1 (its row)", got, err)
	}
	if tableExists(t, s, "records_swept_"+p[len("records_"):]) {
		t.Fatal("the detached partition is still there after the sweep")
	}
}

// TestSweepGivesWayToALongTransaction checks that a sweep that cannot lock
// records to detach a partition (a transaction holds it) does not hold the
// claims queued behind it for long: it gives up, deletes what it can row
// by row, and a later sweep drops the partition.
func TestSweepGivesWayToALongTransaction(t *testing.T) {
	dsn := pgtest.DSN(t)
	o := testOptions(t, dsn, freshSchema(t, dsn))
	o.PartitionPeriod = time.Hour
	s := MustOpen(t, o)
	ctx := context.Background()
	hour := t0.Truncate(time.Hour)
	op := completeOp("k", 1, hour)
	op.Record.ExpiresAt = hour.Add(time.Minute)
	mustClaim(t, s, op)
	live := completeOp("live", 2, hour)
	live.Record.ExpiresAt = hour.Add(3 * time.Hour)
	mustClaim(t, s, live)

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT count(*) FROM "+pgx.Identifier{s.Schema(), "records"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	now := hour.Add(2 * time.Hour)
	got, err := s.DeleteExpired(ctx, now, 100)
	if err != nil || got != 1 {
		t.Fatalf("DeleteExpired while records is in use: got %d, %v, want 1 (deleted row by row)", got, err)
	}
	if !partitions(t, s)["records_"+hour.UTC().Format("20060102t150405")] {
		t.Fatal("the partition was dropped while a transaction held records")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.DeleteExpired(ctx, now, 100); err != nil || got != 0 {
		t.Fatalf("DeleteExpired after the transaction: got %d, %v, want 0 (an empty partition dropped)", got, err)
	}
	if partitions(t, s)["records_"+hour.UTC().Format("20060102t150405")] {
		t.Fatal("the ended partition is still attached after the transaction ended")
	}
	if _, err := s.Get(ctx, live.Record.Hash, now); err != nil {
		t.Fatalf("Get of the live record: %v", err)
	}
}

// TestMigrationPartitionsRecords makes a schema at version 1 (one plain
// records table) and fills it through a store opened on it, then opens it
// with every migration: the records move into partitions, every live
// record is still a repeat, unchanged, and the expired ones are swept.
func TestMigrationPartitionsRecords(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	o := testOptions(t, dsn, freshSchema(t, dsn))
	undo := postgres.SetMigrateTo(1)
	old, err := postgres.Open(ctx, o)
	undo()
	if err != nil {
		t.Fatal(err)
	}
	if got := applied(t, old); len(got) != 1 {
		t.Fatalf("migrations of the old schema: got %v, want only 1", got)
	}
	if len(partitions(t, old)) != 0 {
		t.Fatal("the old schema's records table has partitions")
	}
	// 300 records over 10 days, one in three pending; a tenth expire by now.
	var ops []spent.ClaimOp
	for i := range 300 {
		var op spent.ClaimOp
		if i%3 == 0 {
			op = pendingOp(fmt.Sprintf("m%d", i), uint64(i+1), t0)
		} else {
			op = completeOp(fmt.Sprintf("m%d", i), uint64(i+1), t0)
		}
		op.Record.ExpiresAt = t0.Add(time.Duration(i) * 48 * time.Minute)
		ops = append(ops, op)
	}
	for i := 0; i < len(ops); i += 100 {
		if _, err := old.ClaimBatch(ctx, ops[i:i+100]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.Count(ctx, spent.CountOp{Key: hashOf("quota"), Limit: 5, ExpiresAt: t0.Add(time.Hour), Now: t0}); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s := MustOpen(t, o)
	if got := applied(t, s); len(got) != postgres.SchemaVersion() {
		t.Fatalf("migrations after the new Open: got %v, want %d", got, postgres.SchemaVersion())
	}
	if tableExists(t, s, "records_0001") {
		t.Fatal("the old records table is still there")
	}
	// Each day of expiries got a partition (10 days, plus the current
	// period and the next, made at Open).
	if got := len(partitions(t, s)); got < 10 {
		t.Fatalf("partitions after the migration: got %d, want at least 10", got)
	}
	now := t0.Add(30 * 48 * time.Minute) // records 0..30 have expired
	for i, op := range ops {
		if i <= 30 {
			continue
		}
		got, err := s.Get(ctx, op.Record.Hash, now)
		if err != nil {
			t.Fatalf("Get of record %d after the migration: %v", i, err)
		}
		wantRecord(t, fmt.Sprintf("record %d", i), got, op.Record)
		again := op
		again.Now, again.Record.Seq.Counter = now, 10000+uint64(i)
		res := mustClaim(t, s, again)
		if res.Inserted {
			t.Fatalf("claim of record %d after the migration: fresh, want a repeat", i)
		}
		wantRecord(t, fmt.Sprintf("answer for record %d", i), res.Record, op.Record)
	}
	if c, err := s.Count(ctx, spent.CountOp{Key: hashOf("quota"), Limit: 5, ExpiresAt: t0.Add(time.Hour), Now: t0}); err != nil || c.Value != 2 {
		t.Fatalf("counter after the migration: got %+v, %v, want value 2", c, err)
	}
	swept := 0
	for {
		n, err := s.DeleteExpired(ctx, now, 10)
		if err != nil {
			t.Fatal(err)
		}
		swept += n
		if n < 10 {
			break
		}
	}
	if swept != 32 {
		t.Fatalf("swept after the migration: got %d, want 32 (the 31 expired records and the counter)", swept)
	}
	for i := range 31 {
		_, err := s.Get(ctx, ops[i].Record.Hash, t0)
		wantErr(t, fmt.Sprintf("Get of swept record %d", i), err, spent.ErrNotFound)
	}
}

func wantErr(tb testing.TB, what string, err, want error) {
	tb.Helper()
	if !errors.Is(err, want) || (err == nil) != (want == nil) {
		tb.Fatalf("%s: got %v, want %v", what, err, want)
	}
}
