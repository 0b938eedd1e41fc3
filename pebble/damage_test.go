package pebble_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
)

// damagedStore is a stopped store, on a crashable in-memory file system,
// holding keys, every one of them acknowledged.
type damagedStore struct {
	fs   *vfs.MemFS
	keys []spent.Hash
}

// How a damage test's store is stopped before its bytes are flipped.
const (
	closed   = iota // Close
	killed          // kill -9: the file system as a killed process leaves it
	reopened        // Close, after a reopen half way: the MANIFEST then starts with a snapshot of the version
)

var stops = map[int]string{closed: "Closed", killed: "Killed", reopened: "Reopened"}

// buildAcknowledged claims n keys in batches and stops the store as stop
// says: all but the last tail keys are flushed to tables (so that the
// MANIFEST names them), the tail stays in the newest WAL.
func buildAcknowledged(tb testing.TB, n, tail, stop int) *damagedStore {
	tb.Helper()
	fs := vfs.NewCrashableMem()
	opts := pebble.WithFS(pebble.DefaultOptions(), fs)
	opts.MemTableSize = 1 << 20
	s, err := pebble.Open("db", opts)
	if err != nil {
		tb.Fatal(err)
	}
	d := &damagedStore{fs: fs, keys: make([]spent.Hash, n)}
	rng := newRand(tb, 16)
	for i := range d.keys {
		d.keys[i] = randHash(rng)
	}
	claim := func(from, to int) {
		for i := from; i < to; i += 100 {
			ops := make([]spent.ClaimOp, 0, 100)
			for j := i; j < min(i+100, to); j++ {
				ops = append(ops, completeOp(d.keys[j], uint64(j+1), t0, t0.Add(time.Hour)))
			}
			if _, err := s.ClaimBatch(context.Background(), ops); err != nil {
				tb.Fatal(err)
			}
		}
	}
	// Four flushes, so that the WALs of the first ones are recycled or
	// gone and the MANIFEST alone names what they held.
	for i := range 4 {
		claim(i*(n-tail)/4, (i+1)*(n-tail)/4)
		if err := s.Flush(); err != nil {
			tb.Fatal(err)
		}
		if i == 1 && stop == reopened {
			if err := s.Close(); err != nil {
				tb.Fatal(err)
			}
			if s, err = pebble.Open("db", opts); err != nil {
				tb.Fatal(err)
			}
		}
	}
	claim(n-tail, n)
	if stop == killed {
		// What a killed process leaves: everything it wrote, synced or
		// not, is in the kernel's page cache and reaches the disk.
		d.fs = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rng})
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	return d
}

// flipped returns a copy of the store's files with the byte at off of file
// name inverted.
func (d *damagedStore) flipped(tb testing.TB, name string, off int64) *vfs.MemFS {
	tb.Helper()
	fs := d.fs.CrashClone(vfs.CrashCloneCfg{})
	flip(tb, fs, name, off)
	return fs
}

// flip inverts the byte at off of file name of the store on fs. It may run
// on goroutines of the test's own, so it reports with Errorf.
func flip(tb testing.TB, fs vfs.FS, name string, off int64) {
	tb.Helper()
	f, err := fs.OpenReadWrite(fs.PathJoin("db", name), vfs.WriteCategoryUnspecified)
	if err != nil {
		tb.Errorf("flip %s+%d: %v", name, off, err)
		return
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		tb.Errorf("flip %s+%d: %v", name, off, err)
		return
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], off); err != nil {
		tb.Errorf("flip %s+%d: %v", name, off, err)
		return
	}
	if err := f.Sync(); err != nil {
		tb.Errorf("flip %s+%d: %v", name, off, err)
	}
}

// check opens the store on fs. A refusal must name the damaged file; an
// open store must hold every acknowledged key. It reports whether the store
// opened.
func (d *damagedStore) check(tb testing.TB, fs vfs.FS, name string, off int64) bool {
	tb.Helper()
	s, err := pebble.Open("db", pebble.WithFS(pebble.DefaultOptions(), fs))
	if err != nil {
		if !errors.Is(err, pebble.ErrDamaged) || !strings.Contains(err.Error(), name) {
			tb.Errorf("flip at %s+%d: Open refused with %v; want ErrDamaged naming %s", name, off, err, name)
		}
		return false
	}
	defer s.Close()
	for i, h := range d.keys {
		if _, err := s.Get(context.Background(), h, t0); err != nil {
			tb.Errorf("flip at %s+%d: the store opened, and acknowledged key %d of %d is gone (%v): it would be answered fresh", name, off, i, len(d.keys), err)
			return true
		}
	}
	return true
}

// newest returns the name of the newest file of the store named prefix-N
// (MANIFEST) or N.suffix (WAL).
func (d *damagedStore) newest(tb testing.TB, match func(string) (int, bool)) string {
	tb.Helper()
	ls, err := d.fs.List("db")
	if err != nil {
		tb.Fatal(err)
	}
	best, name := -1, ""
	for _, f := range ls {
		if n, ok := match(f); ok && n > best {
			best, name = n, f
		}
	}
	if name == "" {
		tb.Fatalf("no such file in %v", ls)
	}
	return name
}

func currentManifest(tb testing.TB, fs vfs.FS) string {
	tb.Helper()
	desc, err := pdb.Peek("db", fs)
	if err != nil {
		tb.Fatal(err)
	}
	return fs.PathBase(desc.ManifestFilename)
}

func walNumber(name string) (int, bool) {
	s, ok := strings.CutSuffix(name, ".log")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

func fileSize(tb testing.TB, fs vfs.FS, path string) int64 {
	tb.Helper()
	fi, err := fs.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Size()
}

// walDataEnd returns where the records of the WAL at path end: past it the
// file holds zeros (the zero-filled tail) or nothing.
func walDataEnd(tb testing.TB, fs vfs.FS, path string, num int) int64 {
	tb.Helper()
	f, err := fs.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rr := newRecordReader(record.NewReader, f, uint64(num))
	end := int64(0)
	for {
		r, err := rr.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if err != nil {
			return end
		}
		end = rr.Offset()
	}
}

// How many offsets the damage tests flip, spread evenly, besides the last
// tailFlips bytes: every byte of the MANIFEST (a few hundred), 64 places in the
// WAL's last 32 KiB; fewer under the race detector, which makes each open
// 40 times slower (.ci/run runs these tests without it too).
var (
	manifestFlips = 1 << 30
	walFlips      = 64
	tailFlips     = int64(64)
)

func init() {
	if raceDetector {
		manifestFlips, walFlips, tailFlips = 48, 8, 8
	}
}

// offsets returns the offsets of [from, to) a test flips: all of them with
// SPENT_DAMAGE_FULL set or when the span is short, else about want of them,
// spread evenly, plus every one of the last tailFlips bytes.
func offsets(from, to int64, want int) []int64 {
	var out []int64
	step := int64(1)
	if os.Getenv("SPENT_DAMAGE_FULL") == "" && to-from > int64(want) {
		step = (to - from) / int64(want)
	}
	for o := from; o < to; o += step {
		out = append(out, o)
	}
	for o := max(from, to-tailFlips); o < to; o++ {
		out = append(out, o)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// newRecordReader calls newReader (record.NewReader) with log number n:
// its parameter's type is internal to pebble, and T names it.
func newRecordReader[T ~uint64](newReader func(io.Reader, T) *record.Reader, r io.Reader, n uint64) *record.Reader {
	return newReader(r, T(n))
}

func newRand(tb testing.TB, seed uint64) *rand.Rand {
	tb.Helper()
	return rand.New(rand.NewPCG(seed, 1))
}

func TestDamagedManifestIsRefused(t *testing.T) {
	for _, stop := range []int{closed, killed, reopened} {
		t.Run(stops[stop], func(t *testing.T) {
			d := buildAcknowledged(t, damageKeys(t), 500, stop)
			name := currentManifest(t, d.fs)
			size := fileSize(t, d.fs, d.fs.PathJoin("db", name))
			// Each byte is flipped in place and back: a refusal leaves the
			// files as they were (Open refuses before pebble writes). A
			// store that opens (with every key, or check fails) has
			// changed its files: the next flip starts from a copy.
			pristine := d.fs.CrashClone(vfs.CrashCloneCfg{})
			opened, offs := 0, offsets(0, size, manifestFlips)
			for _, off := range offs {
				flip(t, d.fs, name, off)
				if d.check(t, d.fs, name, off) {
					opened++
					d.fs = pristine.CrashClone(vfs.CrashCloneCfg{})
				} else {
					flip(t, d.fs, name, off)
				}
				if t.Failed() {
					return
				}
			}
			t.Logf("%s: %d of its %d bytes flipped one at a time; %d refused, %d opened with every key", name, len(offs), size, len(offs)-opened, opened)
		})
	}
}

// damageKeys is how many acknowledged keys the damage tests build their
// store with: SPENT_DAMAGE_KEYS, or 3,000.
func damageKeys(tb testing.TB) int {
	tb.Helper()
	v := os.Getenv("SPENT_DAMAGE_KEYS")
	if v == "" {
		return 3000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2000 {
		tb.Fatalf("SPENT_DAMAGE_KEYS=%q: want a number of at least 2000", v)
	}
	return n
}

// TestDamagedWALTailIsRefused flips bytes of the last 32 KiB of records of
// the newest WAL, one at a time. SPENT_DAMAGE_FULL=1 flips every one of
// them (on as many cores as GOMAXPROCS); with SPENT_DAMAGE_KEYS=20000 that
// is the run BENCHMARKS.md and the "done" refer to.
func TestDamagedWALTailIsRefused(t *testing.T) {
	for _, stop := range []int{closed, killed} {
		t.Run(stops[stop], func(t *testing.T) {
			// A tail of 600 claims (about 90 KiB of WAL with their
			// index entries) fits in the memtable pebble sizes after the
			// four flushes (it starts small and grows), so all of it is
			// in the newest WAL; 1,000 no longer did once every record
			// had its seq-index entry.
			d := buildAcknowledged(t, damageKeys(t), 600, stop)
			name := d.newest(t, walNumber)
			num, _ := walNumber(name)
			end := walDataEnd(t, d.fs, d.fs.PathJoin("db", name), num)
			if end < 32<<10 {
				t.Fatalf("%s holds %d bytes of records, want at least 32 KiB", name, end)
			}
			offs := offsets(end-32<<10, end, walFlips)
			var opened atomic.Int64
			var next atomic.Int64
			var wg sync.WaitGroup
			for range runtime.GOMAXPROCS(0) {
				wg.Go(func() {
					for i := next.Add(1) - 1; i < int64(len(offs)) && !t.Failed(); i = next.Add(1) - 1 {
						if d.check(t, d.flipped(t, name, offs[i]), name, offs[i]) {
							opened.Add(1)
						}
					}
				})
			}
			wg.Wait()
			t.Logf("%s: %d of its last 32 KiB of records flipped one at a time, %d keys acknowledged; %d refused, %d opened with every key",
				name, len(offs), len(d.keys), int64(len(offs))-opened.Load(), opened.Load())
		})
	}
}
