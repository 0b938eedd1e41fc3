package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/storetest"
)

// TestPurge checks what the conformance suite does not see of Purge: it
// walks the primary key over several pages and from call to call (round to
// the start in the call that finds what is left), and leaves alone the
// records of a store in another schema.
func TestPurge(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	s := MustOpen(t, testOptions(t, dsn, freshSchema(t, dsn)))
	other := MustOpen(t, testOptions(t, dsn, freshSchema(t, dsn+"other")))
	write := func(st spent.Store, ns string, n int, counter uint64) []spent.Hash {
		t.Helper()
		hs := make([]spent.Hash, 0, n)
		ops := make([]spent.ClaimOp, 0, 5000)
		flush := func() {
			if _, err := st.ClaimBatch(ctx, ops); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
		for i := range n {
			key := fmt.Sprintf("%s %d %d", ns, counter, i)
			op := completeOp(key, counter+uint64(i), t0)
			if i%4 == 0 {
				op = pendingOp(key, counter+uint64(i), t0)
			}
			op.Record.Namespace = ns
			hs = append(hs, op.Record.Hash)
			if ops = append(ops, op); len(ops) == cap(ops) {
				flush()
			}
		}
		flush()
		return hs
	}
	purged := write(s, "A", 2000, 1)
	kept := write(s, "B", 13000, 100000)
	elsewhere := write(other, "A", 300, 1)

	var got []int
	for {
		n, err := s.Purge(ctx, "A", 1000)
		if err != nil {
			t.Fatalf("Purge: %v", err)
		}
		got = append(got, n)
		if len(got) == 1 {
			// Records written after the first call, about half of
			// them behind where it stopped: the call that finds
			// nothing left walks round to them.
			purged = append(purged, write(s, "A", 50, 200000)...)
		}
		if n < 1000 || len(got) > 10 {
			break
		}
	}
	if fmt.Sprint(got) != "[1000 1000 50]" {
		t.Fatalf("Purge of 2,050 records in calls of 1,000: got %v, want [1000 1000 50]", got)
	}
	if n, err := s.Purge(ctx, "A", 1000); err != nil || n != 0 {
		t.Fatalf("Purge once more: got %d, %v, want 0, nil", n, err)
	}
	if n := storetest.Missing(t, s, purged, t0); n != len(purged) {
		t.Fatalf("records of A gone after Purge: %d, want %d", n, len(purged))
	}
	if n := storetest.Missing(t, s, kept[:2000], t0); n != 0 {
		t.Fatalf("records of B gone after purging A: %d, want 0", n)
	}
	if n := storetest.Missing(t, other, elsewhere, t0); n != 0 {
		t.Fatalf("records of A in another schema gone: %d, want 0", n)
	}
}
