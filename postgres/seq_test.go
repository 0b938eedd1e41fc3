package postgres_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/postgres"
)

// TestMigrationIndexesSeq makes a schema at version 2 (partitioned, without
// the index by seq), fills it over several partitions, then opens it with
// every migration: every partition, old and new, gets the index, and
// ListSeq lists the records written before the upgrade.
func TestMigrationIndexesSeq(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	o := testOptions(t, dsn, freshSchema(t, dsn))
	undo := postgres.SetMigrateTo(2)
	old, err := postgres.Open(ctx, o)
	undo()
	if err != nil {
		t.Fatal(err)
	}
	var ops []spent.ClaimOp
	for i := range 120 {
		op := completeOp(fmt.Sprintf("s%d", i), uint64(i+1), t0)
		op.Record.ExpiresAt = t0.Add(time.Duration(i+1) * 2 * time.Hour) // over 10 days
		ops = append(ops, op)
	}
	if _, err := old.ClaimBatch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s := MustOpen(t, o)
	if got := applied(t, s); len(got) != postgres.SchemaVersion() {
		t.Fatalf("migrations after the new Open: got %v, want %d", got, postgres.SchemaVersion())
	}
	parts := partitions(t, s)
	if len(parts) < 10 {
		t.Fatalf("partitions: got %d, want at least 10", len(parts))
	}
	rows, err := s.Pool().Query(ctx, `SELECT c.relname::text FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND pg_get_indexdef(x.indexrelid) LIKE '%(seq_node, seq_counter)'`, s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	indexed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range indexed {
		have[n] = true
	}
	for p := range parts {
		if !have[p] {
			t.Fatalf("partition %s: got no index by seq, want one (indexed: %v)", p, indexed)
		}
	}
	recs, err := s.ListSeq(ctx, spent.SeqQuery{Node: 1, To: math.MaxUint64, Descending: true, Limit: 10, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 10 || recs[0].Seq.Counter != 120 || recs[9].Seq.Counter != 111 {
		t.Fatalf("ListSeq last 10 after the migration: got %d records from %v, want 1:120 down to 1:111", len(recs), recs[0].Seq)
	}
	if recs[0].Result != nil || recs[0].ResultLen != len("result of s119") {
		t.Fatalf("listed record: got %d result bytes and length %d, want none and %d", len(recs[0].Result), recs[0].ResultLen, len("result of s119"))
	}
}

// BenchmarkSeqIndexSize reports the bytes the index by seq takes per record
// (the partitions' seq indexes, summed) beside the records' own table
// bytes, after 100,000 one-step claims:
//
//	go test ./postgres -run '^$' -bench SeqIndexSize -benchtime 1x
func BenchmarkSeqIndexSize(b *testing.B) {
	const n = 100_000
	dsn := pgtest.DSN(b)
	ctx := context.Background()
	var idx, table float64
	for b.Loop() {
		s := MustOpen(b, testOptions(b, dsn, freshSchema(b, dsn)))
		ops := make([]spent.ClaimOp, 0, 5000)
		for i := range n {
			ops = append(ops, completeOp(fmt.Sprint("size ", i), uint64(i+1), t0))
			if len(ops) == cap(ops) {
				if _, err := s.ClaimBatch(ctx, ops); err != nil {
					b.Fatal(err)
				}
				ops = ops[:0]
			}
		}
		if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE "+pgx.Identifier{s.Schema(), "records"}.Sanitize()); err != nil {
			b.Fatal(err)
		}
		if err := s.Pool().QueryRow(ctx, `SELECT
	(SELECT coalesce(sum(pg_relation_size(x.indexrelid)), 0)::float8
		FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_namespace ns ON ns.oid = c.relnamespace
		WHERE ns.nspname = $1 AND c.relkind = 'r' AND pg_get_indexdef(x.indexrelid) LIKE '%(seq_node, seq_counter)'),
	(SELECT coalesce(sum(pg_relation_size(c.oid)), 0)::float8
		FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
		WHERE ns.nspname = $1 AND c.relkind = 'r' AND c.relname LIKE 'records%')`, s.Schema()).Scan(&idx, &table); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(idx/n, "seq-index-B/record")
	b.ReportMetric(table/n, "table-B/record")
}
