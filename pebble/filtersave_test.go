package pebble_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
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

// The saved filter: every test here ends by checking that every key the
// store acknowledged is a repeat, which is the one thing a filter must
// never get wrong (engine invariant 7).

// filterChild is the test binary run as a child by the kill tests: it
// claims fresh keys in batches in dir, printing "ack <hex>" for each key
// once its batch is acknowledged, until it is killed. With mode "save" a
// save of the filter (after the first one) stops half-way, printing
// "saving"; with mode "build" the background build stops half-way,
// printing "building".
func filterChild(mode, dir string) {
	var mu sync.Mutex // out is shared with the hooks' goroutines
	out := bufio.NewWriter(os.Stdout)
	var once atomic.Bool
	say := func(s string) {
		if once.CompareAndSwap(false, true) {
			mu.Lock()
			fmt.Fprintln(out, s)
			out.Flush()
			mu.Unlock()
		}
	}
	var saves atomic.Int64
	opts := pebble.WithFilterSaveEvery(pebble.DefaultOptions(), 3000)
	switch mode {
	case "save":
		// A filter made for every key the child claims, so that the
		// first save's file holds the journal since: a smaller one
		// would be refused as outgrown (TestJournalOutgrowsSavedFilter).
		opts.ExpectedRecords = 100000
		pebble.SetFilterHooks(func(chunk uint64) {
			if chunk == 0 && saves.Add(1) == 2 {
				say("saving")
				select {}
			}
		}, nil)
	case "build":
		pebble.SetFilterHooks(nil, func(read int) {
			if read == 1000 {
				say("building")
				select {}
			}
		})
	}
	s, err := pebble.Open(dir, opts)
	if err != nil {
		fmt.Fprintln(out, "open:", err)
		out.Flush()
		os.Exit(1)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	ops := make([]spent.ClaimOp, 100)
	for seq := uint64(1); ; {
		for i := range ops {
			ops[i] = completeOp(randHash(rng), seq, t0, t0.Add(time.Hour))
			seq++
		}
		res, err := s.ClaimBatch(context.Background(), ops)
		if err != nil {
			fmt.Fprintln(out, "claim:", err)
			out.Flush()
			os.Exit(1)
		}
		mu.Lock()
		for i := range res {
			if res[i].Inserted {
				fmt.Fprintln(out, "ack", hex.EncodeToString(ops[i].Record.Hash[:]))
			}
		}
		out.Flush()
		mu.Unlock()
	}
}

// runFilterChild runs filterChild in dir, reads its acknowledgements until
// it has printed want and then at least more of them, kills it with
// SIGKILL, and returns the keys it acknowledged.
func runFilterChild(t *testing.T, mode, dir, want string, more int) []spent.Hash {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SPENT_FILTER_CHILD="+mode, "SPENT_FILTER_DIR="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var acked []spent.Hash
	seen, after := false, 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == want:
			seen = true
		case strings.HasPrefix(line, "ack "):
			var h spent.Hash
			if _, err := hex.Decode(h[:], []byte(line[4:])); err != nil {
				t.Fatalf("child: %q: %v", line, err)
			}
			acked = append(acked, h)
			if seen {
				after++
			}
		default:
			t.Fatalf("child: %s", line)
		}
		if seen && after >= more {
			break
		}
	}
	if !seen {
		t.Fatalf("child ended before printing %q: %v", want, sc.Err())
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	return acked
}

// assertRepeats checks that each of keys is stored: a claim of it is a
// repeat. The claims write nothing (they find the records).
func assertRepeats(t *testing.T, s *pebble.Store, keys []spent.Hash, when string) {
	t.Helper()
	ops := make([]spent.ClaimOp, 0, 500)
	check := func() {
		res, err := s.ClaimBatch(context.Background(), ops)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		for i := range res {
			if res[i].Inserted {
				t.Fatalf("%s: acknowledged key %s answered fresh", when, ops[i].Record.Hash)
			}
		}
		ops = ops[:0]
	}
	for i, h := range keys {
		ops = append(ops, completeOp(h, uint64(1<<40+i), t0, t0.Add(time.Hour)))
		if len(ops) == cap(ops) {
			check()
		}
	}
	if len(ops) > 0 {
		check()
	}
}

// waitBuilt waits until s has a complete filter.
func waitBuilt(t *testing.T, s *pebble.Store) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for s.Stats().FilterBuilding {
		if time.Now().After(deadline) {
			t.Fatal("the filter build did not end within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKillDuringFilterSave kills a process whose second save of the filter
// is half-written, while it goes on claiming: the next Open loads the
// first save and the journal since, and every acknowledged key is a
// repeat, without a rebuild.
func TestKillDuringFilterSave(t *testing.T) {
	dir := t.TempDir()
	acked := runFilterChild(t, "save", dir, "saving", 2000)
	if _, err := os.Stat(filepath.Join(dir, pebble.FilterFile)); err != nil {
		t.Fatalf("the first save left no file: %v", err)
	}
	s := MustOpen(t, dir)
	st := s.Stats()
	if st.FilterBuilding || st.FilterRefused != 0 || st.FilterEntries < int64(len(acked)) {
		t.Fatalf("after the kill: %+v, want the saved filter loaded with at least %d keys", st, len(acked))
	}
	assertRepeats(t, s, acked, "after a kill during a save")
	if _, err := os.Stat(filepath.Join(dir, pebble.FilterFile+".tmp")); err == nil {
		t.Fatal("the half-written save is still there after Open")
	}
}

// TestKillDuringFilterBuild kills a process whose filter is being rebuilt
// in the background (its saved filter was removed) while it goes on
// claiming; the next Open rebuilds again, and every acknowledged key, of
// either process, is a repeat while the rebuild runs and after it.
func TestKillDuringFilterBuild(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, dir)
	rng := rand.New(rand.NewPCG(11, 12))
	var before []spent.Hash
	for seq := uint64(1); seq <= 5000; seq++ {
		h := randHash(rng)
		mustClaim(t, s, completeOp(h, seq, t0, t0.Add(time.Hour)))
		before = append(before, h)
	}
	MustClose(t, s)
	if err := os.Remove(filepath.Join(dir, pebble.FilterFile)); err != nil {
		t.Fatal(err)
	}
	acked := append(before, runFilterChild(t, "build", dir, "building", 2000)...)

	release := make(chan struct{})
	pebble.SetFilterHooks(nil, func(read int) {
		if read == 1 {
			<-release
		}
	})
	defer pebble.SetFilterHooks(nil, nil)
	s = MustOpen(t, dir)
	if st := s.Stats(); !st.FilterBuilding || st.FilterEntries != 0 {
		t.Fatalf("after the kill: %+v, want a build running and no filter", st)
	}
	assertRepeats(t, s, acked, "during the rebuild")
	close(release)
	waitBuilt(t, s)
	if st := s.Stats(); st.FilterEntries < int64(len(acked)) || st.FilterBuilds != 1 {
		t.Fatalf("after the rebuild: %+v, want one build counting at least %d keys", st, len(acked))
	}
	assertRepeats(t, s, acked, "after the rebuild")
}

// TestDamagedFilterIsRebuilt damages the saved filter in three ways, each
// of which Open must detect and answer with a rebuild: a flipped byte (the
// checksum), buckets emptied with the checksum recomputed (the sample of
// stored keys), and a file older than the journal (the journal floor).
func TestDamagedFilterIsRebuilt(t *testing.T) {
	fill := func(t *testing.T, dir string, seed uint64, n int) []spent.Hash {
		s := MustOpen(t, dir)
		rng := rand.New(rand.NewPCG(seed, seed))
		var keys []spent.Hash
		ops := make([]spent.ClaimOp, 0, 100)
		for i := range n {
			h := randHash(rng)
			ops = append(ops, completeOp(h, seed<<32+uint64(i), t0, t0.Add(time.Hour)))
			keys = append(keys, h)
			if len(ops) == cap(ops) {
				if _, err := s.ClaimBatch(context.Background(), ops); err != nil {
					t.Fatal(err)
				}
				ops = ops[:0]
			}
		}
		MustClose(t, s)
		return keys
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir, path string) []spent.Hash
	}{
		{"FlippedByte", func(t *testing.T, dir, path string) []spent.Hash {
			b := readFile(t, path)
			b[len(b)/2] ^= 0x40
			writeFile(t, path, b)
			return nil
		}},
		{"EmptiedWithValidChecksum", func(t *testing.T, dir, path string) []spent.Hash {
			b := readFile(t, path)
			// The header is 76 bytes, ending with the stash's length,
			// then the stash (8 bytes an entry), then the buckets, then
			// the CRC-32C of all that.
			ns := binary.LittleEndian.Uint64(b[68:])
			clear(b[76+8*ns : len(b)-4])
			binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
			writeFile(t, path, b)
			return nil
		}},
		{"RoundsWithoutJournal", func(t *testing.T, dir, path string) []spent.Hash {
			// Rounds written by a spent that kept no journal (an older
			// version, run on the store in between).
			s := MustOpenWith(t, dir, pebble.WithoutJournal(pebble.DefaultOptions()))
			h := randHash(rand.New(rand.NewPCG(77, 77)))
			mustClaim(t, s, completeOp(h, 1<<50, t0, t0.Add(time.Hour)))
			os.Rename(path, path+".keep") // its own save at Close would cover the key
			MustClose(t, s)
			os.Rename(path+".keep", path)
			return []spent.Hash{h}
		}},
		{"OlderThanTheJournal", func(t *testing.T, dir, path string) []spent.Hash {
			old := readFile(t, path)
			more := fill(t, dir, 99, 3000) // saves again at Close
			writeFile(t, path, old)
			return more
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			keys := fill(t, dir, 1, 3000)
			path := filepath.Join(dir, pebble.FilterFile)
			keys = append(keys, tc.damage(t, dir, path)...)
			s := MustOpen(t, dir)
			if st := s.Stats(); st.FilterRefused != 1 {
				t.Fatalf("Open of a damaged filter: %+v, want it refused", st)
			}
			assertRepeats(t, s, keys, "with the damaged filter refused")
			waitBuilt(t, s)
			assertRepeats(t, s, keys, "after the rebuild")
			MustClose(t, s)
			// The rebuilt filter was saved at Close, and is trusted.
			s = MustOpen(t, dir)
			if st := s.Stats(); st.FilterRefused != 0 || st.FilterBuilding || st.FilterEntries != int64(len(keys)) {
				t.Fatalf("Open after the rebuild: %+v, want the saved filter of %d keys", st, len(keys))
			}
			assertRepeats(t, s, keys, "after the rebuilt filter was saved")
		})
	}
}

// TestFilterGrowsInTheBackground claims far more keys than a default
// filter is made for: larger filters are built in the background as it
// fills, every key stays a repeat, and the memory stays under 4 bytes a
// key.
func TestFilterGrowsInTheBackground(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, dir)
	rng := rand.New(rand.NewPCG(21, 22))
	var keys []spent.Hash
	ops := make([]spent.ClaimOp, 500)
	for seq := uint64(1); seq <= 40000; {
		for i := range ops {
			ops[i] = completeOp(randHash(rng), seq, t0, t0.Add(time.Hour))
			keys = append(keys, ops[i].Record.Hash)
			seq++
		}
		if _, err := s.ClaimBatch(context.Background(), ops); err != nil {
			t.Fatal(err)
		}
	}
	waitBuilt(t, s)
	// One more claim lets the decision goroutine take the last build.
	assertRepeats(t, s, keys[:1], "after the growth")
	st := s.Stats()
	if st.FilterBuilds == 0 || st.FilterEntries != int64(len(keys)) {
		t.Fatalf("%+v: want larger filters built and %d keys", st, len(keys))
	}
	if perKey := float64(st.FilterBytes) / float64(st.FilterEntries); perKey > 4 {
		t.Fatalf("%.2f bytes a key", perKey)
	}
	assertRepeats(t, s, keys, "after the growth")
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAcceptedDamageRebuildsFilter: a store opened with its damage accepted
// (here its witness removed) may have lost tables, and its meta keys (the
// save ids, the journal floor) with them, so its saved filter is not
// trusted, however well it matches: it is rebuilt, and every key stays a
// repeat.
func TestAcceptedDamageRebuildsFilter(t *testing.T) {
	dir := t.TempDir()
	s := MustOpen(t, dir)
	rng := rand.New(rand.NewPCG(5, 6))
	var keys []spent.Hash
	for i := range 500 {
		h := randHash(rng)
		mustClaim(t, s, completeOp(h, uint64(i+1), t0, t0.Add(time.Hour)))
		keys = append(keys, h)
	}
	MustClose(t, s)
	if err := os.Remove(filepath.Join(dir, "SPENT-WITNESS")); err != nil {
		t.Fatal(err)
	}
	opts := pebble.DefaultOptions()
	opts.AcceptDamage = true
	s = MustOpenWith(t, dir, opts)
	if st := s.Stats(); st.FilterRefused != 1 {
		t.Fatalf("Open with its damage accepted: %+v, want the saved filter refused", st)
	}
	assertRepeats(t, s, keys, "with the damage accepted")
	waitBuilt(t, s)
	assertRepeats(t, s, keys, "after the rebuild")
	MustClose(t, s)
}

// crashAfterClaims creates a store on a crashable in-memory file system
// with opts and closes it, which saves its filter as made for
// opts.ExpectedRecords; then reopens it, claims n fresh keys, and returns
// the file system as a kill -9 would leave it, before any save: the saved
// filter of the empty store, and the journal of the n keys.
func crashAfterClaims(t *testing.T, opts pebble.Options, n int) (vfs.FS, []spent.Hash) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	opts = pebble.WithFS(opts, fs)
	MustClose(t, MustOpenWith(t, "db", opts))
	s := MustOpenWith(t, "db", opts)
	rng := rand.New(rand.NewPCG(uint64(n), 31))
	var keys []spent.Hash
	ops := make([]spent.ClaimOp, 0, 1000)
	for i := range n {
		ops = append(ops, completeOp(randHash(rng), uint64(i+1), t0, t0.Add(time.Hour)))
		keys = append(keys, ops[len(ops)-1].Record.Hash)
		if len(ops) == cap(ops) || i == n-1 {
			if _, err := s.ClaimBatch(context.Background(), ops); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	if st := s.Stats(); st.FilterSaves != 0 {
		t.Fatalf("%+v: the filter was saved while the keys were claimed", st)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	MustClose(t, s)
	return crashed, keys
}

// TestJournalOutgrowsSavedFilter: a store saved its filter while it was
// small, then claimed far more keys than that filter holds, and was killed
// before its next save (the attack F8: a fresh store stopped cleanly, a
// million claims, kill -9, and the restart spent 12 min 53 s inserting the
// journal into the 64-bucket filter before it served). Open stops
// inserting the journal once it would fill the file past 95%, refuses the
// file as too small for it, returns at once,
// and rebuilds in the background, sized for the records in one build.
// When the journal fits, the file is loaded and the journal replayed, with
// progress in the log.
func TestJournalOutgrowsSavedFilter(t *testing.T) {
	t.Run("Outgrown", func(t *testing.T) {
		const n = 20000
		fs, keys := crashAfterClaims(t, pebble.DefaultOptions(), n)
		var log syncbuf.Buffer
		s := MustOpenWith(t, "db", logTo(pebble.WithFS(pebble.DefaultOptions(), fs), &log))
		if st := s.Stats(); st.FilterRefused != 1 {
			t.Fatalf("Open after %d claims beyond a saved filter of 256 lanes: %+v, want the file refused", n, st)
		}
		if !strings.Contains(log.String(), "outgrew") {
			t.Fatalf("the log does not say the journal outgrew the file:\n%s", log.String())
		}
		assertRepeats(t, s, keys, "with the outgrown filter refused")
		waitBuilt(t, s)
		assertRepeats(t, s, keys, "after the rebuild")
		st := s.Stats()
		if st.FilterBuilds != 1 || st.FilterEntries != n {
			t.Fatalf("after the rebuild: %+v, want one build of %d keys", st, n)
		}
		if perKey := float64(st.FilterBytes) / float64(st.FilterEntries); perKey > 4 {
			t.Fatalf("after the rebuild: %.2f bytes a key, want a filter sized for the records", perKey)
		}
	})
	t.Run("Fits", func(t *testing.T) {
		const n = 20000
		opts := pebble.DefaultOptions()
		opts.ExpectedRecords = 2 * n
		fs, keys := crashAfterClaims(t, opts, n)
		defer pebble.SetProgressEvery(pebble.SetProgressEvery(0))
		var log syncbuf.Buffer
		s := MustOpenWith(t, "db", logTo(pebble.WithFS(opts, fs), &log))
		if st := s.Stats(); st.FilterRefused != 0 || st.FilterBuilding || st.FilterEntries != n {
			t.Fatalf("Open after %d claims into a saved filter made for %d: %+v, want it loaded with the journal",
				n, opts.ExpectedRecords, st)
		}
		for _, want := range []string{"reading its file", "replaying its journal", fmt.Sprintf("journal_keys=%d", n)} {
			if !strings.Contains(log.String(), want) {
				t.Fatalf("the log lacks %q:\n%s", want, log.String())
			}
		}
		assertRepeats(t, s, keys, "with the journal replayed")
	})
}
