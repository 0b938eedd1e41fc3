package pebble_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
	"github.com/spentledger/spent/storetest"
)

// TestMain runs the tests, unless SPENT_HOLD_DIR is set: then the test
// binary is TestDirectoryIsLocked's other process, which opens the store in
// that directory, says so, and waits to be killed; or SPENT_FILTER_CHILD:
// then it is filterChild (filtersave_test.go).
func TestMain(m *testing.M) {
	if mode := os.Getenv("SPENT_FILTER_CHILD"); mode != "" {
		filterChild(mode, os.Getenv("SPENT_FILTER_DIR"))
	}
	if dir := os.Getenv("SPENT_HOLD_DIR"); dir != "" {
		if _, err := pebble.Open(dir, pebble.DefaultOptions()); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("holding")
		select {}
	}
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(tb testing.TB, dir string) spent.Store { return MustOpen(tb, dir) },
	})
}

// MustOpen opens the store in dir with the default options and closes it
// when the test ends.
func MustOpen(tb testing.TB, dir string) *pebble.Store {
	tb.Helper()
	return MustOpenWith(tb, dir, pebble.DefaultOptions())
}

// MustOpenWith opens the store in dir with opts and closes it when the test
// ends.
func MustOpenWith(tb testing.TB, dir string, opts pebble.Options) *pebble.Store {
	tb.Helper()
	s, err := pebble.Open(dir, opts)
	if err != nil {
		tb.Fatalf("Open(%q): %v", dir, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// MustClose closes s and fails the test on error.
func MustClose(tb testing.TB, s *pebble.Store) {
	tb.Helper()
	if err := s.Close(); err != nil {
		tb.Fatalf("Close: %v", err)
	}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func randHash(rng *rand.Rand) spent.Hash {
	var h spent.Hash
	for i := 0; i < spent.HashSize; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			h[i+j] = byte(v >> (8 * j))
		}
	}
	return h
}

// complete returns a one-step claim of h that lives until exp.
func completeOp(h spent.Hash, seq uint64, now, exp time.Time) spent.ClaimOp {
	return spent.ClaimOp{
		Now: now,
		Record: spent.Record{
			Namespace: "ns", Hash: h, FirstSeen: now, Place: "gate-1",
			State: spent.StateComplete, Result: []byte("ok"), ExpiresAt: exp,
			Seq: spent.Seq{Node: 1, Counter: seq},
		},
	}
}

// pendingOp returns a two-step claim of h in namespace ns.
func pendingOp(ns string, h spent.Hash, seq uint64, now, lease, exp time.Time) spent.ClaimOp {
	return spent.ClaimOp{
		Now: now,
		Record: spent.Record{
			Namespace: ns, Hash: h, FirstSeen: now, Place: "node-7",
			State: spent.StatePending, ExpiresAt: exp, LeaseUntil: lease,
			Seq: spent.Seq{Node: 1, Counter: seq},
		},
	}
}

func mustClaim(tb testing.TB, s spent.Store, op spent.ClaimOp) spent.ClaimAnswer {
	tb.Helper()
	res, err := s.Claim(context.Background(), op)
	if err != nil {
		tb.Fatalf("Claim(%s): %v", op.Record.Hash, err)
	}
	return res
}

func sameRecord(a, b spent.Record) bool {
	return a.Namespace == b.Namespace && a.Hash == b.Hash && a.RawKey == b.RawKey &&
		a.FirstSeen.Equal(b.FirstSeen) && a.Place == b.Place &&
		bytes.Equal(a.Fingerprint, b.Fingerprint) && a.State == b.State &&
		bytes.Equal(a.Result, b.Result) && (a.Result == nil) == (b.Result == nil) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.LeaseUntil.Equal(b.LeaseUntil) &&
		a.LeaseUntil.IsZero() == b.LeaseUntil.IsZero() && a.Seq == b.Seq
}

func TestRecordSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, dir)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	fp := bytes.Repeat([]byte{0xab}, 32)
	cases := map[string]spent.Record{
		"EmptyResult": {Namespace: "default", Hash: randHash(rng), FirstSeen: t0, Place: "gate",
			State: spent.StateComplete, Result: []byte{}, ExpiresAt: t0.Add(time.Hour), Seq: spent.Seq{Node: 3, Counter: 1}},
		"RawKeyAndFingerprint": {Namespace: "pay", Hash: randHash(rng), RawKey: "order-17", FirstSeen: t0.Add(time.Nanosecond),
			Fingerprint: fp, State: spent.StateComplete, Result: []byte{0, 1, 2}, ExpiresAt: t0.Add(24 * time.Hour),
			Seq: spent.Seq{Node: 1 << 31, Counter: 1<<63 + 5}},
		"Pending": {Namespace: "pay", Hash: randHash(rng), FirstSeen: t0, State: spent.StatePending,
			ExpiresAt: t0.Add(time.Hour), LeaseUntil: t0.Add(30 * time.Second), Seq: spent.Seq{Node: 1, Counter: 9}},
		"FarFuture": {Namespace: "tok", Hash: randHash(rng), FirstSeen: t0, State: spent.StateComplete,
			ExpiresAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), Seq: spent.Seq{Node: 2, Counter: 2}},
	}
	for name, rec := range cases {
		res := mustClaim(t, s, spent.ClaimOp{Record: rec, Now: t0})
		if !res.Inserted {
			t.Fatalf("%s: Inserted = false, want true", name)
		}
	}
	MustClose(t, s)
	s = MustOpen(t, dir)
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := s.Get(ctx, want.Hash, t0)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if !sameRecord(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestClaim(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))

	t.Run("SecondClaimSeesFirst", func(t *testing.T) {
		s := MustOpen(t, t.TempDir())
		h := randHash(rng)
		first := mustClaim(t, s, completeOp(h, 1, t0, t0.Add(time.Hour)))
		second := mustClaim(t, s, completeOp(h, 2, t0.Add(time.Minute), t0.Add(2*time.Hour)))
		if !first.Inserted || second.Inserted {
			t.Fatalf("got Inserted %v then %v, want true then false", first.Inserted, second.Inserted)
		}
		if second.Record.Seq != first.Record.Seq {
			t.Fatalf("got seq %v, want %v", second.Record.Seq, first.Record.Seq)
		}
	})

	t.Run("ExpiredRecordIsFree", func(t *testing.T) {
		s := MustOpen(t, t.TempDir())
		h := randHash(rng)
		mustClaim(t, s, completeOp(h, 1, t0, t0.Add(time.Hour)))
		if _, err := s.Get(ctx, h, t0.Add(time.Hour)); !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("Get at expires_at: got %v, want ErrNotFound", err)
		}
		res := mustClaim(t, s, completeOp(h, 2, t0.Add(time.Hour), t0.Add(3*time.Hour)))
		if !res.Inserted {
			t.Fatal("claim at expires_at: Inserted = false, want true")
		}
		// The old expiry entry is gone: a sweep at the old expiry removes nothing.
		if n, err := s.DeleteExpired(ctx, t0.Add(2*time.Hour), 10); err != nil || n != 0 {
			t.Fatalf("DeleteExpired = %d, %v; want 0, nil", n, err)
		}
		if n, err := s.DeleteExpired(ctx, t0.Add(3*time.Hour), 10); err != nil || n != 1 {
			t.Fatalf("DeleteExpired = %d, %v; want 1, nil", n, err)
		}
	})

	t.Run("RetakeReplacesExpiredLease", func(t *testing.T) {
		s := MustOpen(t, t.TempDir())
		h := randHash(rng)
		mustClaim(t, s, pendingOp("ns", h, 1, t0, t0.Add(time.Second), t0.Add(time.Hour)))
		op := pendingOp("ns", h, 2, t0.Add(2*time.Second), t0.Add(3*time.Second), t0.Add(time.Hour))
		if res := mustClaim(t, s, op); res.Inserted {
			t.Fatal("claim without retake: Inserted = true, want false")
		}
		op.Retake = true
		if res := mustClaim(t, s, op); !res.Inserted {
			t.Fatal("claim with retake: Inserted = false, want true")
		}
		recs, err := s.ListPending(ctx, "", t0.Add(time.Minute), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].Seq.Counter != 2 {
			t.Fatalf("ListPending: got %v, want the retaking record only", recs)
		}
	})

	t.Run("BatchSeesEarlierOps", func(t *testing.T) {
		s := MustOpen(t, t.TempDir())
		h := randHash(rng)
		res, err := s.ClaimBatch(ctx, []spent.ClaimOp{
			completeOp(h, 1, t0, t0.Add(time.Hour)),
			completeOp(h, 2, t0, t0.Add(time.Hour)),
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Inserted || res[1].Inserted || res[1].Record.Seq.Counter != 1 {
			t.Fatalf("got %+v, want the first inserted and the second answered with it", res)
		}
	})

	t.Run("InvalidRecordWritesNothing", func(t *testing.T) {
		s := MustOpen(t, t.TempDir())
		good, bad := completeOp(randHash(rng), 1, t0, t0.Add(time.Hour)), completeOp(randHash(rng), 2, t0, t0.Add(time.Hour))
		bad.Record.Seq = spent.Seq{}
		if _, err := s.ClaimBatch(ctx, []spent.ClaimOp{good, bad}); err == nil {
			t.Fatal("ClaimBatch with a zero seq: got nil error")
		}
		if _, err := s.Get(ctx, good.Record.Hash, t0); !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("Get: got %v, want ErrNotFound", err)
		}
	})
}

func TestCompleteAndRelease(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	s := MustOpen(t, t.TempDir())
	lease, exp := t0.Add(30*time.Second), t0.Add(time.Hour)
	seq := spent.Seq{Node: 1, Counter: 1}

	t.Run("CompleteTwiceWithSameBytes", func(t *testing.T) {
		h := randHash(rng)
		mustClaim(t, s, pendingOp("ns", h, 1, t0, lease, exp))
		rec, err := s.Complete(ctx, h, seq, []byte("result"), t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != spent.StateComplete || string(rec.Result) != "result" || !rec.LeaseUntil.IsZero() {
			t.Fatalf("got %+v, want a complete record holding the result", rec)
		}
		again, err := s.Complete(ctx, h, seq, []byte("result"), t0.Add(time.Minute))
		if err != nil || !sameRecord(again, rec) {
			t.Fatalf("second Complete = %+v, %v; want %+v, nil", again, err, rec)
		}
		if _, err := s.Complete(ctx, h, seq, []byte("other"), t0); !errors.Is(err, spent.ErrNotPending) {
			t.Fatalf("Complete with other bytes: got %v, want ErrNotPending", err)
		}
		if err := s.Release(ctx, h, seq, t0); !errors.Is(err, spent.ErrNotPending) {
			t.Fatalf("Release of complete: got %v, want ErrNotPending", err)
		}
		if recs, _ := s.ListPending(ctx, "", exp.Add(-time.Nanosecond), 10); len(recs) != 0 {
			t.Fatalf("ListPending after Complete: got %d records, want 0", len(recs))
		}
	})

	t.Run("WrongSeq", func(t *testing.T) {
		h := randHash(rng)
		mustClaim(t, s, pendingOp("ns", h, 1, t0, lease, exp))
		other := spent.Seq{Node: 1, Counter: 2}
		if _, err := s.Complete(ctx, h, other, nil, t0); !errors.Is(err, spent.ErrSeqMismatch) {
			t.Fatalf("Complete: got %v, want ErrSeqMismatch", err)
		}
		if err := s.Release(ctx, h, other, t0); !errors.Is(err, spent.ErrSeqMismatch) {
			t.Fatalf("Release: got %v, want ErrSeqMismatch", err)
		}
	})

	t.Run("ZeroSeqIsAnotherClaim", func(t *testing.T) {
		// A store is always given the claim's seq (the ledger finds it);
		// no record holds the zero seq, so it matches none, held or
		// stored, within the lease or after it.
		stored, held := randHash(rng), randHash(rng)
		mustClaim(t, s, pendingOp("ns", stored, 1, t0, lease, exp))
		mustClaim(t, s, earlyOp(held, 1))
		for _, h := range []spent.Hash{stored, held} {
			for _, now := range []time.Time{t0, t0.Add(2 * time.Minute)} { // within both leases, after both
				if _, err := s.Complete(ctx, h, spent.Seq{}, []byte("ok"), now); !errors.Is(err, spent.ErrSeqMismatch) {
					t.Fatalf("Complete with the zero seq at %v: got %v, want ErrSeqMismatch", now, err)
				}
				if err := s.Release(ctx, h, spent.Seq{}, now); !errors.Is(err, spent.ErrSeqMismatch) {
					t.Fatalf("Release with the zero seq at %v: got %v, want ErrSeqMismatch", now, err)
				}
			}
			if rec, err := s.Get(ctx, h, t0); err != nil || rec.State != spent.StatePending {
				t.Fatalf("record after endings with the zero seq: %+v, %v; want it pending", rec, err)
			}
		}
	})

	t.Run("CompleteRecordIsNotPendingWhateverItsSeq", func(t *testing.T) {
		// The ledger checks the state before the seq; so must the store,
		// or a completion racing with a retake gets an answer that no
		// order of the two explains.
		h := randHash(rng)
		mustClaim(t, s, completeOp(h, 5, t0, exp))
		other := spent.Seq{Node: 1, Counter: 6}
		if _, err := s.Complete(ctx, h, other, []byte("ok"), t0); !errors.Is(err, spent.ErrNotPending) {
			t.Fatalf("Complete: got %v, want ErrNotPending", err)
		}
		if err := s.Release(ctx, h, other, t0); !errors.Is(err, spent.ErrNotPending) {
			t.Fatalf("Release: got %v, want ErrNotPending", err)
		}
	})

	t.Run("ExpiredIsNotFound", func(t *testing.T) {
		h := randHash(rng)
		mustClaim(t, s, pendingOp("ns", h, 1, t0, lease, exp))
		if _, err := s.Complete(ctx, h, seq, nil, exp); !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("Complete: got %v, want ErrNotFound", err)
		}
		if err := s.Release(ctx, h, seq, exp); !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("Release: got %v, want ErrNotFound", err)
		}
	})

	t.Run("ReleaseFreesTheKey", func(t *testing.T) {
		h := randHash(rng)
		before := s.Stats().FilterEntries
		mustClaim(t, s, pendingOp("ns", h, 1, t0, lease, exp))
		if err := s.Release(ctx, h, seq, t0); err != nil {
			t.Fatal(err)
		}
		if got := s.Stats().FilterEntries; got != before {
			t.Fatalf("filter entries after release: got %d, want %d", got, before)
		}
		if _, err := s.Get(ctx, h, t0); !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("Get: got %v, want ErrNotFound", err)
		}
		if res := mustClaim(t, s, pendingOp("ns", h, 2, t0, lease, exp)); !res.Inserted {
			t.Fatal("claim after release: Inserted = false, want true")
		}
	})
}

func TestFilterRebuiltOnReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpen(t, dir)
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 5000
	keys := make([]spent.Hash, n)
	ops := make([]spent.ClaimOp, 0, 100)
	for i := range keys {
		keys[i] = randHash(rng)
		ops = append(ops, pendingOp("ns", keys[i], uint64(i+1), t0, t0.Add(time.Minute), t0.Add(time.Hour)))
		if len(ops) == cap(ops) {
			if _, err := s.ClaimBatch(ctx, ops); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	released := 0
	for i := 0; i < n; i += 3 {
		if err := s.Release(ctx, keys[i], spent.Seq{Node: 1, Counter: uint64(i + 1)}, t0); err != nil {
			t.Fatal(err)
		}
		released++
	}
	if got, want := s.Stats().FilterEntries, int64(n-released); got != want {
		t.Fatalf("before reopen: got %d filter entries, want %d", got, want)
	}
	MustClose(t, s)

	s = MustOpen(t, dir)
	if got, want := s.Stats().FilterEntries, int64(n-released); got != want {
		t.Fatalf("after reopen: got %d filter entries, want %d", got, want)
	}
	// Every stored key must still be found: a claim of it is not inserted.
	for i, h := range keys {
		res := mustClaim(t, s, completeOp(h, uint64(n+i+1), t0, t0.Add(time.Hour)))
		if want := i%3 == 0; res.Inserted != want {
			t.Fatalf("key %d: got Inserted %v, want %v", i, res.Inserted, want)
		}
	}
	if st := s.Stats(); st.FilterEntries != n {
		t.Fatalf("got %d filter entries, want %d", st.FilterEntries, n)
	}
}

func TestDeleteExpired(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	dir := t.TempDir()
	s := MustOpen(t, dir)
	const n = 2000
	exps := make(map[spent.Hash]time.Time, n)
	var ops []spent.ClaimOp
	for i := 0; i < n; i++ {
		h := randHash(rng)
		exp := t0.Add(time.Duration(1+rng.IntN(100)) * time.Minute)
		exps[h] = exp
		op := completeOp(h, uint64(i+1), t0, exp)
		if i%4 == 0 {
			op = pendingOp("ns", h, uint64(i+1), t0, t0.Add(time.Minute), exp)
		}
		ops = append(ops, op)
	}
	if _, err := s.ClaimBatch(ctx, ops); err != nil {
		t.Fatal(err)
	}
	// Sweep up to t0+50min in batches of 100, reopening halfway.
	cut := t0.Add(50 * time.Minute)
	want := 0
	for _, e := range exps {
		if !e.After(cut) {
			want++
		}
	}
	total, reads0 := 0, s.Stats().Reads
	for {
		k, err := s.DeleteExpired(ctx, cut, 100)
		if err != nil {
			t.Fatal(err)
		}
		if k > 100 {
			t.Fatalf("DeleteExpired removed %d, limit 100", k)
		}
		total += k
		if k < 100 {
			break
		}
		if total == 500 {
			MustClose(t, s)
			s = MustOpen(t, dir)
			reads0 = s.Stats().Reads - uint64(total)
		}
	}
	if total != want {
		t.Fatalf("removed %d records, want %d", total, want)
	}
	// The sweep reads only what it removes.
	if reads := s.Stats().Reads - reads0; reads > uint64(total) {
		t.Fatalf("sweep read %d records to remove %d", reads, total)
	}
	if got := s.Stats().FilterEntries; got != int64(n-want) {
		t.Fatalf("filter entries: got %d, want %d", got, n-want)
	}
	for h, e := range exps {
		_, err := s.Get(ctx, h, t0)
		if e.After(cut) && err != nil {
			t.Fatalf("live record %s: Get: %v", h, err)
		}
		if !e.After(cut) && !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("swept record %s: Get: got %v, want ErrNotFound", h, err)
		}
	}
	if k, err := s.DeleteExpired(ctx, cut, 100); err != nil || k != 0 {
		t.Fatalf("second sweep: got %d, %v; want 0, nil", k, err)
	}
	// A record written after the sweep below the swept span is still found.
	late := randHash(rng)
	mustClaim(t, s, completeOp(late, n+1, t0, t0.Add(10*time.Minute)))
	if k, err := s.DeleteExpired(ctx, cut, 100); err != nil || k != 1 {
		t.Fatalf("sweep of a late record: got %d, %v; want 1, nil", k, err)
	}
	if recs, err := s.ListPending(ctx, "", cut, n); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range recs {
			if !exps[r.Hash].After(cut) {
				t.Fatalf("ListPending returned swept record %s", r.Hash)
			}
		}
	}
	// Sweep the rest; the store is then empty.
	if _, err := s.DeleteExpired(ctx, t0.Add(200*time.Minute), 10*n); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().FilterEntries; got != 0 {
		t.Fatalf("filter entries after a full sweep: got %d, want 0", got)
	}
}

func TestListPending(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	s := MustOpen(t, t.TempDir())
	type entry struct {
		ns    string
		lease time.Time
		seq   uint64
		h     spent.Hash
	}
	var all []entry
	for i := 0; i < 300; i++ {
		e := entry{
			ns:    []string{"a", "b", "c"}[rng.IntN(3)],
			lease: t0.Add(time.Duration(rng.IntN(60)) * time.Second),
			seq:   uint64(rng.IntN(1 << 20)),
			h:     randHash(rng),
		}
		if i%10 == 0 {
			e.lease = t0.Add(10 * time.Second) // ties, ordered by seq
		}
		mustClaim(t, s, pendingOp(e.ns, e.h, e.seq, t0, e.lease, t0.Add(time.Hour)))
		all = append(all, e)
	}
	// One record whose lease ran out but that expired too: not listed.
	mustClaim(t, s, pendingOp("a", randHash(rng), 1<<30, t0, t0.Add(time.Second), t0.Add(20*time.Second)))
	// One completed record: not listed.
	done := randHash(rng)
	mustClaim(t, s, pendingOp("a", done, 1<<31, t0, t0, t0.Add(time.Hour)))
	if _, err := s.Complete(ctx, done, spent.Seq{Node: 1, Counter: 1 << 31}, nil, t0); err != nil {
		t.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].lease.Equal(all[j].lease) {
			return all[i].lease.Before(all[j].lease)
		}
		return all[i].seq < all[j].seq
	})
	before := t0.Add(30 * time.Second)
	for _, ns := range []string{"", "a", "b", "c"} {
		for _, limit := range []int{1, 7, 1000} {
			t.Run(fmt.Sprintf("ns=%q/limit=%d", ns, limit), func(t *testing.T) {
				var want []entry
				for _, e := range all {
					if (ns == "" || e.ns == ns) && !e.lease.After(before) && len(want) < limit {
						want = append(want, e)
					}
				}
				got, err := s.ListPending(ctx, ns, before, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("got %d records, want %d", len(got), len(want))
				}
				for i := range got {
					if got[i].Hash != want[i].h || got[i].State != spent.StatePending {
						t.Fatalf("record %d: got %s (lease %v seq %v), want %s (lease %v seq %d)",
							i, got[i].Hash, got[i].LeaseUntil, got[i].Seq, want[i].h, want[i].lease, want[i].seq)
					}
				}
			})
		}
	}
}

func TestReserveSeq(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := MustOpen(t, dir)
	first, err := s.ReserveSeq(ctx, 7, 10)
	if err != nil || first != 1 {
		t.Fatalf("first reservation: got %d, %v; want 1, nil", first, err)
	}
	// Concurrent reservations never overlap.
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Go(func() {
			f, err := s.ReserveSeq(ctx, 7, 10)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[f] || (f-1)%10 != 0 {
				t.Errorf("reservation starting at %d overlaps", f)
			}
			seen[f] = true
		})
	}
	wg.Wait()
	MustClose(t, s)
	s = MustOpen(t, dir)
	if f, err := s.ReserveSeq(ctx, 7, 1); err != nil || f != 511 {
		t.Fatalf("after reopen: got %d, %v; want 511, nil", f, err)
	}
	if f, err := s.ReserveSeq(ctx, 8, 1); err != nil || f != 1 {
		t.Fatalf("another node: got %d, %v; want 1, nil", f, err)
	}
}

// TestConcurrentClaimsOfOneKey races claims of one key of every kind (one-step,
// in a batch, two-step, Early and so held in memory when fresh): exactly one
// is inserted, and every claimer sees its record.
func TestConcurrentClaimsOfOneKey(t *testing.T) {
	s := MustOpen(t, t.TempDir())
	rng := rand.New(rand.NewPCG(13, 14))
	for round := 0; round < 20; round++ {
		h := randHash(rng)
		const claimers = 64
		var inserted atomic.Int32
		winners := make([]spent.Seq, claimers)
		var wg sync.WaitGroup
		for i := 0; i < claimers; i++ {
			wg.Go(func() {
				seq := uint64(round*claimers + i + 1)
				op := completeOp(h, seq, t0, t0.Add(time.Hour))
				switch i % 4 {
				case 0: // an Early two-step claim, held in memory if fresh
					op = earlyOp(h, seq)
				case 3:
					op = pendingOp("ns", h, seq, t0, t0.Add(time.Minute), t0.Add(time.Hour))
				}
				var res spent.ClaimAnswer
				var err error
				if i%4 != 1 {
					res, err = s.Claim(context.Background(), op)
				} else {
					var rs []spent.ClaimAnswer
					rs, err = s.ClaimBatch(context.Background(), []spent.ClaimOp{op})
					if err == nil {
						res = rs[0]
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				if res.Inserted {
					inserted.Add(1)
				}
				winners[i] = res.Record.Seq
			})
		}
		wg.Wait()
		if got := inserted.Load(); got != 1 {
			t.Fatalf("round %d: got %d inserted claims, want 1", round, got)
		}
		for i := range winners {
			if winners[i] != winners[0] {
				t.Fatalf("round %d: claimer %d saw seq %v, claimer 0 saw %v", round, i, winners[i], winners[0])
			}
		}
	}
}

func TestContextCancellation(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	s := MustOpen(t, t.TempDir())

	t.Run("CancelledBeforeWritesNothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		h := randHash(rng)
		if _, err := s.Claim(ctx, completeOp(h, 1, t0, t0.Add(time.Hour))); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if _, err := s.Get(context.Background(), h, t0); !errors.Is(err, spent.ErrNotFound) {
			t.Fatalf("Get: got %v, want ErrNotFound", err)
		}
	})

	t.Run("CancelledInFlightIsResolvedByReadingBack", func(t *testing.T) {
		var wg sync.WaitGroup
		var cancelled, answered atomic.Int32
		for i := 0; i < 400; i++ {
			h := randHash(rng)
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(2000))*time.Microsecond)
			wg.Go(func() {
				defer cancel()
				op := completeOp(h, uint64(i+1), t0, t0.Add(time.Hour))
				res, err := s.Claim(ctx, op)
				got, gerr := s.Get(context.Background(), h, t0)
				switch {
				case err == nil:
					answered.Add(1)
					if !res.Inserted || gerr != nil || got.Seq != op.Record.Seq {
						t.Errorf("acknowledged claim: Get = %v, %v", got.Seq, gerr)
					}
				case errors.Is(err, context.DeadlineExceeded):
					cancelled.Add(1)
					// Ambiguous: either written with our seq, or not at all.
					if gerr == nil && got.Seq != op.Record.Seq {
						t.Errorf("cancelled claim: found seq %v, want %v or nothing", got.Seq, op.Record.Seq)
					} else if gerr != nil && !errors.Is(gerr, spent.ErrNotFound) {
						t.Errorf("cancelled claim: Get: %v", gerr)
					}
				default:
					t.Errorf("Claim: %v", err)
				}
			})
		}
		wg.Wait()
		t.Logf("%d answered, %d cancelled", answered.Load(), cancelled.Load())
	})
}

func TestCloseWithClaimsInFlight(t *testing.T) {
	dir := t.TempDir()
	s, err := pebble.Open(dir, pebble.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(17, 18))
	keys := make([]spent.Hash, 2000)
	for i := range keys {
		keys[i] = randHash(rng)
	}
	acked := make([]bool, len(keys))
	var wg sync.WaitGroup
	for g := 0; g < 20; g++ {
		wg.Go(func() {
			for i := g; i < len(keys); i += 20 {
				_, err := s.Claim(context.Background(), completeOp(keys[i], uint64(i+1), t0, t0.Add(time.Hour)))
				if errors.Is(err, spent.ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				acked[i] = true
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := s.Get(context.Background(), keys[0], t0); !errors.Is(err, spent.ErrClosed) {
		t.Fatalf("Get after Close: got %v, want ErrClosed", err)
	}
	if _, err := s.ListPending(context.Background(), "", t0, 1); !errors.Is(err, spent.ErrClosed) {
		t.Fatalf("ListPending after Close: got %v, want ErrClosed", err)
	}
	s = MustOpen(t, dir)
	n := 0
	for i, ok := range acked {
		if !ok {
			continue
		}
		n++
		if _, err := s.Get(context.Background(), keys[i], t0); err != nil {
			t.Fatalf("acknowledged claim %d lost: %v", i, err)
		}
	}
	t.Logf("%d claims acknowledged before Close", n)
}

// TestDurableBeforeReply runs claims and reads on a file system that can
// simulate a power loss: every answer received before the crash must survive
// it, including reads that saw claims still in flight.
func TestDurableBeforeReply(t *testing.T) {
	for attempt := 0; attempt < 5; attempt++ {
		fs := vfs.NewCrashableMem()
		opts := pebble.WithFS(pebble.DefaultOptions(), fs)
		s, err := pebble.Open("db", opts)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(19, uint64(attempt)))
		keys := make([]spent.Hash, 4000)
		for i := range keys {
			keys[i] = randHash(rng)
		}
		var mu sync.Mutex
		var acked []int // claims answered, and reads that found a record
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < 32; g++ {
			wg.Go(func() {
				for i := g; i < len(keys); i += 32 {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := s.Claim(context.Background(), completeOp(keys[i], uint64(i+1), t0, t0.Add(time.Hour))); err != nil {
						return
					}
					mu.Lock()
					acked = append(acked, i)
					mu.Unlock()
				}
			})
			// A reader chasing the claimers.
			wg.Go(func() {
				for i := g; i < len(keys); i += 32 {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := s.Get(context.Background(), keys[i], t0); err == nil {
						mu.Lock()
						acked = append(acked, i)
						mu.Unlock()
					}
				}
			})
		}
		time.Sleep(time.Duration(2+rng.IntN(20)) * time.Millisecond)
		mu.Lock()
		survivors := append([]int(nil), acked...)
		mu.Unlock()
		crashed := fs.CrashClone(vfs.CrashCloneCfg{})
		close(stop)
		wg.Wait()
		MustClose(t, s)

		s = MustOpenWith(t, "db", pebble.WithFS(pebble.DefaultOptions(), crashed))
		for _, i := range survivors {
			rec, err := s.Get(context.Background(), keys[i], t0)
			if err != nil || rec.Seq.Counter != uint64(i+1) {
				t.Fatalf("attempt %d: answer for key %d lost in the crash: %v", attempt, i, err)
			}
		}
		t.Logf("attempt %d: %d answers survived the crash", attempt, len(survivors))
		MustClose(t, s)
	}
}

func TestOptionsValidate(t *testing.T) {
	for name, mod := range map[string]func(*pebble.Options){
		"NegativeExpected": func(o *pebble.Options) { o.ExpectedRecords = -1 },
		"ZeroRound":        func(o *pebble.Options) { o.MaxBatchRound = 0 },
		"TinyMemTable":     func(o *pebble.Options) { o.MemTableSize = 1 },
	} {
		t.Run(name, func(t *testing.T) {
			o := pebble.DefaultOptions()
			mod(&o)
			if err := o.Validate(); err == nil {
				t.Fatal("Validate: got nil, want an error")
			}
			if _, err := pebble.Open(t.TempDir(), o); err == nil {
				t.Fatal("Open: got nil error")
			}
		})
	}
	if o := pebble.DefaultOptions(); o.Validate() != nil {
		t.Fatalf("DefaultOptions: %v", o.Validate())
	}
}

func TestDirectoryIsLocked(t *testing.T) {
	t.Run("ThisProcess", func(t *testing.T) {
		dir := t.TempDir()
		MustOpen(t, dir)
		s, err := pebble.Open(dir, pebble.DefaultOptions())
		if err == nil {
			s.Close()
			t.Fatal("second Open of one directory: got nil error")
		}
		if !errors.Is(err, pebble.ErrLocked) || !strings.Contains(err.Error(), "in use by another store in this process") {
			t.Fatalf("second Open: got %v, want ErrLocked saying this process holds it", err)
		}
	})
	t.Run("AnotherProcess", func(t *testing.T) {
		dir := t.TempDir()
		holder := exec.Command(os.Args[0])
		holder.Env = append(os.Environ(), "SPENT_HOLD_DIR="+dir)
		out, err := holder.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "holding\n" {
			t.Fatalf("holder: read %q, %v", line, err)
		}
		s, err := pebble.Open(dir, pebble.DefaultOptions())
		if err == nil {
			s.Close()
			t.Fatal("Open of a directory another process holds: got nil error")
		}
		want := fmt.Sprintf("in use by process %d", holder.Process.Pid)
		if !errors.Is(err, pebble.ErrLocked) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Open: got %v, want ErrLocked saying %q", err, want)
		}
	})
}
