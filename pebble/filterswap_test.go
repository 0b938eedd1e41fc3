package pebble_test

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/syncbuf"
	"github.com/spentledger/spent/pebble"
)

// A filter file put in place of the store's own (issue 31): a file saved by
// a clone of the store's directory, or an earlier save of the store itself,
// passes the checksum, the filter id, the round range and the sample of
// stored keys, and yet lacks keys the store acknowledged. The store must
// refuse it and rebuild, and every acknowledged key must stay a repeat.

// swapRecords is how many records the store of the clone test holds: the
// issue's store held 100,000, but with the shield keys (see shielded) the
// sample of stored keys a load checks cannot reach the keys a foreign file
// lacks at any size, and the race detector makes each record costly.
const swapRecords = 20_000

// swapOptions are the options of these tests: a filter made for the
// records up front, so that no larger one is built while they are written.
func swapOptions(fs vfs.FS) pebble.Options {
	o := pebble.WithFS(pebble.DefaultOptions(), fs)
	o.ExpectedRecords = 2 * swapRecords
	return o
}

// shielded returns a random key and the shield keys that sort just below
// it: the 100 keys whose value, read as a big-endian number, is 1 to 100
// less. A load's sample of stored keys reads runs of 64 keys, each from a
// random place (or from the first key, when the place is past the last):
// with the shield stored, it reaches the key only from a place among the
// 100 values just below it, which it never picks. A filter that lacks the
// key then passes the sample for certain, and a test of the other checks
// does not depend on the sample's luck.
func shielded(rng *rand.Rand) (key spent.Hash, shield []spent.Hash) {
	key = randHash(rng)
	key[0] |= 0x80 // so that the shield does not wrap around zero
	h := key
	for range 100 {
		for i := len(h) - 1; i >= 0; i-- {
			h[i]--
			if h[i] != 0xff {
				break
			}
		}
		shield = append(shield, h)
	}
	return key, shield
}

// fillStore claims n random keys and the extra ones in the store "db" on
// fs, closes it (which saves its filter), and returns every key claimed.
func fillStore(t *testing.T, fs vfs.FS, n int, seed uint64, extra []spent.Hash) []spent.Hash {
	t.Helper()
	s := MustOpenWith(t, "db", swapOptions(fs))
	rng := rand.New(rand.NewPCG(seed, seed))
	keys := append([]spent.Hash(nil), extra...)
	for range n {
		keys = append(keys, randHash(rng))
	}
	ops := make([]spent.ClaimOp, 0, 1000)
	for i, h := range keys {
		ops = append(ops, completeOp(h, seed<<32+uint64(i+1), t0, t0.Add(time.Hour)))
		if len(ops) == cap(ops) || i == len(keys)-1 {
			if _, err := s.ClaimBatch(context.Background(), ops); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	MustClose(t, s)
	return keys
}

// readVFS returns the contents of the file at path on fs.
func readVFS(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeVFS replaces the file at path on fs with b, synced.
func writeVFS(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// assertStored checks that the record of h is found by Get and that a
// claim of h is a repeat.
func assertStored(t *testing.T, s *pebble.Store, h spent.Hash, when string) {
	t.Helper()
	if _, err := s.Get(context.Background(), h, t0); err != nil {
		t.Fatalf("%s: Get of the acknowledged key %s: %v, want its record", when, h, err)
	}
	if res := mustClaim(t, s, completeOp(h, 1<<45, t0, t0.Add(time.Hour))); res.Inserted {
		t.Fatalf("%s: claim of the acknowledged key %s: answered fresh, want a repeat", when, h)
	}
}

// holdBuild makes the next filter build wait before its first key until
// the returned function is called (which the test must do before the store
// closes, say by a defer: Close waits for the build). The hook is removed
// at cleanup, after the stores of the test have closed.
func holdBuild(t *testing.T) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	pebble.SetFilterHooks(nil, func(read int) {
		if read == 1 {
			<-ch
		}
	})
	t.Cleanup(func() { pebble.SetFilterHooks(nil, nil) })
	return func() { once.Do(func() { close(ch) }) }
}

// TestClonedFilterIsRefused is issue 31's scenario in one process: store A
// is stopped and copied to B; B claims a key and stops, saving its filter;
// A claims victim, then writes a canary-like pending record (as the fence
// of package node does) in a later round, and crashes; B's SPENT-FILTER is
// put in place of A's. The file is B's, and B shares A's history up to the
// copy, its filter id, and a round A has reached; it lacks victim, which
// it must not be trusted to call absent. A's next Open refuses it: victim
// and the canary are found by Get, and claims of them are repeats, while
// the filter is rebuilt and after.
func TestClonedFilterIsRefused(t *testing.T) {
	fsA := vfs.NewCrashableMem()
	rng := rand.New(rand.NewPCG(31, 1))
	victim, shield := shielded(rng)
	keys := fillStore(t, fsA, swapRecords, 1, shield)

	fsB := fsA.CrashClone(vfs.CrashCloneCfg{}) // cp -a A B, A stopped
	b := MustOpenWith(t, "db", swapOptions(fsB))
	mustClaim(t, b, completeOp(randHash(rng), 1<<40, t0, t0.Add(time.Hour)))
	MustClose(t, b) // B's save covers its one round after the copy
	foreign := readVFS(t, fsB, "db/"+pebble.FilterFile)

	a := MustOpenWith(t, "db", swapOptions(fsA))
	if res := mustClaim(t, a, completeOp(victim, 1<<41, t0, t0.Add(time.Hour))); !res.Inserted {
		t.Fatal("first claim of victim: a repeat, want fresh")
	}
	assertStored(t, a, victim, "before the crash")
	// A round after the one B's file covers: the journal has it.
	canary := randHash(rng)
	mustClaim(t, a, pendingOp(spent.ReservedPrefix+"fence", canary, 1<<42, t0, t0.Add(24*time.Hour), t0.Add(48*time.Hour)))
	crashed := fsA.CrashClone(vfs.CrashCloneCfg{}) // kill -9
	writeVFS(t, crashed, "db/"+pebble.FilterFile, foreign)

	release := holdBuild(t)
	defer release()
	s := MustOpenWith(t, "db", swapOptions(crashed))
	assertStored(t, s, victim, "with B's filter in place")
	assertStored(t, s, canary, "with B's filter in place")
	if st := s.Stats(); st.FilterRefused != 1 || !st.FilterBuilding {
		t.Fatalf("Open with a clone's filter: %+v, want it refused and a rebuild running", st)
	}
	assertRepeats(t, s, keys[:2000], "while the filter is rebuilt")
	release()
	waitBuilt(t, s)
	assertStored(t, s, victim, "after the rebuild")
	assertStored(t, s, canary, "after the rebuild")
	if st := s.Stats(); st.FilterBuilds != 1 || st.FilterEntries < int64(len(keys)+2) {
		t.Fatalf("after the rebuild: %+v, want one build counting at least %d keys", st, len(keys)+2)
	}
	assertRepeats(t, s, keys, "after the rebuild")
}

// saveGate pauses chosen saves of the filter (counted from 1, in this
// process) before their first chunk, until the test resumes them.
type saveGate struct {
	saves  atomic.Int64
	paused chan int64    // the number of each save that paused
	resume chan struct{} // one value resumes one paused save
	done   chan struct{} // closed at the end of the test: nothing pauses
	once   sync.Once
}

// gateSaves installs a saveGate that pauses the saves numbered pause. The
// test must call stop before its stores close (a defer does: Close waits
// for the save); the hook is removed at cleanup, after they have closed.
func gateSaves(t *testing.T, pause ...int64) *saveGate {
	t.Helper()
	g := &saveGate{paused: make(chan int64, 8), resume: make(chan struct{}), done: make(chan struct{})}
	pebble.SetFilterHooks(func(chunk uint64) {
		if chunk != 0 {
			return
		}
		k := g.saves.Add(1)
		if slices.Contains(pause, k) {
			g.paused <- k
			select {
			case <-g.resume:
			case <-g.done:
			}
		}
	}, nil)
	t.Cleanup(func() { pebble.SetFilterHooks(nil, nil) })
	return g
}

// wait waits until save k has paused.
func (g *saveGate) wait(t *testing.T, k int64) {
	t.Helper()
	select {
	case got := <-g.paused:
		if got != k {
			t.Fatalf("save %d paused, want save %d", got, k)
		}
	case <-time.After(time.Minute):
		t.Fatalf("save %d did not begin within a minute", k)
	}
}

// stop resumes every save, and pauses none from then on.
func (g *saveGate) stop() { g.once.Do(func() { close(g.done) }) }

// waitSaves waits until s has completed n periodic saves.
func waitSaves(t *testing.T, s *pebble.Store, n uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for s.Stats().FilterSaves < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d periodic saves did not end within a minute: %+v", n, s.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// claimRandom claims n random keys of rng in s, in one round, and returns
// them.
func claimRandom(t *testing.T, s *pebble.Store, rng *rand.Rand, n int, seq uint64) []spent.Hash {
	t.Helper()
	ops := make([]spent.ClaimOp, n)
	keys := make([]spent.Hash, n)
	for i := range ops {
		keys[i] = randHash(rng)
		ops[i] = completeOp(keys[i], seq+uint64(i), t0, t0.Add(time.Hour))
	}
	res, err := s.ClaimBatch(context.Background(), ops)
	if err != nil {
		t.Fatal(err)
	}
	for i := range res {
		if !res[i].Inserted {
			t.Fatalf("claim of the new key %s: a repeat, want fresh", keys[i])
		}
	}
	return keys
}

// logTo returns options that log to buf, with opts' other settings.
func logTo(opts pebble.Options, buf *syncbuf.Buffer) pebble.Options {
	opts.Logger = slog.New(slog.NewTextHandler(buf, nil))
	return opts
}

// TestFilterSaveIsTheStoresOwn leaves behind, by crashes at the steps of
// periodic saves, or puts back, a filter file of this store's own, and
// checks what Open does: the file the journal floor was moved for, and the
// latest save begun whose floor move a crash cut short, are loaded with no
// rebuild; an earlier save put back is refused (a rebuild). Every
// acknowledged key is a repeat either way.
func TestFilterSaveIsTheStoresOwn(t *testing.T) {
	const every = 2000 // inserts between periodic saves
	opts := func(fs vfs.FS) pebble.Options { return pebble.WithFilterSaveEvery(swapOptions(fs), every) }
	for _, tc := range []struct {
		name string
		// crash acts on the store fs holds, open with a saved filter,
		// and returns a crashed copy of fs and the keys it claimed.
		crash   func(t *testing.T, fs *vfs.MemFS, s *pebble.Store, g *saveGate, rng *rand.Rand) (*vfs.MemFS, []spent.Hash)
		refused bool
	}{
		{"EarlierSavePutBack", func(t *testing.T, fs *vfs.MemFS, s *pebble.Store, g *saveGate, rng *rand.Rand) (*vfs.MemFS, []spent.Hash) {
			earlier := readVFS(t, fs, "db/"+pebble.FilterFile)
			keys := claimRandom(t, s, rng, 10, 1<<40)
			MustClose(t, s) // saves again
			writeVFS(t, fs, "db/"+pebble.FilterFile, earlier)
			return fs, keys
		}, true},
		{"CrashDuringSave", func(t *testing.T, fs *vfs.MemFS, s *pebble.Store, g *saveGate, rng *rand.Rand) (*vfs.MemFS, []spent.Hash) {
			// The save has recorded its id as pending, and not
			// written its file: the file on disk is the one the
			// floor was moved for.
			keys := claimRandom(t, s, rng, every, 1<<40)
			g.wait(t, 1)
			keys = append(keys, claimRandom(t, s, rng, 10, 1<<41)...)
			return fs.CrashClone(vfs.CrashCloneCfg{}), keys
		}, false},
		{"CrashBeforeTheFloorMoves", func(t *testing.T, fs *vfs.MemFS, s *pebble.Store, g *saveGate, rng *rand.Rand) (*vfs.MemFS, []spent.Hash) {
			// The save's file is in place, and the batch that moves
			// the floor for it waits for the next round, which never
			// comes: the file's id is the pending one. Keys claimed
			// while it was written are in the journal after its
			// round.
			keys := claimRandom(t, s, rng, every, 1<<40)
			g.wait(t, 1)
			keys = append(keys, claimRandom(t, s, rng, 10, 1<<41)...)
			g.resume <- struct{}{}
			waitSaves(t, s, 1)
			return fs.CrashClone(vfs.CrashCloneCfg{}), keys
		}, false},
		{"NextSaveBegunAtOnce", func(t *testing.T, fs *vfs.MemFS, s *pebble.Store, g *saveGate, rng *rand.Rand) (*vfs.MemFS, []spent.Hash) {
			// Save 1 ends while enough keys wait for the next save
			// that save 2 begins at once, before any round could move
			// the floor for save 1: the batch that makes save 2 the
			// pending one moves it, and a crash while save 2 is
			// written leaves save 1's file, which Open loads.
			keys := claimRandom(t, s, rng, every, 1<<40)
			g.wait(t, 1)
			keys = append(keys, claimRandom(t, s, rng, every, 1<<41)...)
			g.resume <- struct{}{}
			g.wait(t, 2)
			if st := s.Stats(); st.FilterSaves != 1 {
				t.Fatalf("with save 2 begun: %+v, want save 1 ended", st)
			}
			return fs.CrashClone(vfs.CrashCloneCfg{}), keys
		}, false},
		{"CrashTwice", func(t *testing.T, fs *vfs.MemFS, s *pebble.Store, g *saveGate, rng *rand.Rand) (*vfs.MemFS, []spent.Hash) {
			// A crash before the floor moves for save 1, as in
			// CrashBeforeTheFloorMoves; the next Open loads save 1's
			// file as the pending one and moves the floor for it
			// with its first write. A second crash while save 2 is
			// written leaves save 1's file, which Open loads again.
			keys := claimRandom(t, s, rng, every, 1<<40)
			g.wait(t, 1)
			g.resume <- struct{}{}
			waitSaves(t, s, 1)
			crashed := fs.CrashClone(vfs.CrashCloneCfg{})
			s = MustOpenWith(t, "db", opts(crashed))
			if st := s.Stats(); st.FilterRefused != 0 || st.FilterBuilding {
				t.Fatalf("Open after the first crash: %+v, want the saved filter loaded", st)
			}
			keys = append(keys, claimRandom(t, s, rng, every, 1<<41)...)
			g.wait(t, 2)
			return crashed.CrashClone(vfs.CrashCloneCfg{}), keys
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			rng := rand.New(rand.NewPCG(41, 1))
			keys := fillStore(t, fs, 5000, 2, nil)
			g := gateSaves(t, 1, 2)
			defer g.stop()
			s := MustOpenWith(t, "db", opts(fs))
			if st := s.Stats(); st.FilterRefused != 0 || st.FilterBuilding {
				t.Fatalf("Open after a Close: %+v, want the saved filter loaded", st)
			}
			crashed, more := tc.crash(t, fs, s, g, rng)
			keys = append(keys, more...)
			g.stop()

			var log syncbuf.Buffer
			s = MustOpenWith(t, "db", logTo(opts(crashed), &log))
			st := s.Stats()
			if tc.refused {
				if st.FilterRefused != 1 || !strings.Contains(log.String(), "not this store's own latest save") {
					t.Fatalf("Open: %+v, log:\n%s\nwant the file refused as not the store's own latest save", st, log.String())
				}
				assertRepeats(t, s, keys, "with the file refused")
				waitBuilt(t, s)
			} else if st.FilterRefused != 0 || st.FilterBuilding {
				t.Fatalf("Open: %+v, log:\n%s\nwant the saved filter loaded", st, log.String())
			}
			assertRepeats(t, s, keys, "after Open")
		})
	}
}
