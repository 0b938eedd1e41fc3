package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded schema change, named NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration file %q: want NNNN_name.sql", base)
		}
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("postgres: two migrations with version %d", out[i].version)
		}
	}
	return out, nil
}

// SchemaVersion is the newest schema version this package knows: the
// version of its last embedded migration.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// lockClass is the first key of the advisory lock that serializes
// migrations ("spnt"); the second is a checksum of the schema name, so that
// stores in different schemas do not wait for each other.
const lockClass = 0x73706e74

// migrateTo, when positive, is the newest migration migrate applies; tests
// set it (see export_test.go) to make a schema of an older version.
var migrateTo atomic.Int64

// migrateSteps are the store's code of some migrations, run in the same
// transaction right after their SQL.
var migrateSteps = map[int]func(s *Store, ctx context.Context, tx pgx.Tx) error{
	2: (*Store).partitionRecords,
}

// noAdvisoryLock makes migrate act as on a server without advisory locks.
// Tests set it (see export_test.go).
var noAdvisoryLock atomic.Bool

// errNoAdvisoryLock marks a server without advisory locks.
var errNoAdvisoryLock = errors.New("the server has no advisory locks")

// migrate brings the schema up to date: in one transaction, under an
// advisory lock held until it ends (so that servers starting at once take
// turns and the later ones find nothing to do), it creates the schema when
// missing and applies each embedded migration not yet recorded in
// schema_migrations. It refuses a schema that a newer version of this
// package has migrated further.
//
// A server without advisory locks (CockroachDB has none) migrates without
// one; there a race between two first starts fails one transaction (a
// serialization failure or a duplicate object), which is run again and
// then finds the work done.
func (s *Store) migrate(ctx context.Context) error {
	lock := !noAdvisoryLock.Load()
	for attempt := 0; ; attempt++ {
		err := s.migrateOnce(ctx, lock)
		if err == nil {
			return nil
		}
		if lock && errors.Is(err, errNoAdvisoryLock) {
			s.log.Info("postgres: the server has no advisory locks; concurrent migrations are settled by retrying", "error", err)
			lock = false
			continue
		}
		var pe *pgconn.PgError
		if attempt < 5 && errors.As(err, &pe) {
			switch pe.Code {
			case "40001", "40P01", "23505", "42P06", "42P07": // a concurrent migration won
				continue
			}
		}
		return err
	}
}

func (s *Store) migrateOnce(ctx context.Context, lock bool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if lock {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", int32(lockClass),
			int32(crc32.ChecksumIEEE([]byte(s.opts.Schema)))); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (pe.Code == "42883" || pe.Code == "0A000") { // undefined_function, feature_not_supported
				return fmt.Errorf("%w: %w", errNoAdvisoryLock, err)
			}
			return fmt.Errorf("taking the migration lock: %w", err)
		}
	}
	schema := pgx.Identifier{s.opts.Schema}.Sanitize()
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)",
		s.opts.Schema).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		// Only when missing: CREATE SCHEMA IF NOT EXISTS would still need the
		// CREATE privilege on the database.
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			return fmt.Errorf("creating schema %s: %w", schema, err)
		}
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+schema); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return err
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return err
	}
	done := map[int]bool{}
	newest := 0
	for _, v := range applied {
		done[int(v)] = true
		newest = max(newest, int(v))
	}
	if known := ms[len(ms)-1].version; newest > known {
		return fmt.Errorf("%w: schema %s is at version %d, this binary knows up to %d", ErrSchemaTooNew, schema, newest, known)
	}
	n := 0
	for _, m := range ms {
		if done[m.version] || (migrateTo.Load() > 0 && int64(m.version) > migrateTo.Load()) {
			continue
		}
		// No arguments: pgx sends it with the simple protocol, which runs
		// several statements.
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if step := migrateSteps[m.version]; step != nil {
			if err := step(s, ctx, tx); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return fmt.Errorf("recording migration %s: %w", m.name, err)
		}
		n++
		newest = m.version
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	if n > 0 {
		s.log.Info("postgres: schema migrated", "schema", s.opts.Schema, "applied", n, "version", newest)
	}
	return nil
}

// ErrSchemaTooNew is returned by Open when the schema was migrated by a
// newer version of this package than the running one.
var ErrSchemaTooNew = errors.New("postgres: schema is newer than this binary")

// partitionRecords is the code of migration 0002, whose SQL renamed the
// records table of 0001 to records_0001 (locked until the migration
// commits) and made the partitioned one. It makes a partition for each
// period that holds old rows, found by hopping along the old expiry index
// from one period to the next (a read per period, not per row), copies
// every row, expired ones too (a sweep drops them with their partitions),
// and drops the old table. It all happens in the migration's transaction:
// the copy is all or nothing, and claims wait for it (the copy takes about
// as long as writing the rows again; see docs/stores.md).
func (s *Store) partitionRecords(ctx context.Context, tx pgx.Tx) error {
	old := s.table("records_0001")
	var next *int64
	if err := tx.QueryRow(ctx, "SELECT min(expires_at) FROM "+old).Scan(&next); err != nil {
		return err
	}
	var parts []partition
	for next != nil {
		p := periodOf(*next, s.period, parts)
		if err := s.createPartition(ctx, tx, p); err != nil {
			return err
		}
		parts = append(parts, p)
		if p.hiMax {
			break
		}
		if err := tx.QueryRow(ctx, "SELECT min(expires_at) FROM "+old+" WHERE expires_at >= $1", p.hi).Scan(&next); err != nil {
			return err
		}
	}
	tag, err := tx.Exec(ctx, "INSERT INTO "+s.table("records")+" ("+recordCols+") SELECT "+recordCols+" FROM "+old)
	if err != nil {
		return fmt.Errorf("copying the records: %w", err)
	}
	if _, err := tx.Exec(ctx, "DROP TABLE "+old); err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		s.log.Info("postgres: records moved into partitions", "schema", s.opts.Schema, "records", tag.RowsAffected(), "partitions", len(parts))
	}
	return nil
}
