package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The records table is partitioned by range of expires_at (migration 0002),
// one partition per period of Options.PartitionPeriod counted from the Unix
// epoch. There is no DEFAULT partition: a partition is made on demand, under
// an advisory lock, when a write finds none for its expiry (the write then
// runs again), and ahead of time for the current and the next period (at
// Open and at each sweep). A DEFAULT partition would have to be scanned, and
// its rows moved, each time a partition is added next to it, and it forbids
// DETACH PARTITION CONCURRENTLY.
//
// A partition whose whole range has ended (upper bound <= now) holds only
// expired rows; DeleteExpired detaches it, renaming it records_swept_...,
// then counts and drops it. A crash between the two leaves the renamed
// table, which the next sweep counts and drops.

// Keys of the advisory locks (two int4 keys: a class, and a checksum of
// the schema) that serialize making partitions and dropping them among the
// processes sharing a schema. lockClass (migrate.go) is the migrations'.
const (
	partitionLockClass = 0x73706e75 // "spnu"
	sweepLockClass     = 0x73706e76 // "spnv"
)

// sweptPrefix starts the name of a partition detached by a sweep and not
// yet dropped.
const sweptPrefix = "records_swept_"

// lockTimeout bounds the wait for the lock on the records table that
// detaching a partition takes: claims queue behind it, so a sweep that
// cannot have it at once gives up and tries again at its next call.
const lockTimeout = "500ms"

// attachTimeout bounds the wait for the lock on records that attaching a
// new partition takes: claims queue behind that wait, so it is short. A
// long transaction on records (pg_dump's, say) then holds the partition
// up: a claim that needs it fails, a sweep tries again at its next call.
const attachTimeout = "500ms"

// partition is one partition of records: its name and its range
// [lo, hi) of expires_at; loMin means MINVALUE, hiMax MAXVALUE.
type partition struct {
	name         string
	lo, hi       int64
	loMin, hiMax bool
}

// covers reports whether e falls in p's range.
func (p partition) covers(e int64) bool {
	return (p.loMin || p.lo <= e) && (p.hiMax || e < p.hi)
}

// endedBy reports whether p's whole range is at or before now: every row
// it can hold has expires_at <= now.
func (p partition) endedBy(now int64) bool { return !p.hiMax && p.hi <= now }

func (p partition) bound() string {
	lo, hi := "MINVALUE", "MAXVALUE"
	if !p.loMin {
		lo = strconv.FormatInt(p.lo, 10)
	}
	if !p.hiMax {
		hi = strconv.FormatInt(p.hi, 10)
	}
	return "FROM (" + lo + ") TO (" + hi + ")"
}

// partitionName names the partition starting at lo: records_ and its
// start in UTC, which is unique as ranges never overlap and start on whole
// seconds (periods are whole seconds, counted from the epoch).
func partitionName(p partition) string {
	if p.loMin {
		return "records_min"
	}
	t := time.Unix(0, p.lo).UTC()
	name := "records_" + t.Format("20060102t150405")
	if ns := t.Nanosecond(); ns != 0 {
		name += fmt.Sprintf("_%09d", ns)
	}
	return name
}

// periodOf returns the partition of period period (nanoseconds) that holds
// e, cut so as not to overlap any of parts (sorted by lo, not overlapping,
// none covering e): a store whose period was changed keeps its old
// partitions, and new ones fill the gaps between them.
func periodOf(e, period int64, parts []partition) partition {
	var p partition
	b := big.NewInt(e)
	per := big.NewInt(period)
	lo := new(big.Int).Sub(b, new(big.Int).Mod(b, per)) // Mod is Euclidean: lo <= e
	hi := new(big.Int).Add(lo, per)
	if lo.IsInt64() {
		p.lo = lo.Int64()
	} else {
		p.loMin = true
	}
	if hi.IsInt64() {
		p.hi = hi.Int64()
	} else {
		p.hiMax = true
	}
	for _, q := range parts {
		if !q.hiMax && q.hi <= e && (p.loMin || q.hi > p.lo) {
			p.lo, p.loMin = q.hi, false
		}
		if !q.loMin && q.lo > e && (p.hiMax || q.lo < p.hi) {
			p.hi, p.hiMax = q.lo, false
		}
	}
	p.name = partitionName(p)
	return p
}

// boundRE reads pg_get_expr of a range partition's bound on one column.
var boundRE = regexp.MustCompile(`^FOR VALUES FROM \((.+)\) TO \((.+)\)$`)

// parseBound reads one side of a bound: MINVALUE, MAXVALUE or a number,
// quoted or not.
func parseBound(s string) (v int64, inf bool, err error) {
	s = strings.TrimSpace(s)
	if s == "MINVALUE" || s == "MAXVALUE" {
		return 0, true, nil
	}
	s = strings.TrimSuffix(strings.Trim(strings.TrimSuffix(s, "::bigint"), "'"), "'")
	v, err = strconv.ParseInt(s, 10, 64)
	return v, false, err
}

// listPartitions returns the partitions of records, sorted by lo.
func (s *Store) listPartitions(ctx context.Context, q querier) ([]partition, error) {
	rows, err := q.Query(ctx, `SELECT c.relname, pg_get_expr(c.relpartbound, c.oid)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = to_regclass($1)`, s.table("records"))
	if err != nil {
		return nil, err
	}
	type nb struct{ name, bound string }
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (nb, error) {
		var x nb
		return x, r.Scan(&x.name, &x.bound)
	})
	if err != nil {
		return nil, err
	}
	parts := make([]partition, 0, len(got))
	for _, g := range got {
		m := boundRE.FindStringSubmatch(g.bound)
		if m == nil {
			return nil, fmt.Errorf("partition %s: unexpected bound %q", g.name, g.bound)
		}
		p := partition{name: g.name}
		var err1, err2 error
		p.lo, p.loMin, err1 = parseBound(m[1])
		p.hi, p.hiMax, err2 = parseBound(m[2])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("partition %s: bound %q: %w", g.name, g.bound, err)
		}
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool {
		return parts[i].loMin || (!parts[j].loMin && parts[i].lo < parts[j].lo)
	})
	return parts, nil
}

// querier is what listPartitions and createPartition need of a pool, a
// connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// table returns the sanitized name of a table of the store's schema.
func (s *Store) table(name string) string { return pgx.Identifier{s.opts.Schema, name}.Sanitize() }

// createPartition makes p and attaches it to records. The table is made
// with its indexes, under names of its own (ATTACH PARTITION finds them
// there), and then attached under an ACCESS EXCLUSIVE lock on records,
// which claims wait for (for milliseconds: the new table is empty). ATTACH
// PARTITION alone takes a lighter lock that lets claims go on, but then, on
// PostgreSQL 15, a claim run right after the attach committed now and then
// still found no partition for its row, in the tests with 100 concurrent
// claims. Keep the indexes in step with those of records (migrations/0002,
// 0003).
func (s *Store) createPartition(ctx context.Context, q querier, p partition) error {
	t := s.table(p.name)
	ident := func(suffix string) string { return pgx.Identifier{p.name + suffix}.Sanitize() }
	for _, stmt := range []string{
		"CREATE TABLE " + t + " (LIKE " + s.table("records") + " INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)",
		"ALTER TABLE " + t + " ADD CONSTRAINT " + ident("_pkey") + " PRIMARY KEY (key, expires_at)",
		"CREATE INDEX " + ident("_expires_at") + " ON " + t + " (expires_at)",
		"CREATE INDEX " + ident("_pending_ns") + " ON " + t + " (namespace, lease_until, seq_node, seq_counter) WHERE state = 1",
		"CREATE INDEX " + ident("_pending") + " ON " + t + " (lease_until, seq_node, seq_counter) WHERE state = 1",
		"CREATE INDEX " + ident("_seq") + " ON " + t + " (seq_node, seq_counter)",
		"LOCK TABLE " + s.table("records") + " IN ACCESS EXCLUSIVE MODE",
		"ALTER TABLE " + s.table("records") + " ATTACH PARTITION " + t + " FOR VALUES " + p.bound(),
	} {
		if _, err := q.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("making partition %s: %w", p.name, err)
		}
	}
	return nil
}

// ensurePartitions makes sure that records has a partition for each of
// exps, and for the period after each, making those missing in one
// transaction under an advisory lock (so that processes sharing the schema
// take turns), which is committed before it returns.
func (s *Store) ensurePartitions(ctx context.Context, exps ...int64) error {
	if !s.partitioned {
		return nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", int32(partitionLockClass), s.schemaSum()); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+attachTimeout+"'"); err != nil {
		return err
	}
	parts, err := s.listPartitions(ctx, tx)
	if err != nil {
		return err
	}
	want := make([]int64, 0, 2*len(exps))
	for _, e := range exps {
		want = append(want, e)
		if e <= math.MaxInt64-s.period {
			want = append(want, e+s.period)
		}
	}
	made := 0
	for _, e := range want {
		if covered(parts, e) {
			continue
		}
		p := periodOf(e, s.period, parts)
		if err := s.createPartition(ctx, tx, p); err != nil {
			return err
		}
		parts = append(parts, p)
		sort.Slice(parts, func(i, j int) bool {
			return parts[i].loMin || (!parts[j].loMin && parts[i].lo < parts[j].lo)
		})
		made++
	}
	if made == 0 {
		return nil
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	s.log.Debug("postgres: made partitions", "schema", s.opts.Schema, "made", made)
	return nil
}

func covered(parts []partition, e int64) bool {
	for _, p := range parts {
		if p.covers(e) {
			return true
		}
	}
	return false
}

// schemaSum is the second key of the store's advisory locks on the schema.
func (s *Store) schemaSum() int32 { return int32(crc32.ChecksumIEEE([]byte(s.opts.Schema))) }

// isNoPartition reports whether err says that a row had no partition of
// records to go to (SQLSTATE 23514 without a constraint: the CHECK
// constraints of records have names).
func isNoPartition(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23514" && pe.ConstraintName == "" &&
		strings.HasPrefix(pe.Message, "no partition of relation")
}

// withPartitions runs f, and again, after making the partitions of exps,
// when it failed for want of one (a period no claim had reached yet).
func (s *Store) withPartitions(ctx context.Context, exps func() []int64, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || !isNoPartition(err) || attempt >= 3 {
			return err
		}
		if err := s.ensurePartitions(ctx, exps()...); err != nil {
			return fmt.Errorf("making a partition: %w", err)
		}
	}
}

// dropEndedPartitions detaches and drops the partitions of records whose
// whole range ended by now, oldest first, until it has removed at least
// limit rows, and returns how many rows they held. Another process's
// sweep at work on the schema makes it return 0 at once; so does a lock on
// records it cannot have within lockTimeout (the next call tries again).
func (s *Store) dropEndedPartitions(ctx context.Context, now int64, limit int) (int, error) {
	if !s.partitioned {
		return 0, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", int32(sweepLockClass), s.schemaSum()).Scan(&locked); err != nil {
		return 0, err
	}
	if !locked {
		return 0, nil
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1, $2)", int32(sweepLockClass), s.schemaSum()); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // closing the session releases it
		}
	}()
	removed := 0
	// Tables a sweep detached and did not get to drop.
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind = 'r' AND starts_with(c.relname, $2) ORDER BY c.relname`, s.opts.Schema, sweptPrefix)
	if err != nil {
		return 0, err
	}
	swept, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	for _, name := range swept {
		n, err := s.dropSwept(ctx, conn.Conn(), name)
		removed += n
		if err != nil {
			return removed, err
		}
	}
	parts, err := s.listPartitions(ctx, conn)
	if err != nil {
		return removed, err
	}
	for _, p := range parts {
		if removed >= limit || !p.endedBy(now) {
			break
		}
		name := sweptPrefix + strings.TrimPrefix(p.name, "records_")
		if len(name) > 63 {
			name = name[:63]
		}
		ok, err := s.detach(ctx, conn.Conn(), p.name, name)
		if err != nil || !ok {
			return removed, err
		}
		n, err := s.dropSwept(ctx, conn.Conn(), name)
		removed += n
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// detach detaches the partition name from records and renames it to
// swept, in one transaction; false when the lock on records could not be
// had within lockTimeout.
func (s *Store) detach(ctx context.Context, conn *pgx.Conn, name, swept string) (bool, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	for _, stmt := range []string{
		"SET LOCAL lock_timeout = '" + lockTimeout + "'",
		"ALTER TABLE " + s.table("records") + " DETACH PARTITION " + s.table(name),
		"ALTER TABLE " + s.table(name) + " RENAME TO " + pgx.Identifier{swept}.Sanitize(),
	} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
				s.log.Info("postgres: sweep could not lock records to detach a partition; trying at the next sweep",
					"schema", s.opts.Schema, "partition", name, "lock_timeout", lockTimeout)
				return false, nil
			}
			return false, fmt.Errorf("detaching partition %s: %w", name, err)
		}
	}
	return true, tx.Commit(ctx)
}

// dropSwept counts the rows of a detached partition and drops it, in one
// transaction.
func (s *Store) dropSwept(ctx context.Context, conn *pgx.Conn, name string) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	var n int64
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+s.table(name)).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting the rows of %s: %w", name, err)
	}
	if _, err := tx.Exec(ctx, "DROP TABLE "+s.table(name)); err != nil {
		return 0, fmt.Errorf("dropping %s: %w", name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	s.log.Debug("postgres: dropped an expired partition", "schema", s.opts.Schema, "table", name, "rows", n)
	return int(n), nil
}

// readPartitioned tells whether records is partitioned (it is not only in
// a schema left at version 1, which tests make).
func (s *Store) readPartitioned(ctx context.Context) error {
	var kind string
	err := s.pool.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)", s.table("records")).Scan(&kind)
	s.partitioned = kind == "p"
	return err
}

// partitionsAhead makes, when missing, the partitions of the current and
// next periods, and of the period after each partition that holds rows and
// has not ended: claims made over time with one retention fill the newest
// partition, and find the next one made by a sweep a period before they
// need it.
func (s *Store) partitionsAhead(ctx context.Context, now int64) error {
	if !s.partitioned {
		return nil
	}
	parts, err := s.listPartitions(ctx, s.pool)
	if err != nil {
		return err
	}
	want := []int64{now}
	for _, p := range parts {
		if p.hiMax || p.endedBy(now) || covered(parts, p.hi) {
			continue
		}
		var used bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+s.table(p.name)+")").Scan(&used); err != nil {
			return err
		}
		if used {
			want = append(want, p.hi)
		}
	}
	if len(want) == 1 && covered(parts, now) && (now > math.MaxInt64-s.period || covered(parts, now+s.period)) {
		return nil
	}
	return s.ensurePartitions(ctx, want...)
}
