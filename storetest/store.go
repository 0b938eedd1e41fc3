package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// storeNode is the node of the seqs the store-level tests write by hand.
const storeNode = 7

// storeKey is a hash for store-level tests.
func storeKey(i int) spent.Hash {
	sum := sha256.Sum256([]byte("store-level key " + itoa(i)))
	var h spent.Hash
	copy(h[:], sum[:])
	return h
}

// complete and pending build records for store-level tests, first seen at
// the epoch.
func completeRecord(ns string, i int, expires time.Time) spent.Record {
	return spent.Record{
		Namespace: ns, Hash: storeKey(i), FirstSeen: epoch, Place: "store", Fingerprint: fpA,
		State: spent.StateComplete, Result: []byte("result " + itoa(i)), ExpiresAt: expires,
		Seq: spent.Seq{Node: storeNode, Counter: uint64(1000 + i)},
	}
}

func pendingRecord(ns string, i int, lease, expires time.Time) spent.Record {
	return spent.Record{
		Namespace: ns, Hash: storeKey(i), FirstSeen: epoch, Place: "store", Fingerprint: fpA,
		State: spent.StatePending, ExpiresAt: expires, LeaseUntil: lease,
		Seq: spent.Seq{Node: storeNode, Counter: uint64(1000 + i)},
	}
}

// put writes r at now and fails the test unless it was inserted.
func put(tb testing.TB, s spent.Store, r spent.Record, now time.Time) {
	tb.Helper()
	res, err := s.Claim(context.Background(), spent.ClaimOp{Record: r, Now: now})
	if err != nil {
		tb.Fatalf("Claim: %v", err)
	}
	if !res.Inserted {
		tb.Fatalf("Claim of %v: got not inserted, want inserted", r.Hash)
	}
}

// wantErr checks that err is want (by errors.Is), or nil when want is nil.
func wantErr(tb testing.TB, what string, err, want error) {
	tb.Helper()
	if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
		tb.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// testStore checks the store contract directly, for what the ledger does not
// expose.
func testStore(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("ClaimInsertsOnlyWhenFree", func(t *testing.T) {
		s := newEnv(t, h).store
		t0 := epoch
		a := pendingRecord(nsEchoRetake, 1, t0.Add(testLease), t0.Add(testRetention))
		res, err := s.Claim(ctx, spent.ClaimOp{Record: a, Now: t0})
		wantErr(t, "Claim", err, nil)
		if !res.Inserted {
			t.Fatalf("first Claim: got not inserted, want inserted")
		}
		checkRecord(t, "inserted record", res.Record, a)

		b := a
		b.Seq.Counter, b.FirstSeen, b.Place = 2000, t0.Add(testLease), "other"
		b.LeaseUntil, b.ExpiresAt = b.FirstSeen.Add(testLease), b.FirstSeen.Add(testRetention)
		for _, op := range []spent.ClaimOp{
			{Record: b, Now: t0},
			{Record: b, Now: t0.Add(testLease - time.Nanosecond), Retake: true},
			{Record: b, Now: t0.Add(testLease)}, // lease ran out, but no retake
		} {
			res, err := s.Claim(ctx, op)
			wantErr(t, "Claim", err, nil)
			if res.Inserted {
				t.Fatalf("Claim at epoch+%v retake=%v: got inserted, want the live record", op.Now.Sub(epoch), op.Retake)
			}
			checkRecord(t, "live record", res.Record, a)
		}
		res, err = s.Claim(ctx, spent.ClaimOp{Record: b, Now: t0.Add(testLease), Retake: true})
		wantErr(t, "Claim", err, nil)
		if !res.Inserted {
			t.Fatalf("retake at the end of the lease: got not inserted, want inserted")
		}
		r, err := s.Get(ctx, b.Hash, b.FirstSeen)
		wantErr(t, "Get", err, nil)
		checkRecord(t, "retaken record", r, b)

		// A record is free at its expires_at.
		c := completeRecord(nsEchoRetake, 1, b.ExpiresAt.Add(time.Hour))
		c.Seq.Counter = 3000
		res, err = s.Claim(ctx, spent.ClaimOp{Record: c, Now: b.ExpiresAt.Add(-time.Nanosecond)})
		wantErr(t, "Claim", err, nil)
		if res.Inserted {
			t.Fatalf("Claim at expires_at-1ns: got inserted, want the live record")
		}
		put(t, s, c, b.ExpiresAt)
		r, err = s.Get(ctx, c.Hash, b.ExpiresAt)
		wantErr(t, "Get", err, nil)
		checkRecord(t, "record written over an expired one", r, c)
	})

	t.Run("GetJudgesByNow", func(t *testing.T) {
		s := newEnv(t, h).store
		exp := epoch.Add(testRetention + 17)
		r := completeRecord(nsEchoHold, 1, exp)
		put(t, s, r, epoch)
		got, err := s.Get(ctx, r.Hash, exp.Add(-time.Nanosecond))
		wantErr(t, "Get at expires_at-1ns", err, nil)
		checkRecord(t, "Get at expires_at-1ns", got, r)
		_, err = s.Get(ctx, r.Hash, exp)
		wantErr(t, "Get at expires_at", err, spent.ErrNotFound)
		_, err = s.Get(ctx, storeKey(2), epoch)
		wantErr(t, "Get of an unknown key", err, spent.ErrNotFound)
		// Reading does not forget: the record is still there for an earlier now.
		_, err = s.Get(ctx, r.Hash, epoch)
		wantErr(t, "Get at the epoch", err, nil)
	})

	t.Run("ConcurrentClaimsInsertOne", func(t *testing.T) {
		s := newEnv(t, h).store
		const n = 64
		res := make([]spent.ClaimAnswer, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := completeRecord(nsEchoHold, 1, epoch.Add(testRetention))
				r.Seq.Counter = uint64(5000 + i)
				<-start
				res[i], errs[i] = s.Claim(ctx, spent.ClaimOp{Record: r, Now: epoch})
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range n {
			wantErr(t, "Claim", errs[i], nil)
			if res[i].Inserted {
				if winner >= 0 {
					t.Fatalf("claims %d and %d both inserted, want exactly one", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("no claim inserted, want exactly one")
		}
		for i := range n {
			if got, want := res[i].Record.Seq, res[winner].Record.Seq; got != want {
				t.Fatalf("claim %d: got record %v, want the winner's %v", i, got, want)
			}
		}
	})

	t.Run("ClaimBatchSeesEarlierOps", func(t *testing.T) {
		s := newEnv(t, h).store
		a := pendingRecord(nsEchoHold, 1, epoch.Add(testLease), epoch.Add(testRetention))
		b := completeRecord(nsEchoHold, 1, epoch.Add(testRetention))
		b.Seq.Counter = 2001
		c := completeRecord(nsEchoHold, 2, epoch.Add(testRetention))
		res, err := s.ClaimBatch(ctx, []spent.ClaimOp{{Record: a, Now: epoch}, {Record: b, Now: epoch}, {Record: c, Now: epoch}})
		wantErr(t, "ClaimBatch", err, nil)
		if len(res) != 3 {
			t.Fatalf("results: got %d, want 3", len(res))
		}
		if !res[0].Inserted || res[1].Inserted || !res[2].Inserted {
			t.Fatalf("inserted: got %v %v %v, want true false true", res[0].Inserted, res[1].Inserted, res[2].Inserted)
		}
		checkRecord(t, "ops[1] answered by ops[0]", res[1].Record, a)
		for _, want := range []spent.Record{a, c} {
			got, err := s.Get(ctx, want.Hash, epoch)
			wantErr(t, "Get", err, nil)
			checkRecord(t, "Get after ClaimBatch", got, want)
		}
	})

	t.Run("CompleteAndReleaseContract", func(t *testing.T) {
		s := newEnv(t, h).store
		now := epoch.Add(time.Second)
		p := pendingRecord(nsEchoHold, 1, epoch.Add(testLease), epoch.Add(testRetention))
		put(t, s, p, epoch)
		other := p.Seq
		other.Counter++
		_, err := s.Complete(ctx, p.Hash, other, []byte("x"), now)
		wantErr(t, "Complete with another seq", err, spent.ErrSeqMismatch)
		wantErr(t, "Release with another seq", s.Release(ctx, p.Hash, other, now), spent.ErrSeqMismatch)
		_, err = s.Complete(ctx, storeKey(99), p.Seq, []byte("x"), now)
		wantErr(t, "Complete of an unknown key", err, spent.ErrNotFound)
		wantErr(t, "Release of an unknown key", s.Release(ctx, storeKey(99), p.Seq, now), spent.ErrNotFound)

		got, err := s.Complete(ctx, p.Hash, p.Seq, []byte{}, now)
		wantErr(t, "Complete", err, nil)
		want := p
		want.State, want.Result, want.LeaseUntil = spent.StateComplete, []byte{}, time.Time{}
		checkRecord(t, "completed record", got, want)
		// An ambiguous completion can be retried with the same bytes.
		got, err = s.Complete(ctx, p.Hash, p.Seq, []byte{}, now)
		wantErr(t, "Complete retried", err, nil)
		checkRecord(t, "retried completion", got, want)
		_, err = s.Complete(ctx, p.Hash, p.Seq, []byte("other"), now)
		wantErr(t, "Complete with other bytes", err, spent.ErrNotPending)
		wantErr(t, "Release of a complete record", s.Release(ctx, p.Hash, p.Seq, now), spent.ErrNotPending)
		r, err := s.Get(ctx, p.Hash, now)
		wantErr(t, "Get", err, nil)
		checkRecord(t, "record after refused writes", r, want)

		q := pendingRecord(nsEchoHold, 2, epoch.Add(testLease), epoch.Add(testRetention))
		put(t, s, q, epoch)
		// The store does not judge leases: the ledger does.
		wantErr(t, "Release after the lease", s.Release(ctx, q.Hash, q.Seq, epoch.Add(testLease)), nil)
		_, err = s.Get(ctx, q.Hash, now)
		wantErr(t, "Get after Release", err, spent.ErrNotFound)
		wantErr(t, "second Release", s.Release(ctx, q.Hash, q.Seq, now), spent.ErrNotFound)

		x := pendingRecord(nsEchoHold, 3, epoch.Add(testLease), epoch.Add(testRetention))
		put(t, s, x, epoch)
		_, err = s.Complete(ctx, x.Hash, x.Seq, []byte("late"), x.ExpiresAt)
		wantErr(t, "Complete at expires_at", err, spent.ErrNotFound)
		wantErr(t, "Release at expires_at", s.Release(ctx, x.Hash, x.Seq, x.ExpiresAt), spent.ErrNotFound)
	})

	if h.NativeExpiry {
		testNativeExpiry(t, h)
	}

	t.Run("DeleteExpiredRemovesExactlyWhatExpired", func(t *testing.T) {
		if h.NativeExpiry {
			t.Skip("the engine expires records itself (Harness.NativeExpiry); NativeExpiry* tests check it instead")
		}
		s := newEnv(t, h).store
		const n = 20
		for i := 1; i <= n; i++ {
			exp := epoch.Add(time.Duration(i) * time.Second)
			if i%3 == 0 {
				put(t, s, pendingRecord(nsEchoHold, i, exp, exp), epoch)
			} else {
				put(t, s, completeRecord(nsEchoHold, i, exp), epoch)
			}
		}
		// Nothing has expired 1ns before the first expiry.
		if got, err := s.DeleteExpired(ctx, epoch.Add(time.Second-1), 100); err != nil || got != 0 {
			t.Fatalf("DeleteExpired before any expiry: got %d, %v, want 0, nil", got, err)
		}
		// At epoch+5s, records 1..5 have expired (5 exactly at its expires_at).
		if got, err := s.DeleteExpired(ctx, epoch.Add(5*time.Second), 100); err != nil || got != 5 {
			t.Fatalf("DeleteExpired at epoch+5s: got %d, %v, want 5, nil", got, err)
		}
		if got, err := s.DeleteExpired(ctx, epoch.Add(5*time.Second), 100); err != nil || got != 0 {
			t.Fatalf("DeleteExpired again: got %d, %v, want 0, nil", got, err)
		}
		// Reading at the epoch, when all were live, shows what was removed.
		for i := 1; i <= n; i++ {
			_, err := s.Get(ctx, storeKey(i), epoch)
			if i <= 5 {
				wantErr(t, "Get of deleted record "+itoa(i), err, spent.ErrNotFound)
			} else {
				wantErr(t, "Get of kept record "+itoa(i), err, nil)
			}
		}
	})

	t.Run("DeleteExpiredHonoursLimit", func(t *testing.T) {
		if h.NativeExpiry {
			t.Skip("the engine expires records itself (Harness.NativeExpiry); NativeExpiry* tests check it instead")
		}
		s := newEnv(t, h).store
		const n = 30
		for i := 1; i <= n; i++ {
			put(t, s, completeRecord(nsRefuseHold, i, epoch.Add(time.Duration(i)*time.Second)), epoch)
		}
		now := epoch.Add(22 * time.Second)
		total := 0
		for range 20 {
			got, err := s.DeleteExpired(ctx, now, 4)
			if err != nil {
				t.Fatalf("DeleteExpired: %v", err)
			}
			if got > 4 {
				t.Fatalf("DeleteExpired with limit 4: got %d, want at most 4", got)
			}
			total += got
			if got == 0 {
				break
			}
		}
		if total != 22 {
			t.Fatalf("removed in batches of 4: got %d, want 22", total)
		}
		for i := 1; i <= n; i++ {
			_, err := s.Get(ctx, storeKey(i), epoch)
			if i <= 22 {
				wantErr(t, "Get of deleted record "+itoa(i), err, spent.ErrNotFound)
			} else {
				wantErr(t, "Get of kept record "+itoa(i), err, nil)
			}
		}
	})

	t.Run("ListPendingOldestLeaseFirst", func(t *testing.T) {
		s := newEnv(t, h).store
		at := func(d time.Duration) time.Time { return epoch.Add(d) }
		exp := at(testRetention)
		recs := []spent.Record{
			pendingRecord(nsEchoHold, 1, at(3*time.Second), exp),
			pendingRecord(nsEchoHold, 2, at(1*time.Second), exp),
			pendingRecord(nsEchoHold, 3, at(2*time.Second), exp),
			pendingRecord(nsEchoRetake, 4, at(1500*time.Millisecond), exp),
			completeRecord(nsEchoHold, 5, exp),
			pendingRecord(nsEchoHold, 6, at(10*time.Second), exp),
			pendingRecord(nsEchoHold, 7, at(500*time.Millisecond), at(4*time.Second)), // expired by epoch+5s
		}
		for _, r := range recs {
			put(t, s, r, epoch)
		}
		counters := func(rs []spent.Record) []uint64 {
			out := make([]uint64, len(rs))
			for i := range rs {
				out[i] = rs[i].Seq.Counter - 1000
			}
			return out
		}
		cases := []struct {
			name   string
			ns     string
			before time.Time
			limit  int
			want   []uint64
		}{
			{"OneNamespace", nsEchoHold, at(5 * time.Second), 100, []uint64{2, 3, 1}},
			{"AllNamespaces", "", at(5 * time.Second), 100, []uint64{2, 4, 3, 1}},
			{"Limit", "", at(5 * time.Second), 2, []uint64{2, 4}},
			{"LeaseEndingExactlyThen", nsEchoHold, at(2 * time.Second), 100, []uint64{7, 2, 3}},
			{"NoneYet", nsEchoHold, at(400 * time.Millisecond), 100, []uint64{}},
			{"OtherNamespace", nsRefuseHold, at(5 * time.Second), 100, []uint64{}},
		}
		for _, tc := range cases {
			got, err := s.ListPending(ctx, tc.ns, tc.before, tc.limit)
			wantErr(t, tc.name, err, nil)
			if g := counters(got); !equalUints(g, tc.want) {
				t.Fatalf("%s: got records %v, want %v", tc.name, g, tc.want)
			}
			for _, r := range got {
				i := int(r.Seq.Counter - 1000)
				for _, w := range recs {
					if w.Hash == storeKey(i) {
						checkRecord(t, tc.name, r, w)
					}
				}
			}
		}
	})

	t.Run("ReserveSeqBlocksAreDisjoint", func(t *testing.T) {
		s := newEnv(t, h).store
		rng := newRand(t)
		var mu sync.Mutex
		var blocks []seqBlock
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			r := rng.child()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					node := uint32(1 + (g+r.IntN(3))%3)
					n := uint64(1 + r.IntN(100))
					first, err := s.ReserveSeq(ctx, node, n)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					blocks = append(blocks, seqBlock{node, first, n})
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("ReserveSeq: %v", err)
		}
		checkDisjoint(t, blocks)
	})

	t.Run("ClosedStoreFails", func(t *testing.T) {
		e := newEnv(t, h)
		put(t, e.store, completeRecord(nsEchoHold, 1, epoch.Add(testRetention)), epoch)
		e.close()
		_, err := e.store.Get(ctx, storeKey(1), epoch)
		wantErr(t, "Get after Close", err, spent.ErrClosed)
		_, err = e.store.Claim(ctx, spent.ClaimOp{Record: completeRecord(nsEchoHold, 2, epoch.Add(testRetention)), Now: epoch})
		wantErr(t, "Claim after Close", err, spent.ErrClosed)
	})
}

func equalUints(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// testNativeExpiry checks a store that expires records by the engine's own
// clock: DeleteExpired removes nothing, and a record is physically gone soon
// after its ExpiresAt passes in real time (a read at an earlier instant, when
// the record would still be live, no longer finds it).
func testNativeExpiry(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("NativeExpiryDeleteExpiredRemovesNothing", func(t *testing.T) {
		s := newEnv(t, h).store
		for i := 1; i <= 5; i++ {
			put(t, s, completeRecord(nsEchoHold, i, epoch.Add(time.Duration(i)*time.Second)), epoch)
		}
		if got, err := s.DeleteExpired(ctx, epoch.Add(time.Hour), 100); err != nil || got != 0 {
			t.Fatalf("DeleteExpired: got %d, %v, want 0, nil", got, err)
		}
		for i := 1; i <= 5; i++ {
			_, err := s.Get(ctx, storeKey(i), epoch)
			wantErr(t, "Get at the epoch of record "+itoa(i), err, nil)
		}
	})

	t.Run("NativeExpiryForgetsInRealTime", func(t *testing.T) {
		s := newEnv(t, h).store
		real0 := time.Now()
		before := real0.Add(-time.Hour) // every record below is live then
		short := completeRecord(nsEchoHold, 1, real0.Add(time.Second))
		short.FirstSeen = before
		long := completeRecord(nsEchoHold, 2, real0.Add(time.Hour))
		long.FirstSeen = before
		put(t, s, short, before)
		put(t, s, long, before)
		if _, err := s.Get(ctx, short.Hash, before); err != nil {
			t.Fatalf("Get of the short-lived record before it expired: %v", err)
		}
		deadline := real0.Add(30 * time.Second)
		for {
			_, err := s.Get(ctx, short.Hash, before)
			if errors.Is(err, spent.ErrNotFound) {
				break
			}
			if err != nil {
				t.Fatalf("Get of the short-lived record: %v", err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the record expiring at %v is still stored at %v", short.ExpiresAt, time.Now())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if time.Now().Before(short.ExpiresAt) {
			t.Fatalf("the record was forgotten at %v, before its expires_at %v", time.Now(), short.ExpiresAt)
		}
		_, err := s.Get(ctx, long.Hash, before)
		wantErr(t, "Get of the long-lived record", err, nil)
	})
}
