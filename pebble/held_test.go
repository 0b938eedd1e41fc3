package pebble_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
)

// TestHeldClaimIsNotWritten checks that a fresh Early claim of a new key is
// held in memory: it blocks its key while the store runs, a crash (or a
// Close) forgets it, and its Complete writes the whole record, which then
// survives a crash and expires like any other.
func TestHeldClaimIsNotWritten(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s := MustOpenWith(t, "db", pebble.WithFS(pebble.DefaultOptions(), fs))
	rng := rand.New(rand.NewPCG(31, 32))
	lost, kept := randHash(rng), randHash(rng)
	for i, h := range []spent.Hash{lost, kept} {
		res := mustClaim(t, s, earlyOp(h, uint64(i+1)))
		if !res.Inserted {
			t.Fatalf("early claim %d: %+v, want inserted", i, res)
		}
	}
	if got := s.Stats().Held; got != 2 {
		t.Fatalf("Stats().Held = %d after two early claims, want 2", got)
	}
	// A one-step claim of a held key, as a retry would make it, is told
	// the key is taken (see TestHeldClaimWrittenBeforeOthersSeeIt for
	// what that costs).
	if res := mustClaim(t, s, completeOp(lost, 9, t0, t0.Add(time.Hour))); res.Inserted {
		t.Fatalf("claim of a held key: inserted, want the held record")
	}
	if _, err := s.Complete(ctx, kept, spent.Seq{Node: 1, Counter: 2}, []byte("answer"), t0); err != nil {
		t.Fatal(err)
	}
	// The other key was written by the claim that saw it; make a third
	// one that nothing looks at.
	gone := randHash(rng)
	mustClaim(t, s, earlyOp(gone, 3))
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	MustClose(t, s)

	s = MustOpenWith(t, "db", pebble.WithFS(pebble.DefaultOptions(), crashed))
	defer MustClose(t, s)
	if rec, err := s.Get(ctx, gone, t0); !errors.Is(err, spent.ErrNotFound) {
		t.Fatalf("held claim after a crash: %+v, %v; want not found", rec, err)
	}
	if res := mustClaim(t, s, earlyOp(gone, 4)); !res.Inserted {
		t.Fatalf("claim of a key whose held claim a crash forgot: %+v, want inserted", res)
	}
	rec, err := s.Get(ctx, kept, t0)
	if err != nil || rec.State != spent.StateComplete || string(rec.Result) != "answer" || rec.Seq.Counter != 2 {
		t.Fatalf("completed held claim after a crash: %+v, %v", rec, err)
	}
	// Its expiry entry was written with it: a sweep forgets it.
	if n, err := s.DeleteExpired(ctx, t0.Add(2*time.Hour), 100); err != nil || n < 2 {
		t.Fatalf("DeleteExpired = %d, %v; want the completed record and the written one", n, err)
	}
	if rec, err := s.Get(ctx, kept, t0); !errors.Is(err, spent.ErrNotFound) {
		t.Fatalf("completed held claim after its sweep: %+v, %v", rec, err)
	}
}

// TestHeldClaimWrittenBeforeOthersSeeIt checks that every answer reporting
// a held record waits until the record is durable: a Get or a second claim
// writes it first, and ListPending, which cannot, does not list it.
func TestHeldClaimWrittenBeforeOthersSeeIt(t *testing.T) {
	ctx := context.Background()
	for _, look := range []string{"get", "claim"} {
		t.Run(look, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			s := MustOpenWith(t, "db", pebble.WithFS(pebble.DefaultOptions(), fs))
			h := randHash(rand.New(rand.NewPCG(33, 34)))
			mustClaim(t, s, earlyOp(h, 1))
			recs, err := s.ListPending(ctx, "", t0.Add(30*time.Minute), 10)
			if err != nil || len(recs) != 0 {
				t.Fatalf("ListPending with a held claim: %+v, %v; want none", recs, err)
			}
			switch look {
			case "get":
				rec, err := s.Get(ctx, h, t0)
				if err != nil || rec.State != spent.StatePending || rec.Seq.Counter != 1 {
					t.Fatalf("Get of a held claim: %+v, %v", rec, err)
				}
			case "claim":
				res := mustClaim(t, s, pendingOp("ns", h, 2, t0, t0.Add(time.Minute), t0.Add(time.Hour)))
				if res.Inserted || res.Record.Seq.Counter != 1 {
					t.Fatalf("second claim of a held key: %+v, want the held record", res)
				}
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{})
			MustClose(t, s)
			s = MustOpenWith(t, "db", pebble.WithFS(pebble.DefaultOptions(), crashed))
			defer MustClose(t, s)
			rec, err := s.Get(ctx, h, t0)
			if err != nil || rec.State != spent.StatePending || rec.Seq.Counter != 1 {
				t.Fatalf("after the %s answered and a crash: %+v, %v; want the pending record it reported", look, rec, err)
			}
			recs, err = s.ListPending(ctx, "", t0.Add(30*time.Minute), 10)
			if err != nil || len(recs) != 1 {
				t.Fatalf("ListPending after the record was written: %+v, %v; want it", recs, err)
			}
		})
	}
}

// TestHeldClaimReleaseAndRetake checks the other ends of a held claim: its
// Release forgets it (and the filter forgets its key), a retake after its
// lease replaces it, and the replaced claim's Complete and Release are
// refused as for a written record.
func TestHeldClaimReleaseAndRetake(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, t.TempDir())
	defer MustClose(t, s)
	rng := rand.New(rand.NewPCG(35, 36))
	h := randHash(rng)
	before := s.Stats().FilterEntries
	mustClaim(t, s, earlyOp(h, 1))
	if err := s.Release(ctx, h, spent.Seq{Node: 1, Counter: 2}, t0); !errors.Is(err, spent.ErrSeqMismatch) {
		t.Fatalf("Release with another seq: %v, want ErrSeqMismatch", err)
	}
	if err := s.Release(ctx, h, spent.Seq{Node: 1, Counter: 1}, t0); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().FilterEntries; got != before {
		t.Fatalf("filter holds %d entries after the held claim's release, want %d", got, before)
	}
	if _, err := s.Complete(ctx, h, spent.Seq{Node: 1, Counter: 1}, []byte("x"), t0); !errors.Is(err, spent.ErrNotFound) {
		t.Fatalf("Complete after Release: %v, want ErrNotFound", err)
	}

	// Held again, then retaken after its lease (one minute).
	mustClaim(t, s, earlyOp(h, 3))
	retake := earlyOp(h, 4)
	retake.Now, retake.Record.FirstSeen, retake.Retake = t0.Add(2*time.Minute), t0.Add(2*time.Minute), true
	retake.Record.LeaseUntil = t0.Add(3 * time.Minute)
	if res := mustClaim(t, s, retake); !res.Inserted || res.Record.Seq.Counter != 4 {
		t.Fatalf("retake of a held claim after its lease: %+v", res)
	}
	if _, err := s.Complete(ctx, h, spent.Seq{Node: 1, Counter: 3}, []byte("late"), t0.Add(2*time.Minute)); !errors.Is(err, spent.ErrSeqMismatch) {
		t.Fatalf("Complete of the retaken claim: %v, want ErrSeqMismatch", err)
	}
	if _, err := s.Complete(ctx, h, spent.Seq{Node: 1, Counter: 4}, []byte("won"), t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().FilterEntries; got != before+1 {
		t.Fatalf("filter holds %d entries with one record stored, want %d", got, before+1)
	}
	rec, err := s.Get(ctx, h, t0.Add(2*time.Minute))
	if err != nil || string(rec.Result) != "won" {
		t.Fatalf("record after retake and Complete: %+v, %v", rec, err)
	}
}

// TestSweepBehindUnsyncedWrites checks that calls that need a round of
// their own (a sweep, a batch too large for the round being formed) are
// answered when the round before them holds only writes no caller waits
// for (an early claim that replaced an expired record is written, not
// held, and answered at once).
func TestSweepBehindUnsyncedWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := pebble.DefaultOptions()
	opts.MaxBatchRound = 4
	s := MustOpenWith(t, t.TempDir(), opts)
	defer MustClose(t, s)
	rng := rand.New(rand.NewPCG(39, 40))
	h := randHash(rng)
	mustClaim(t, s, completeOp(h, 1, t0, t0.Add(time.Minute)))
	// An early claim of the expired key: written, answered at once.
	late := earlyOp(h, 2)
	late.Now, late.Record.FirstSeen = t0.Add(2*time.Minute), t0.Add(2*time.Minute)
	late.Record.LeaseUntil, late.Record.ExpiresAt = t0.Add(3*time.Minute), t0.Add(time.Hour)
	if res := mustClaim(t, s, late); !res.Inserted {
		t.Fatalf("early claim of an expired key: %+v", res)
	}
	if _, err := s.DeleteExpired(ctx, t0.Add(2*time.Minute), 10); err != nil {
		t.Fatalf("DeleteExpired behind an early write: %v", err)
	}
	mustClaim(t, s, earlyOp(randHash(rng), 3))
	late2 := late
	late2.Record.Hash = randHash(rng)
	mustClaim(t, s, completeOp(late2.Record.Hash, 4, t0, t0.Add(time.Minute)))
	late2.Record.Seq.Counter = 5
	mustClaim(t, s, late2)
	ops := make([]spent.ClaimOp, 6) // more than a round holds
	for i := range ops {
		ops[i] = completeOp(randHash(rng), uint64(10+i), t0, t0.Add(time.Hour))
	}
	if _, err := s.ClaimBatch(ctx, ops); err != nil {
		t.Fatalf("ClaimBatch over MaxBatchRound behind an early write: %v", err)
	}
}

// TestMixedLoad runs every kind of call at once from many goroutines, with
// rounds of at most 8 claims (so that batches keep spilling into the next
// round, and sweeps start their own), and checks that every call is answered, that each
// key is inserted once, and that every answered completion is there after a
// reopen.
func TestMixedLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	opts := pebble.DefaultOptions()
	opts.MaxBatchRound = 8
	s := MustOpenWith(t, dir, opts)
	var (
		seq       atomic.Uint64
		mu        sync.Mutex
		completed = map[spent.Hash][]byte{}
		stop      = make(chan struct{})
		wg        sync.WaitGroup // the claimers
		sweeper   sync.WaitGroup
	)
	next := func() uint64 { return seq.Add(1) }
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(41, uint64(g)))
			for i := 0; i < 400; i++ {
				h := randHash(rng)
				switch rng.IntN(5) {
				case 0, 1: // early claim, then Complete or Release
					n := next()
					res, err := s.Claim(ctx, earlyOp(h, n))
					if err != nil || !res.Inserted {
						t.Errorf("early claim: %+v, %v", res, err)
						return
					}
					if rng.IntN(4) == 0 {
						if err := s.Release(ctx, h, res.Record.Seq, t0); err != nil {
							t.Errorf("Release: %v", err)
							return
						}
						continue
					}
					result := []byte{byte(g), byte(i), byte(i >> 8)}
					if _, err := s.Complete(ctx, h, res.Record.Seq, result, t0); err != nil {
						t.Errorf("Complete: %v", err)
						return
					}
					mu.Lock()
					completed[h] = result
					mu.Unlock()
				case 2: // a batch larger than a round
					ops := make([]spent.ClaimOp, 1+rng.IntN(12))
					for j := range ops {
						// Some expire before the sweeps' now.
						ops[j] = completeOp(randHash(rng), next(), t0, t0.Add(time.Duration(1+rng.IntN(60))*time.Minute))
					}
					rs, err := s.ClaimBatch(ctx, ops)
					if err != nil {
						t.Errorf("ClaimBatch: %v", err)
						return
					}
					for j, r := range rs {
						if !r.Inserted {
							t.Errorf("batch claim %d of a new key: not inserted", j)
							return
						}
					}
				case 3: // a claim of a key being claimed early elsewhere
					n := next()
					early, other := earlyOp(h, n), pendingOp("ns", h, next(), t0, t0.Add(time.Minute), t0.Add(time.Hour))
					var ins atomic.Int32
					var inner sync.WaitGroup
					for _, op := range []spent.ClaimOp{early, other} {
						inner.Go(func() {
							if res, err := s.Claim(ctx, op); err != nil {
								t.Errorf("racing claim: %v", err)
							} else if res.Inserted {
								ins.Add(1)
							}
						})
					}
					inner.Wait()
					if ins.Load() != 1 {
						t.Errorf("two racing claims of one key: %d inserted", ins.Load())
						return
					}
				default: // a read
					if _, err := s.Get(ctx, h, t0); !errors.Is(err, spent.ErrNotFound) {
						t.Errorf("Get of a new key: %v", err)
						return
					}
				}
			}
		})
	}
	var sweeps atomic.Int64
	sweeper.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Before the early claims' expiry (t0+1h).
			if _, err := s.DeleteExpired(ctx, t0.Add(45*time.Minute), 50); err != nil {
				t.Errorf("DeleteExpired: %v", err)
				return
			}
			sweeps.Add(1)
		}
	})
	wg.Wait()
	close(stop)
	sweeper.Wait()
	if ctx.Err() != nil {
		t.Fatal("mixed load did not finish in time: a call was never answered")
	}
	st := s.Stats()
	if sweeps.Load() == 0 || st.Swept == 0 || st.Held == 0 {
		t.Fatalf("%d sweeps removed %d records, %d claims held: the load did not exercise them", sweeps.Load(), st.Swept, st.Held)
	}
	MustClose(t, s)
	s = MustOpenWith(t, dir, opts)
	defer MustClose(t, s)
	for h, want := range completed {
		rec, err := s.Get(context.Background(), h, t0)
		if err != nil || string(rec.Result) != string(want) {
			t.Fatalf("completion answered before Close, after reopen: %+v, %v", rec, err)
		}
	}
	t.Logf("%d completions, %d sweeps, stats before the reopen %+v", len(completed), sweeps.Load(), st)
}

// TestExpiredHeldClaimsAreForgotten checks that a held claim whose record
// expires while no one completes or releases it leaves memory: a sweep, or
// its late Complete, forgets it, and the filter with it.
func TestExpiredHeldClaimsAreForgotten(t *testing.T) {
	ctx := context.Background()
	s := MustOpen(t, t.TempDir())
	defer MustClose(t, s)
	rng := rand.New(rand.NewPCG(43, 44))
	before := s.Stats().FilterEntries
	swept, late := randHash(rng), randHash(rng)
	mustClaim(t, s, earlyOp(swept, 1)) // expires at t0+1h
	mustClaim(t, s, earlyOp(late, 2))
	// The filter's size is published when a round is sealed: a Get
	// waits for one.
	if _, err := s.Get(ctx, randHash(rng), t0); !errors.Is(err, spent.ErrNotFound) {
		t.Fatal(err)
	}
	if got := s.Stats().FilterEntries; got != before+2 {
		t.Fatalf("filter holds %d entries with two held claims, want %d", got, before+2)
	}
	if _, err := s.Complete(ctx, late, spent.Seq{Node: 1, Counter: 2}, []byte("x"), t0.Add(2*time.Hour)); !errors.Is(err, spent.ErrNotFound) {
		t.Fatalf("Complete of an expired held claim: %v, want ErrNotFound", err)
	}
	if n, err := s.DeleteExpired(ctx, t0.Add(2*time.Hour), 10); err != nil || n != 0 {
		t.Fatalf("DeleteExpired = %d, %v; want 0 stored records removed", n, err)
	}
	if got := s.Stats().FilterEntries; got != before {
		t.Fatalf("filter holds %d entries once both held claims expired, want %d", got, before)
	}
	for i, h := range []spent.Hash{swept, late} {
		op := earlyOp(h, uint64(10+i))
		op.Early = false
		if res := mustClaim(t, s, op); !res.Inserted {
			t.Fatalf("claim %d after its held claim expired: %+v, want inserted", i, res)
		}
	}
}
