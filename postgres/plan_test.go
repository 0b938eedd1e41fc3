package postgres_test

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
)

var actualRows = regexp.MustCompile(`actual time=[0-9.]+\.\.[0-9.]+ rows=([0-9]+)`)

// TestPlansUseIndexes checks, with EXPLAIN on a table of 20,000 records, that
// the sweep, the listing of pending records and the listing by seq walk their indexes instead of
// reading the table: their cost is what they return, not what the store
// holds. A statement of Purge walks the primary key one page at a time.
func TestPlansUseIndexes(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := MustOpen(t, testOptions(t, dsn, freshSchema(t, dsn)))
	ctx := context.Background()
	const n = 20000
	ops := make([]spent.ClaimOp, 0, 5000)
	for i := range n {
		var op spent.ClaimOp
		if i%50 == 0 {
			op = pendingOp(fmt.Sprintf("p%d", i), uint64(i+1), t0)
			op.Record.Namespace = []string{"pay", "tickets"}[i/50%2]
		} else {
			op = completeOp(fmt.Sprintf("k%d", i), uint64(i+1), t0)
		}
		op.Record.ExpiresAt = t0.Add(time.Duration(i) * time.Second)
		ops = append(ops, op)
		if len(ops) == cap(ops) {
			if _, err := s.ClaimBatch(ctx, ops); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	if _, err := s.Pool().Exec(ctx, "ANALYZE "+pgx.Identifier{s.Schema(), "records"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour).UnixNano()
	// The partitions holding the records (of the periods of their
	// expiries): none of them may be read whole. The others are empty.
	rows, err := s.Pool().Query(ctx, "SELECT DISTINCT c.relname::text FROM "+pgx.Identifier{s.Schema(), "records"}.Sanitize()+" r JOIN pg_class c ON c.oid = r.tableoid")
	if err != nil {
		t.Fatal(err)
	}
	full, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, sql string
		args      []any
		index     string
		maxRows   int // the most rows any step of the plan may produce, or 0
	}{
		// 3,601 records have expired; a sweep of 100 must read 100.
		{"DeleteExpired", s.SQL("deleteExpired"), []any{now, int64(100)}, "expires_at", 100},
		{"ListPendingOfANamespace", s.SQL("listPending"), []any{[]byte("pay"), now, 100}, "pending_ns", 0},
		{"ListPendingOfAll", s.SQL("listPendingAll"), []any{now, 100}, "pending", 0},
		// The last 100 of node 1 read 100 rows of the index by seq (per
		// partition, at most), not the 20,000 records.
		{"ListSeqLast", s.SQL("listSeqDesc"), []any{int64(1), int64(0), int64(math.MaxInt64), now - int64(time.Hour), 100}, "seq", 100},
		{"ListSeqRange", s.SQL("listSeq"), []any{int64(1), int64(5000), int64(9000), now - int64(time.Hour), 100}, "seq", 100},
		// A page of Purge walks 1,000 rows of the primary key, whatever
		// the namespace holds.
		{"Purge", s.SQL("purge"), []any{[]byte("pay"), postgres.KeyMin, postgres.KeyMax, int64(100), int64(1000)}, "pkey", 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tx, err := s.Pool().Begin(ctx) // EXPLAIN ANALYZE of a DELETE runs it: roll back
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF) "+tc.sql, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(lines, "\n") + "\n"
			// Each partition has its own indexes, named after it.
			index := regexp.MustCompile(`Index (Only )?Scan (Backward )?using records_[0-9a-z]+_` + tc.index + ` `)
			if !index.MatchString(plan) {
				t.Fatalf("plan:\n%s\nwant an index scan of a partition's %s index", plan, tc.index)
			}
			for _, p := range full {
				if strings.Contains(plan, "Seq Scan on "+p+" ") {
					t.Fatalf("plan:\n%s\nwant no sequential scan of %s, which holds records", plan, p)
				}
			}
			if tc.maxRows > 0 {
				for _, m := range actualRows.FindAllStringSubmatch(plan, -1) {
					if n, _ := strconv.Atoi(m[1]); n > tc.maxRows {
						t.Fatalf("plan:\n%s\nhas a step of %d rows, want at most %d (the limit)", plan, n, tc.maxRows)
					}
				}
			}
		})
	}
}
