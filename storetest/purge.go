package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// The namespaces of the Purge test: A is purged, B must be left as it was.
// Both hold unknown outcomes (hold), so that Unknown shows what each keeps.
const (
	purgeA     = nsRefuseHold
	purgeB     = nsEchoHold
	purgeLimit = 3
)

// testPurge checks Store.Purge: it forgets every record of one namespace,
// pending or complete, live or expired, in calls of at most limit records
// until one returns fewer; the removals survive a reopen; the namespace's
// keys are free again; other namespaces and the counters are untouched;
// Unknown and ListPending no longer list the purged pending records; and a
// later DeleteExpired still works and does not count purged records.
func testPurge(t *testing.T, h Harness) {
	if v := purgeViolations(t, h); len(v) > 0 {
		t.Fatalf("%d violations of the Purge contract:\n%s", len(v), joinLines(v))
	}
}

// joinLines lists v one item a line, indented.
func joinLines(v []string) string { return "  " + strings.Join(v, "\n  ") + "\n" }

// purgeViolations runs the Purge test and returns what the store did wrong.
// Store failures and broken preconditions fail the test at once. It is
// separate from testPurge so that this package's own tests can show that it
// catches stores that get Purge wrong.
func purgeViolations(t *testing.T, h Harness) []string {
	t.Helper()
	ctx := context.Background()
	e := newEnv(t, h, withoutWrap())
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	at := func(d time.Duration) time.Time { return epoch.Add(d) }

	// Records written directly, at the epoch: in A, live and expired (by
	// the ledger's clock at epoch+10s), pending and complete, one pending
	// record an unknown outcome and one still in its lease; the same kinds
	// in B.
	direct := []spent.Record{
		completeRecord(purgeA, 1, at(time.Minute)),
		pendingRecord(purgeA, 2, at(5*time.Second), at(time.Minute)),  // unknown outcome
		pendingRecord(purgeA, 3, at(30*time.Second), at(time.Minute)), // in its lease
		completeRecord(purgeA, 4, at(5*time.Second)),                  // expired
		pendingRecord(purgeA, 5, at(2*time.Second), at(3*time.Second)),
		completeRecord(purgeB, 11, at(time.Minute)),
		pendingRecord(purgeB, 12, at(5*time.Second), at(time.Minute)), // unknown outcome
		completeRecord(purgeB, 13, at(5*time.Second)),                 // expired
		pendingRecord(purgeB, 14, at(30*time.Second), at(time.Minute)),
	}
	for _, r := range direct {
		put(t, e.store, r, epoch)
	}
	// Records claimed through the ledger: one-step, two-step left pending
	// (an unknown outcome once the lease runs out), two-step completed.
	type claimed struct {
		ns, key string
		rec     spent.Record
	}
	var byLedger []claimed
	claim := func(c spent.Claim) {
		r, err := e.ledger.Claim(ctx, c)
		if err != nil || r.Outcome != spent.Fresh {
			t.Fatalf("Claim(%s, %q): got %v, %v, want fresh", c.Namespace, c.Key, r.Outcome, err)
		}
		byLedger = append(byLedger, claimed{c.Namespace, c.Key, r.Record})
	}
	claim(oneStep(purgeA, "a-1", []byte("a-1 result")))
	claim(twoStep(purgeA, "a-2"))
	claim(twoStep(purgeA, "a-3"))
	done, err := e.ledger.Complete(ctx, spent.Completion{Namespace: purgeA, Key: "a-3", Seq: byLedger[2].rec.Seq, Result: []byte("a-3 result")})
	if err != nil {
		t.Fatalf("Complete(a-3): %v", err)
	}
	byLedger[2].rec = done
	claim(oneStep(purgeB, "b-1", []byte("b-1 result")))
	claim(twoStep(purgeB, "b-2"))

	// Counters, one of them under the hash of a record of A.
	for range 2 {
		count(t, e.store, counterKey(1), 10, at(time.Minute), epoch)
	}
	count(t, e.store, storeKey(1), 10, at(time.Minute), epoch)

	var hashesA, hashesB []spent.Hash
	recordsB := map[spent.Hash]spent.Record{}
	for _, r := range direct {
		if r.Namespace == purgeA {
			hashesA = append(hashesA, r.Hash)
		} else {
			hashesB = append(hashesB, r.Hash)
			recordsB[r.Hash] = r
		}
	}
	for _, c := range byLedger {
		if c.ns == purgeA {
			hashesA = append(hashesA, c.rec.Hash)
		} else {
			hashesB = append(hashesB, c.rec.Hash)
			recordsB[c.rec.Hash] = c.rec
		}
	}

	now := e.clock.Advance(10 * time.Second)
	// Preconditions: A has unknown outcomes to lose.
	if got := e.unknown(purgeA, 100); len(got) != 2 {
		t.Fatalf("Unknown(%s) before Purge: got %v, want the 2 unknown outcomes of A", purgeA, seqs(got))
	}

	// A limit of zero removes nothing; an empty namespace has nothing.
	if n, err := e.store.Purge(ctx, purgeA, 0); err != nil || n != 0 {
		bad("Purge(%s, limit 0): got %d, %v, want 0, nil", purgeA, n, err)
	}
	if _, err := e.store.Get(ctx, storeKey(1), epoch); err != nil {
		bad("Get of a record of %s after Purge with limit 0: got %v, want it kept", purgeA, err)
	}
	if n, err := e.store.Purge(ctx, "no-such-namespace", purgeLimit); err != nil || n != 0 {
		bad("Purge of a namespace without records: got %d, %v, want 0, nil", n, err)
	}

	// Purge A in calls of at most purgeLimit until one returns fewer.
	total, calls := 0, 0
	for {
		n, err := e.store.Purge(ctx, purgeA, purgeLimit)
		if err != nil {
			t.Fatalf("Purge(%s, %d) call %d: %v", purgeA, purgeLimit, calls+1, err)
		}
		calls++
		if n > purgeLimit {
			bad("Purge(%s, %d) call %d: removed %d, more than the limit", purgeA, purgeLimit, calls, n)
		}
		total += n
		if n < purgeLimit {
			break
		}
		if calls > 2*len(hashesA) {
			bad("Purge(%s, %d): %d calls without one returning fewer than the limit", purgeA, purgeLimit, calls)
			break
		}
	}
	if total != len(hashesA) {
		bad("Purge(%s) in calls of %d: removed %d records in all, want %d (every record of %s, live or expired, pending or complete)",
			purgeA, purgeLimit, total, len(hashesA), purgeA)
	}
	if n, err := e.store.Purge(ctx, purgeA, purgeLimit); err != nil || n != 0 {
		bad("Purge(%s) once more: got %d, %v, want 0, nil", purgeA, n, err)
	}

	// What Purge removed stays removed.
	e.reopen()

	// Read at the epoch, when every record was live: A's are gone, B's are
	// as they were.
	for i, k := range hashesA {
		if r, err := e.store.Get(ctx, k, epoch); !errors.Is(err, spent.ErrNotFound) {
			bad("Get of purged record %d of %s (%s): got %v (namespace %q), want ErrNotFound", i, purgeA, k, err, r.Namespace)
		}
	}
	for _, k := range hashesB {
		r, err := e.store.Get(ctx, k, epoch)
		if err != nil {
			bad("Get of record %s of %s after purging %s: got %v, want the record", k, purgeB, purgeA, err)
			continue
		}
		if d := diffRecord(r, recordsB[k]); d != "" {
			bad("record %s of %s after purging %s: %s", k, purgeB, purgeA, d)
		}
	}
	// The counters are untouched (limit 0 reads without adding).
	for _, c := range []struct {
		key  spent.Hash
		want uint64
	}{{counterKey(1), 2}, {storeKey(1), 1}} {
		res, err := e.store.Count(ctx, spent.CountOp{Key: c.key, Limit: 0, ExpiresAt: at(time.Hour), Now: now})
		if err != nil {
			t.Fatalf("Count: %v", err)
		}
		if res.Value != c.want {
			bad("counter %s after purging %s: got value %d, want %d", c.key, purgeA, res.Value, c.want)
		}
	}

	// No purged pending record is listed, not even by an index entry left
	// behind; B's are.
	if got := e.unknown(purgeA, 100); len(got) != 0 {
		bad("Unknown(%s) after Purge: got %v, want none", purgeA, seqs(got))
	}
	wantUnknown := []spent.Seq{recordsB[storeKey(12)].Seq, byLedger[4].rec.Seq}
	if got := seqs(e.unknown("", 100)); !sameSeqs(got, wantUnknown) {
		bad("Unknown of every namespace after purging %s: got %v, want B's %v", purgeA, got, wantUnknown)
	}
	later := at(40 * time.Second) // every lease has run out, no record has expired
	if got, err := e.store.ListPending(ctx, purgeA, later, 100); err != nil {
		t.Fatalf("ListPending: %v", err)
	} else if len(got) != 0 {
		bad("ListPending(%s) after Purge: got %v, want none", purgeA, seqs(got))
	}
	wantPending := []spent.Seq{recordsB[storeKey(12)].Seq, recordsB[storeKey(14)].Seq, byLedger[4].rec.Seq}
	if got, err := e.store.ListPending(ctx, "", later, 100); err != nil {
		t.Fatalf("ListPending: %v", err)
	} else if !sameSeqs(seqs(got), wantPending) {
		bad("ListPending of every namespace after purging %s: got %v, want B's %v", purgeA, seqs(got), wantPending)
	}

	// A later sweep removes B's expired record and nothing purged.
	n, err := e.store.DeleteExpired(ctx, now, 100)
	switch {
	case err != nil:
		t.Fatalf("DeleteExpired after Purge: %v", err)
	case h.NativeExpiry && n != 0:
		bad("DeleteExpired after Purge (NativeExpiry): got %d, want 0", n)
	case !h.NativeExpiry && n != 1:
		bad("DeleteExpired after Purge: got %d, want 1 (the expired record of %s)", n, purgeB)
	}
	if !h.NativeExpiry {
		if _, err := e.store.Get(ctx, storeKey(13), epoch); !errors.Is(err, spent.ErrNotFound) {
			bad("Get of the swept record of %s: got %v, want ErrNotFound", purgeB, err)
		}
	}
	if _, err := e.store.Get(ctx, storeKey(11), epoch); err != nil {
		bad("Get of a live record of %s after the sweep: got %v, want the record", purgeB, err)
	}

	// A's keys are free: a claim of a purged live key, complete or pending
	// in its lease, is fresh; B's are still answered from their records.
	for _, i := range []int{1, 3} {
		r := completeRecord(purgeA, i, at(time.Hour))
		r.Seq.Counter += 5000
		res, err := e.store.Claim(ctx, spent.ClaimOp{Record: r, Now: now})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if !res.Inserted {
			bad("Claim of purged key %d of %s: got the record %s, want inserted", i, purgeA, res.Record.Seq)
		}
	}
	for _, c := range byLedger {
		res, err := e.ledger.Claim(ctx, oneStep(c.ns, c.key, []byte("again")))
		if err != nil {
			t.Fatalf("Claim(%s, %q) after Purge: %v", c.ns, c.key, err)
		}
		fresh := res.Outcome == spent.Fresh
		if c.ns == purgeA && !fresh {
			bad("Claim(%s, %q) after Purge: got %v, want fresh", c.ns, c.key, res.Outcome)
		}
		if c.ns == purgeB && fresh {
			bad("Claim(%s, %q) after purging %s: got fresh, want the stored record's answer", c.ns, c.key, purgeA)
		}
	}
	return v
}

// sameSeqs reports whether a and b hold the same seqs, in any order.
func sameSeqs(a, b []spent.Seq) bool {
	less := func(x, y spent.Seq) int {
		switch {
		case x.Less(y):
			return -1
		case y.Less(x):
			return 1
		}
		return 0
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, less)
	slices.SortFunc(b, less)
	return slices.Equal(a, b)
}

// Missing returns how many of keys s no longer holds at now (Get answers
// spent.ErrNotFound), failing tb on any other error. Store packages use it
// to check their own Purge beyond the shared conformance test.
func Missing(tb testing.TB, s spent.Store, keys []spent.Hash, now time.Time) int {
	tb.Helper()
	n := 0
	for _, h := range keys {
		_, err := s.Get(context.Background(), h, now)
		if errors.Is(err, spent.ErrNotFound) {
			n++
		} else if err != nil {
			tb.Fatalf("Get: %v", err)
		}
	}
	return n
}
