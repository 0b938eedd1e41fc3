package pebble_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
)

// gateFS is a file system whose WAL syncs can be held: while the gate is
// shut, a sync of a WAL file waits until it opens.
type gateFS struct {
	vfs.FS
	mu   sync.Mutex
	shut chan struct{} // nil while open
}

func (g *gateFS) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut == nil {
		g.shut = make(chan struct{})
	}
}

func (g *gateFS) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

func (g *gateFS) wait() {
	g.mu.Lock()
	c := g.shut
	g.mu.Unlock()
	if c != nil {
		<-c
	}
}

func (g *gateFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, cat)
	if err != nil || cat != "pebble-wal" {
		return f, err
	}
	return gateFile{f, g}, nil
}

func (g *gateFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, cat)
	if err != nil || cat != "pebble-wal" {
		return f, err
	}
	return gateFile{f, g}, nil
}

type gateFile struct {
	vfs.File
	g *gateFS
}

func (f gateFile) Sync() error     { f.g.wait(); return f.File.Sync() }
func (f gateFile) SyncData() error { f.g.wait(); return f.File.SyncData() }

func earlyOp(h spent.Hash, seq uint64) spent.ClaimOp {
	op := pendingOp("ns", h, seq, t0, t0.Add(time.Minute), t0.Add(time.Hour))
	op.Early = true
	return op
}

// TestEarlyClaimAnsweredBeforeSync holds the WAL's syncs: an Early claim
// that is fresh is answered all the same, while an ordinary claim, and a
// second claim of the early key (which reports a record not yet durable),
// wait for the sync.
func TestEarlyClaimAnsweredBeforeSync(t *testing.T) {
	g := &gateFS{FS: vfs.NewMem()}
	s := MustOpenWith(t, "db", pebble.WithFS(pebble.DefaultOptions(), g))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	mustClaim(t, s, completeOp(randHash(rng), 1, t0, t0.Add(time.Hour))) // the WAL exists

	g.hold()
	defer g.release()
	type answer struct {
		res spent.ClaimAnswer
		err error
	}
	claim := func(op spent.ClaimOp) chan answer {
		c := make(chan answer, 1)
		go func() {
			res, err := s.Claim(ctx, op)
			c <- answer{res, err}
		}()
		return c
	}
	// An ordinary claim: its round waits for the held sync.
	plain := claim(pendingOp("ns", randHash(rng), 2, t0, t0.Add(time.Minute), t0.Add(time.Hour)))
	kEarly := randHash(rng)
	var early answer
	select {
	case early = <-claim(earlyOp(kEarly, 3)):
	case <-time.After(10 * time.Second):
		t.Fatal("an Early claim was not answered while the WAL sync was held")
	}
	if early.err != nil || !early.res.Inserted || early.res.Record.Seq.Counter != 3 {
		t.Fatalf("Early claim: %+v, %v; want inserted with seq 3", early.res, early.err)
	}
	// Repeats of the early key see its record, but only once it is durable.
	second := claim(pendingOp("ns", kEarly, 4, t0, t0.Add(time.Minute), t0.Add(time.Hour)))
	earlyAgain := claim(earlyOp(kEarly, 5))
	select {
	case a := <-plain:
		t.Fatalf("an ordinary claim was answered while its sync was held: %+v", a)
	case a := <-second:
		t.Fatalf("a repeat was answered before the record it reports was durable: %+v", a)
	case a := <-earlyAgain:
		t.Fatalf("an Early repeat was answered before the record it reports was durable: %+v", a)
	case <-time.After(100 * time.Millisecond):
	}
	g.release()
	if a := <-plain; a.err != nil || !a.res.Inserted {
		t.Fatalf("ordinary claim: %+v, %v", a.res, a.err)
	}
	for name, c := range map[string]chan answer{"repeat": second, "early repeat": earlyAgain} {
		a := <-c
		if a.err != nil || a.res.Inserted || a.res.Record.Seq.Counter != 3 || a.res.Record.State != spent.StatePending {
			t.Fatalf("%s: %+v, %v; want the early claim's pending record (seq 3)", name, a.res, a.err)
		}
	}
}

// TestEarlyClaimsAcrossPowerLoss runs Early claims, each followed by its
// Complete (or, for some, its Release), and simulates a power loss: every
// completion answered before the crash survives with its result, and a
// claim that was answered early but not completed is either gone or still
// pending, never anything else.
func TestEarlyClaimsAcrossPowerLoss(t *testing.T) {
	for attempt := range 4 {
		fs := vfs.NewCrashableMem()
		s, err := pebble.Open("db", pebble.WithFS(pebble.DefaultOptions(), fs))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(23, uint64(attempt)))
		keys := make([]spent.Hash, 3000)
		for i := range keys {
			keys[i] = randHash(rng)
		}
		const (
			stateNone = iota
			stateClaimed
			stateCompleted
			stateReleased
		)
		state := make([]int, len(keys)) // guarded by mu
		var mu sync.Mutex
		set := func(i, st int) {
			mu.Lock()
			state[i] = st
			mu.Unlock()
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 24 {
			wg.Go(func() {
				ctx := context.Background()
				for i := g; i < len(keys); i += 24 {
					select {
					case <-stop:
						return
					default:
					}
					seq := spent.Seq{Node: 1, Counter: uint64(i + 1)}
					res, err := s.Claim(ctx, earlyOp(keys[i], seq.Counter))
					if err != nil || !res.Inserted {
						return
					}
					set(i, stateClaimed)
					if i%5 == 0 {
						if s.Release(ctx, keys[i], seq, t0) == nil {
							set(i, stateReleased)
						}
						continue
					}
					if _, err := s.Complete(ctx, keys[i], seq, []byte{byte(i), byte(i >> 8)}, t0); err != nil {
						return
					}
					set(i, stateCompleted)
				}
			})
		}
		time.Sleep(time.Duration(2+rng.IntN(15)) * time.Millisecond)
		mu.Lock()
		before := append([]int(nil), state...)
		crashed := fs.CrashClone(vfs.CrashCloneCfg{})
		mu.Unlock()
		close(stop)
		wg.Wait()
		MustClose(t, s)

		s = MustOpenWith(t, "db", pebble.WithFS(pebble.DefaultOptions(), crashed))
		completed := 0
		for i, st := range before {
			rec, err := s.Get(context.Background(), keys[i], t0)
			found := err == nil
			switch {
			case st == stateCompleted:
				completed++
				if !found || rec.State != spent.StateComplete || rec.Seq.Counter != uint64(i+1) ||
					string(rec.Result) != string([]byte{byte(i), byte(i >> 8)}) {
					t.Fatalf("attempt %d: completion %d answered before the crash, after it: %+v, %v", attempt, i, rec, err)
				}
			case st == stateReleased:
				if found {
					t.Fatalf("attempt %d: release %d answered before the crash, record back after it: %+v", attempt, i, rec)
				}
			case found && (rec.Seq.Counter != uint64(i+1) || (rec.State == spent.StateComplete && st == stateNone)):
				t.Fatalf("attempt %d: key %d (state %d before the crash) came back as %+v", attempt, i, st, rec)
			}
		}
		t.Logf("attempt %d: %d completions survived the crash", attempt, completed)
		MustClose(t, s)
	}
}
