package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
)

type appliedMigration struct {
	version int32
	at      time.Time
}

// applied lists the rows of schema_migrations of schema.
func applied(tb testing.TB, s *postgres.Store) []appliedMigration {
	tb.Helper()
	rows, err := s.Pool().Query(context.Background(),
		"SELECT version, applied_at FROM "+pgx.Identifier{s.Schema(), "schema_migrations"}.Sanitize()+" ORDER BY version")
	if err != nil {
		tb.Fatalf("reading schema_migrations: %v", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (appliedMigration, error) {
		var m appliedMigration
		return m, r.Scan(&m.version, &m.at)
	})
	if err != nil {
		tb.Fatalf("reading schema_migrations: %v", err)
	}
	return out
}

func TestMigrations(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()

	t.Run("IdempotentAcrossOpens", func(t *testing.T) {
		o := testOptions(t, dsn, freshSchema(t, dsn))
		s := MustOpen(t, o)
		first := applied(t, s)
		if len(first) == 0 || int(first[len(first)-1].version) != postgres.SchemaVersion() {
			t.Fatalf("after the first Open: got migrations %v, want up to version %d", first, postgres.SchemaVersion())
		}
		s.Close()
		s = MustOpen(t, o)
		again := applied(t, s)
		if len(again) != len(first) {
			t.Fatalf("after the second Open: got %d migrations, want the same %d", len(again), len(first))
		}
		for i := range first {
			if again[i] != first[i] {
				t.Fatalf("migration %d: got %v after the second Open, want it untouched (%v)", i, again[i], first[i])
			}
		}
		if _, err := s.Claim(ctx, completeOp("k", 1, t0)); err != nil {
			t.Fatalf("Claim on the migrated schema: %v", err)
		}
	})

	concurrentOpens := func(t *testing.T) {
		o := testOptions(t, dsn, freshSchema(t, dsn))
		o.MinConns = 1
		const n = 8
		stores := make([]*postgres.Store, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				stores[i], errs[i] = postgres.Open(ctx, o)
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Open %d of %d at once: %v", i, n, errs[i])
			}
			defer stores[i].Close()
		}
		if got := applied(t, stores[0]); len(got) != postgres.SchemaVersion() {
			t.Fatalf("migrations after %d concurrent Opens: got %v, want each of %d once", n, got, postgres.SchemaVersion())
		}
		// Every store works on the one schema: one insert among them all.
		inserted := 0
		for i, s := range stores {
			op := completeOp("shared", uint64(i+1), t0)
			if mustClaim(t, s, op).Inserted {
				inserted++
			}
		}
		if inserted != 1 {
			t.Fatalf("claims of one key through %d stores: got %d inserted, want 1", n, inserted)
		}
	}
	t.Run("ConcurrentOpensRace", concurrentOpens)
	t.Run("ConcurrentOpensRaceWithoutAdvisoryLock", func(t *testing.T) {
		defer postgres.SetNoAdvisoryLock()()
		concurrentOpens(t)
	})

	t.Run("RefusesNewerSchema", func(t *testing.T) {
		o := testOptions(t, dsn, freshSchema(t, dsn))
		s := MustOpen(t, o)
		execSQL(t, dsn, "INSERT INTO "+pgx.Identifier{o.Schema, "schema_migrations"}.Sanitize()+" (version, name) VALUES ($1, 'from the future')",
			postgres.SchemaVersion()+1)
		s.Close()
		_, err := postgres.Open(ctx, o)
		if !errors.Is(err, postgres.ErrSchemaTooNew) {
			t.Fatalf("Open of a schema at version %d: got %v, want ErrSchemaTooNew", postgres.SchemaVersion()+1, err)
		}
	})

	t.Run("UsesExistingSchema", func(t *testing.T) {
		schema := freshSchema(t, dsn)
		execSQL(t, dsn, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
		s := MustOpen(t, testOptions(t, dsn, schema))
		if got := applied(t, s); len(got) != postgres.SchemaVersion() {
			t.Fatalf("migrations in a schema made beforehand: got %v, want %d", got, postgres.SchemaVersion())
		}
	})
}
