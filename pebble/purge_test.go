package pebble_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// TestPurge checks what the conformance suite does not see of Purge: the
// expiry and pending indexes and the existence filter lose the purged keys,
// the walk goes on from call to call (round to the start in the call that
// finds what is left, including records claimed meanwhile behind it), and
// claims decided while it runs are neither lost nor blocked.
func TestPurge(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(21, 22))
	dir := t.TempDir()
	s := MustOpen(t, dir)
	var seq uint64
	write := func(ns string, n int) []spent.Hash {
		t.Helper()
		ops := make([]spent.ClaimOp, n)
		hs := make([]spent.Hash, n)
		for i := range ops {
			seq++
			hs[i] = randHash(rng)
			ops[i] = completeOp(hs[i], seq, t0, t0.Add(time.Hour))
			if i%4 == 0 {
				ops[i] = pendingOp(ns, hs[i], seq, t0, t0.Add(time.Minute), t0.Add(time.Hour))
			}
			ops[i].Record.Namespace = ns
		}
		if _, err := s.ClaimBatch(ctx, ops); err != nil {
			t.Fatal(err)
		}
		return hs
	}
	keys := func(prefix string) int {
		t.Helper()
		n, err := s.CountKeys(prefix)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	purged := write("A", 3000)
	kept := write("B", 2000)

	// Claims in A and B go on while A is purged.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var during []spent.Hash
	crng := rand.New(rand.NewPCG(23, 24))
	for g := range 2 {
		ns := []string{"A", "B"}[g]
		var hs []spent.Hash
		for range 200 {
			hs = append(hs, randHash(crng))
		}
		wg.Go(func() {
			for i, h := range hs {
				op := completeOp(h, uint64(1_000_000*(g+1)+i), t0, t0.Add(time.Hour))
				op.Record.Namespace = ns
				if res, err := s.Claim(ctx, op); err != nil || !res.Inserted {
					t.Errorf("Claim during Purge: %v, %v", res.Inserted, err)
					return
				}
			}
			if ns == "B" {
				mu.Lock()
				during = hs
				mu.Unlock()
			}
		})
	}
	var got []int
	total := 0
	for {
		n, err := s.Purge(ctx, "A", 1000)
		if err != nil {
			t.Fatalf("Purge: %v", err)
		}
		got = append(got, n)
		total += n
		if len(got) == 1 {
			// Records written after the first call, some of them
			// behind where it stopped.
			purged = append(purged, write("A", 100)...)
		}
		if n < 1000 || len(got) > 20 {
			break
		}
	}
	wg.Wait()
	// The claims of A that came after the walk passed their place are
	// left: a second loop, with nothing claimed meanwhile, finds them.
	for {
		n, err := s.Purge(ctx, "A", 1000)
		if err != nil {
			t.Fatalf("Purge: %v", err)
		}
		total += n
		if n < 1000 {
			break
		}
	}
	if total != 3000+100+200 {
		t.Fatalf("Purge in calls of 1000: removed %d in all (calls %v), want 3300", total, got)
	}
	if got[0] != 1000 || got[1] != 1000 || got[2] != 1000 {
		t.Fatalf("Purge in calls of 1000: got %v, want three full calls first", got)
	}
	if n, err := s.Purge(ctx, "A", 1000); err != nil || n != 0 {
		t.Fatalf("Purge once more: got %d, %v, want 0, nil", n, err)
	}
	kept = append(kept, during...)
	check := func(when string) {
		t.Helper()
		for _, h := range purged {
			if _, err := s.Get(ctx, h, t0); !errors.Is(err, spent.ErrNotFound) {
				t.Fatalf("%s: Get of a purged record: got %v, want ErrNotFound", when, err)
			}
		}
		for _, h := range kept {
			if r, err := s.Get(ctx, h, t0); err != nil || r.Namespace != "B" {
				t.Fatalf("%s: Get of a record of B: got %q, %v, want it", when, r.Namespace, err)
			}
		}
		want := map[string]int{"r/": len(kept), "x/": len(kept), "p/": 500}
		for prefix, n := range want {
			if got := keys(prefix); got != n {
				t.Fatalf("%s: keys under %s: got %d, want %d (B's)", when, prefix, got, n)
			}
		}
		if got := s.Stats().FilterEntries; got != int64(len(kept)) {
			t.Fatalf("%s: filter entries: got %d, want %d", when, got, len(kept))
		}
	}
	check("after Purge")
	MustClose(t, s)
	s = MustOpen(t, dir)
	check("after a reopen")
	if recs, err := s.ListPending(ctx, "", t0.Add(30*time.Minute), 10000); err != nil || len(recs) != 500 {
		t.Fatalf("ListPending after Purge: got %d records, %v, want B's 500", len(recs), err)
	}
	if n, err := s.DeleteExpired(ctx, t0.Add(time.Hour), 100000); err != nil || n != len(kept) {
		t.Fatalf("DeleteExpired of everything after Purge: got %d, %v, want B's %d", n, err, len(kept))
	}
}
