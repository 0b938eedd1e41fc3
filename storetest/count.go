package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// counterKey is a counter key for the Count tests.
func counterKey(i int) spent.Hash { return storeKey(1_000_000 + i) }

// count calls Count and fails the test on error.
func count(tb testing.TB, s spent.Store, key spent.Hash, limit uint64, expires, now time.Time) spent.CountAnswer {
	tb.Helper()
	res, err := s.Count(context.Background(), spent.CountOp{Key: key, Limit: limit, ExpiresAt: expires, Now: now})
	if err != nil {
		tb.Fatalf("Count: %v", err)
	}
	return res
}

// testCount checks the bounded counter: it stops at its limit, keeps the
// expiry it was created with, starts again once expired, lives apart from
// records, is atomic under concurrency, survives a reopen, and is forgotten
// by DeleteExpired (or by the engine, under NativeExpiry).
func testCount(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("StopsAtLimitAndRestartsAfterExpiry", func(t *testing.T) {
		s := newEnv(t, h).store
		k := counterKey(1)
		exp1 := epoch.Add(10 * time.Second)
		for i := uint64(1); i <= 3; i++ {
			// A later op's ExpiresAt does not move a live counter's expiry.
			got := count(t, s, k, 3, exp1.Add(time.Duration(i)*time.Second), epoch.Add(time.Duration(i)))
			if got.Value != i || !got.Added || !got.ExpiresAt.Equal(exp1.Add(time.Second)) {
				t.Fatalf("Count %d: got %+v, want value %d, added, expires %v", i, got, i, exp1.Add(time.Second))
			}
		}
		exp := exp1.Add(time.Second)
		for i := range 2 {
			got := count(t, s, k, 3, exp1, epoch.Add(time.Second))
			if got.Value != 3 || got.Added || !got.ExpiresAt.Equal(exp) {
				t.Fatalf("Count over the limit (%d): got %+v, want value 3, not added, expires %v", i, got, exp)
			}
		}
		// A higher limit lets the same counter go on.
		if got := count(t, s, k, 4, exp1, epoch.Add(time.Second)); got.Value != 4 || !got.Added {
			t.Fatalf("Count with limit 4: got %+v, want value 4, added", got)
		}
		// One nanosecond before its expiry the counter is still full.
		if got := count(t, s, k, 4, exp1, exp.Add(-1)); got.Value != 4 || got.Added {
			t.Fatalf("Count at expires_at-1ns: got %+v, want value 4, not added", got)
		}
		// At its expiry it starts again, with the new op's expiry.
		exp2 := exp.Add(time.Minute)
		if got := count(t, s, k, 4, exp2, exp); got.Value != 1 || !got.Added || !got.ExpiresAt.Equal(exp2) {
			t.Fatalf("Count at expires_at: got %+v, want value 1, added, expires %v", got, exp2)
		}
		// Another counter is independent.
		if got := count(t, s, counterKey(2), 4, exp2, exp); got.Value != 1 || !got.Added {
			t.Fatalf("Count of another counter: got %+v, want value 1, added", got)
		}
		// A zero limit never adds.
		if got := count(t, s, counterKey(3), 0, exp2, exp); got.Value != 0 || got.Added {
			t.Fatalf("Count with limit 0: got %+v, want value 0, not added", got)
		}
	})

	t.Run("ApartFromRecords", func(t *testing.T) {
		s := newEnv(t, h).store
		r := completeRecord(nsEchoHold, 1, epoch.Add(time.Minute))
		put(t, s, r, epoch)
		if got := count(t, s, r.Hash, 5, epoch.Add(time.Minute), epoch); got.Value != 1 || !got.Added {
			t.Fatalf("Count of a key that is also a record: got %+v, want value 1, added", got)
		}
		got, err := s.Get(ctx, r.Hash, epoch)
		wantErr(t, "Get of the record after Count", err, nil)
		checkRecord(t, "record after Count", got, r)
		// And a claim of a key that is also a counter is a fresh claim.
		r2 := completeRecord(nsEchoHold, 2, epoch.Add(time.Minute))
		count(t, s, r2.Hash, 5, epoch.Add(time.Minute), epoch)
		put(t, s, r2, epoch)
	})

	t.Run("ConcurrentCountsNeverPassTheLimit", func(t *testing.T) {
		s := newEnv(t, h).store
		const goroutines, perG, limit = 16, 5, 37
		var (
			mu     sync.Mutex
			values = map[uint64]int{}
			added  int
			wg     sync.WaitGroup
		)
		errs := make(chan error, goroutines)
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perG {
					res, err := s.Count(ctx, spent.CountOp{Key: counterKey(9), Limit: limit, ExpiresAt: epoch.Add(time.Hour), Now: epoch})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					if res.Added {
						added++
						values[res.Value]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Count: %v", err)
		}
		if added != limit {
			t.Fatalf("%d concurrent Counts with limit %d: %d added, want exactly %d", goroutines*perG, limit, added, limit)
		}
		for v := uint64(1); v <= limit; v++ {
			if values[v] != 1 {
				t.Fatalf("value %d was answered %d times, want once", v, values[v])
			}
		}
	})

	t.Run("SurvivesReopen", func(t *testing.T) {
		e := newEnv(t, h)
		exp := epoch.Add(time.Hour)
		for range 3 {
			count(t, e.store, counterKey(4), 10, exp, epoch)
		}
		e.reopen()
		if got := count(t, e.store, counterKey(4), 10, exp, epoch); got.Value != 4 || !got.ExpiresAt.Equal(exp) {
			t.Fatalf("Count after reopen: got %+v, want value 4, expires %v", got, exp)
		}
	})

	t.Run("DeleteExpiredForgetsCounters", func(t *testing.T) {
		if h.NativeExpiry {
			t.Skip("the engine expires counters itself (Harness.NativeExpiry)")
		}
		s := newEnv(t, h).store
		for i := 1; i <= 4; i++ {
			count(t, s, counterKey(10+i), 10, epoch.Add(time.Duration(i)*time.Second), epoch)
		}
		if got, err := s.DeleteExpired(ctx, epoch.Add(2*time.Second), 100); err != nil || got != 2 {
			t.Fatalf("DeleteExpired at epoch+2s: got %d, %v, want 2, nil", got, err)
		}
		// Counting at the epoch, when all were live, shows what was removed:
		// a forgotten counter starts from zero.
		for i := 1; i <= 4; i++ {
			want := uint64(2)
			if i <= 2 {
				want = 1
			}
			if got := count(t, s, counterKey(10+i), 10, epoch.Add(time.Hour), epoch); got.Value != want {
				t.Fatalf("counter %d after DeleteExpired: got value %d, want %d", i, got.Value, want)
			}
		}
	})

	t.Run("NativeExpiryForgetsCounters", func(t *testing.T) {
		if !h.NativeExpiry {
			t.Skip("DeleteExpiredForgetsCounters covers stores without native expiry")
		}
		s := newEnv(t, h).store
		real0 := time.Now()
		before := real0.Add(-time.Hour)
		count(t, s, counterKey(20), 10, real0.Add(time.Second), before)
		deadline := real0.Add(30 * time.Second)
		for {
			// Limit 0 reads the counter without adding.
			res, err := s.Count(ctx, spent.CountOp{Key: counterKey(20), Limit: 0, ExpiresAt: real0.Add(time.Second), Now: before})
			if err != nil {
				t.Fatalf("Count: %v", err)
			}
			if res.Value == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the counter expiring at %v still holds %d at %v", real0.Add(time.Second), res.Value, time.Now())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if time.Now().Before(real0.Add(time.Second)) {
			t.Fatalf("the counter was forgotten before its expiry")
		}
	})
}
