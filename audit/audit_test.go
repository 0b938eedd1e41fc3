package audit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/audit"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/storetest"
)

var epoch = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// event returns an accepted event of key k at seq (node, n).
func event(k string, node uint32, n uint64, at time.Time) spent.AuditEvent {
	return spent.AuditEvent{
		Kind: spent.AuditAccepted, Time: at, Node: node, Namespace: "default", Hash: spent.KeyHash(make([]byte, 32), "default", k),
		Seq: spent.Seq{Node: node, Counter: n}, Place: "gate", State: spent.StateComplete, ExpiresAt: at.Add(time.Hour),
	}
}

// mustOpen opens a log in a new directory, with cfg's other fields.
func mustOpen(tb testing.TB, cfg audit.Config) *audit.Log {
	tb.Helper()
	if cfg.Dir == "" {
		cfg.Dir = tb.TempDir()
	}
	if cfg.Node == 0 {
		cfg.Node = 1
	}
	l, err := audit.Open(cfg)
	if err != nil {
		tb.Fatalf("Open: got %v, want no error", err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

func mustRead(tb testing.TB, paths ...string) ([]spent.AuditEvent, []audit.Warning) {
	tb.Helper()
	evs, warns, err := audit.Read(paths, audit.ReadOptions{})
	if err != nil {
		tb.Fatalf("Read: got %v, want no error", err)
	}
	return evs, warns
}

// fakeFile wraps a real file, counting syncs and failing or blocking them
// on demand.
type fakeFile struct {
	*os.File
	log *fileLog
}

type fileLog struct {
	syncs    atomic.Int32
	writes   []int // bytes of each write
	mu       sync.Mutex
	failSync atomic.Int32 // fail this many syncs
	gate     chan struct{}
}

func (f *fakeFile) Write(p []byte) (int, error) {
	f.log.mu.Lock()
	f.log.writes = append(f.log.writes, len(p))
	f.log.mu.Unlock()
	return f.File.Write(p)
}

func (f *fakeFile) Sync() error {
	if g := f.log.gate; g != nil {
		<-g
	}
	if f.log.failSync.Add(-1) >= 0 {
		return errors.New("injected fsync failure")
	}
	f.log.syncs.Add(1)
	return f.File.Sync()
}

func (fl *fileLog) open(path string) (audit.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &fakeFile{File: f, log: fl}, nil
}

func TestLog(t *testing.T) {
	ctx := context.Background()
	t.Run("AppendThenRead", func(t *testing.T) {
		l := mustOpen(t, audit.Config{})
		want := []spent.AuditEvent{event("a", 1, 1, epoch), event("b", 1, 2, epoch.Add(time.Second))}
		want[1].State, want[1].LeaseUntil, want[1].Retake = spent.StatePending, epoch.Add(time.Minute), true
		end := spent.AuditEvent{Kind: spent.AuditReleased, Time: epoch.Add(2 * time.Second), Node: 1, Namespace: "default", Hash: want[1].Hash, Seq: want[1].Seq}
		if err := l.Append(ctx, want); err != nil {
			t.Fatalf("Append: got %v, want no error", err)
		}
		if err := l.Append(ctx, []spent.AuditEvent{end}); err != nil {
			t.Fatalf("Append: got %v, want no error", err)
		}
		got, warns := mustRead(t, filepath.Dir(l.Path()))
		want = append(want, end)
		if len(warns) != 0 || len(got) != len(want) {
			t.Fatalf("read: got %d events, %d warnings, want %d, 0", len(got), len(warns), len(want))
		}
		for i := range want {
			if !equal(got[i], want[i]) {
				t.Fatalf("event %d: got %+v, want %+v", i, got[i], want[i])
			}
		}
	})
	t.Run("EachOpenStartsANewFile", func(t *testing.T) {
		dir := t.TempDir()
		l := mustOpen(t, audit.Config{Dir: dir, Node: 7})
		l.Close()
		l2 := mustOpen(t, audit.Config{Dir: dir, Node: 7})
		if got, want := filepath.Base(l2.Path()), audit.FileName(7, 2); got != want {
			t.Fatalf("second file: got %s, want %s", got, want)
		}
	})
	t.Run("GroupCommit", func(t *testing.T) {
		fl := &fileLog{gate: make(chan struct{})}
		l := mustOpen(t, audit.Config{OpenFile: fl.open})
		const callers = 20
		errs := make(chan error, callers+1)
		go func() { errs <- l.Append(ctx, []spent.AuditEvent{event("first", 1, 1, epoch)}) }()
		// The first append holds the fsync; the others gather behind it.
		for len(fl.writesSoFar()) == 0 {
			time.Sleep(time.Millisecond)
		}
		for i := range callers {
			go func() { errs <- l.Append(ctx, []spent.AuditEvent{event(fmt.Sprint(i), 1, uint64(i+2), epoch)}) }()
		}
		for l.Queued() < callers {
			time.Sleep(time.Millisecond)
		}
		close(fl.gate)
		for range callers + 1 {
			if err := <-errs; err != nil {
				t.Fatalf("Append: got %v, want no error", err)
			}
		}
		if got := fl.syncs.Load(); got != 2 {
			t.Fatalf("fsyncs for %d appends: got %d, want 2", callers+1, got)
		}
		evs, _ := mustRead(t, l.Path())
		if len(evs) != callers+1 {
			t.Fatalf("events: got %d, want %d", len(evs), callers+1)
		}
	})
	t.Run("Rotation", func(t *testing.T) {
		l := mustOpen(t, audit.Config{MaxFileSize: audit.MinMaxFileSize})
		const n = 2000 // about 300 bytes each: several files
		for i := range n {
			if err := l.Append(ctx, []spent.AuditEvent{event(fmt.Sprint(i), 1, uint64(i+1), epoch.Add(time.Duration(i)))}); err != nil {
				t.Fatalf("Append %d: got %v, want no error", i, err)
			}
		}
		dir := filepath.Dir(l.Path())
		ents, _ := os.ReadDir(dir)
		if len(ents) < 3 {
			t.Fatalf("files: got %d, want at least 3", len(ents))
		}
		for _, e := range ents {
			if fi, _ := e.Info(); fi.Size() > audit.MinMaxFileSize {
				t.Fatalf("%s: got %d bytes, want at most %d", e.Name(), fi.Size(), audit.MinMaxFileSize)
			}
		}
		evs, _ := mustRead(t, dir)
		if len(evs) != n {
			t.Fatalf("events: got %d, want %d", len(evs), n)
		}
		for i, e := range evs {
			if e.Seq.Counter != uint64(i+1) {
				t.Fatalf("event %d: got seq %v, want 1:%d", i, e.Seq, i+1)
			}
		}
	})
	t.Run("FailedFsyncFailsTheAppendAndStartsANewFile", func(t *testing.T) {
		fl := &fileLog{}
		l := mustOpen(t, audit.Config{OpenFile: fl.open})
		first := l.Path()
		fl.failSync.Store(1)
		if err := l.Append(ctx, []spent.AuditEvent{event("a", 1, 1, epoch)}); err == nil || !strings.Contains(err.Error(), first) {
			t.Fatalf("Append with a failing fsync: got %v, want an error naming %s", err, first)
		}
		if err := l.Append(ctx, []spent.AuditEvent{event("b", 1, 2, epoch)}); err != nil {
			t.Fatalf("Append after the failure: got %v, want no error", err)
		}
		if l.Path() == first {
			t.Fatalf("file after a failed fsync: got %s again, want a new file", first)
		}
	})
	t.Run("AppendAfterCloseFails", func(t *testing.T) {
		l := mustOpen(t, audit.Config{})
		l.Close()
		if err := l.Append(ctx, []spent.AuditEvent{event("a", 1, 1, epoch)}); !errors.Is(err, audit.ErrClosed) {
			t.Fatalf("Append after Close: got %v, want %v", err, audit.ErrClosed)
		}
	})
	t.Run("BadConfig", func(t *testing.T) {
		for name, cfg := range map[string]audit.Config{
			"NoDir":        {Node: 1},
			"NoNode":       {Dir: t.TempDir()},
			"TinyFileSize": {Dir: t.TempDir(), Node: 1, MaxFileSize: 100},
			"HugeFileSize": {Dir: t.TempDir(), Node: 1, MaxFileSize: audit.MaxMaxFileSize + 1},
		} {
			t.Run(name, func(t *testing.T) {
				if _, err := audit.Open(cfg); err == nil {
					t.Fatalf("Open(%+v): got no error, want one", cfg)
				}
			})
		}
	})
}

func (fl *fileLog) writesSoFar() []int {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return append([]int(nil), fl.writes...)
}

func equal(a, b spent.AuditEvent) bool {
	return a.Kind == b.Kind && a.Time.Equal(b.Time) && a.Node == b.Node && a.Namespace == b.Namespace && a.Hash == b.Hash &&
		a.Seq == b.Seq && a.Place == b.Place && a.State == b.State && a.LeaseUntil.Equal(b.LeaseUntil) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.Retake == b.Retake
}

// writeLog writes one log file of events, then tail, and returns its path.
func writeLog(t *testing.T, n int, tail string) string {
	t.Helper()
	l := mustOpen(t, audit.Config{})
	for i := range n {
		if err := l.Append(context.Background(), []spent.AuditEvent{event(fmt.Sprint(i), 1, uint64(i+1), epoch)}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	f, err := os.OpenFile(l.Path(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(tail); err != nil {
		t.Fatal(err)
	}
	return l.Path()
}

func TestRead(t *testing.T) {
	t.Run("TornLastLineIsAWarning", func(t *testing.T) {
		for name, tail := range map[string]string{"NoNewline": `{"kind":"accepted","time":"2030-`, "Garbage": "\x00\x00\x00\n"} {
			t.Run(name, func(t *testing.T) {
				path := writeLog(t, 3, tail)
				fi, _ := os.Stat(path)
				evs, warns := mustRead(t, path)
				if len(evs) != 3 || len(warns) != 1 {
					t.Fatalf("read: got %d events, %d warnings, want 3, 1", len(evs), len(warns))
				}
				if w := warns[0]; w.File != path || w.Offset != fi.Size()-int64(len(tail)) {
					t.Fatalf("warning: got %s at %d, want %s at %d", w.File, w.Offset, path, fi.Size()-int64(len(tail)))
				}
			})
		}
	})
	t.Run("DamagedMiddleLineIsAnError", func(t *testing.T) {
		path := writeLog(t, 3, "")
		b, _ := os.ReadFile(path)
		second := strings.Index(string(b), "\n") + 1
		b[second+3] = '#'
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := audit.Read([]string{path}, audit.ReadOptions{})
		if !errors.Is(err, audit.ErrDamaged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", second)) {
			t.Fatalf("Read: got %v, want %v naming %s and offset %d", err, audit.ErrDamaged, path, second)
		}
	})
	t.Run("OverlongLineIsDamage", func(t *testing.T) {
		path := writeLog(t, 1, strings.Repeat("x", audit.MaxLine+10)+"\n")
		f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		f.WriteString("{}\n")
		f.Close()
		if _, _, err := audit.Read([]string{path}, audit.ReadOptions{}); !errors.Is(err, audit.ErrDamaged) {
			t.Fatalf("Read: got %v, want %v", err, audit.ErrDamaged)
		}
	})
	t.Run("TooManyEvents", func(t *testing.T) {
		path := writeLog(t, 5, "")
		if _, _, err := audit.Read([]string{path}, audit.ReadOptions{MaxEvents: 4}); !errors.Is(err, audit.ErrTooMany) {
			t.Fatalf("Read: got %v, want %v", err, audit.ErrTooMany)
		}
	})
	t.Run("MissingPath", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope")
		if _, _, err := audit.Read([]string{missing}, audit.ReadOptions{}); err == nil || !strings.Contains(err.Error(), missing) {
			t.Fatalf("Read: got %v, want an error naming %s", err, missing)
		}
	})
	t.Run("DirectoryWithoutLogs", func(t *testing.T) {
		dir := t.TempDir()
		if _, _, err := audit.Read([]string{dir}, audit.ReadOptions{}); err == nil || !strings.Contains(err.Error(), "no audit log") {
			t.Fatalf("Read: got %v, want an error saying the directory holds no log", err)
		}
	})
	t.Run("FileGivenTwiceIsReadOnce", func(t *testing.T) {
		path := writeLog(t, 2, "")
		evs, _ := mustRead(t, path, filepath.Dir(path))
		if len(evs) != 2 {
			t.Fatalf("events: got %d, want 2", len(evs))
		}
	})
}

// ledgerFixture is a ledger over an inmem store with a fake clock, audited
// into a log, with namespaces of each lease policy.
type ledgerFixture struct {
	l     *spent.Ledger
	log   *audit.Log
	clock *storetest.Clock
}

const (
	nsHold   = "hold"
	nsRetake = "retake"
	lease    = 10 * time.Second
)

func newLedger(t *testing.T) *ledgerFixture {
	t.Helper()
	f := &ledgerFixture{log: mustOpen(t, audit.Config{}), clock: storetest.NewClock(epoch)}
	cfg := spent.DefaultConfig()
	cfg.Secret = make([]byte, spent.MinSecretLen)
	cfg.Now = f.clock.Now
	cfg.Audit = f.log
	cfg.Namespaces = map[string]spent.Policy{
		nsHold:   {Mode: spent.ModeEcho, Retention: time.Hour, Lease: lease, OnLeaseExpiry: spent.LeaseExpiryHold},
		nsRetake: {Mode: spent.ModeRefuse, Retention: time.Hour, Lease: lease, OnLeaseExpiry: spent.LeaseExpiryRetake},
	}
	store := inmem.New()
	t.Cleanup(func() { store.Close() })
	l, err := spent.NewLedger(context.Background(), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.l = l
	return f
}

// claim claims key in ns (two-step unless result) and wants want.
func (f *ledgerFixture) claim(t *testing.T, ns, key string, result []byte, want spent.Outcome) spent.Answer {
	t.Helper()
	a, err := f.l.Claim(context.Background(), spent.Claim{Namespace: ns, Key: key, Result: result})
	if err != nil || a.Outcome != want {
		t.Fatalf("claim %s/%s: got %v, %v, want %v", ns, key, a.Outcome, err, want)
	}
	return a
}

// forget makes the store lose every record of ns, as a failover to a
// replica that had not caught up does.
func (f *ledgerFixture) forget(t *testing.T, ns string) {
	t.Helper()
	if _, err := f.l.Purge(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

func (f *ledgerFixture) doubles(t *testing.T) []audit.Double {
	t.Helper()
	evs, _ := mustRead(t, filepath.Dir(f.log.Path()))
	return audit.Doubles(evs)
}

// TestDoubles runs the double rule over the logs of a real ledger: each
// legitimate re-acceptance is none, each acceptance of a key that the store
// lost while it held it is one.
func TestDoubles(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		run     func(t *testing.T, f *ledgerFixture) (first, second spent.Answer)
		doubled bool
	}{
		{"AfterExpiry", func(t *testing.T, f *ledgerFixture) (spent.Answer, spent.Answer) {
			a := f.claim(t, nsHold, "k", []byte("r"), spent.Fresh)
			f.clock.Advance(time.Hour)
			return a, f.claim(t, nsHold, "k", []byte("r"), spent.Fresh)
		}, false},
		{"AfterRelease", func(t *testing.T, f *ledgerFixture) (spent.Answer, spent.Answer) {
			a := f.claim(t, nsHold, "k", nil, spent.Fresh)
			if err := f.l.Release(ctx, spent.Release{Namespace: nsHold, Key: "k", Seq: a.Record.Seq}); err != nil {
				t.Fatal(err)
			}
			return a, f.claim(t, nsHold, "k", nil, spent.Fresh)
		}, false},
		{"RetakeAfterLease", func(t *testing.T, f *ledgerFixture) (spent.Answer, spent.Answer) {
			a := f.claim(t, nsRetake, "k", nil, spent.Fresh)
			f.clock.Advance(lease)
			return a, f.claim(t, nsRetake, "k", nil, spent.Fresh)
		}, false},
		{"LostThenClaimed", func(t *testing.T, f *ledgerFixture) (spent.Answer, spent.Answer) {
			a := f.claim(t, nsHold, "k", []byte("r"), spent.Fresh)
			f.forget(t, nsHold)
			return a, f.claim(t, nsHold, "k", []byte("r"), spent.Fresh)
		}, true},
		{"LostPendingOfHoldAfterLease", func(t *testing.T, f *ledgerFixture) (spent.Answer, spent.Answer) {
			a := f.claim(t, nsHold, "k", nil, spent.Fresh)
			f.forget(t, nsHold)
			f.clock.Advance(lease)
			return a, f.claim(t, nsHold, "k", nil, spent.Fresh)
		}, true},
		{"LostPendingOfRetakeWithinLease", func(t *testing.T, f *ledgerFixture) (spent.Answer, spent.Answer) {
			a := f.claim(t, nsRetake, "k", nil, spent.Fresh)
			f.forget(t, nsRetake)
			f.clock.Advance(lease / 2)
			return a, f.claim(t, nsRetake, "k", nil, spent.Fresh)
		}, true},
		{"LostCompletedOfRetakeAfterLease", func(t *testing.T, f *ledgerFixture) (spent.Answer, spent.Answer) {
			a := f.claim(t, nsRetake, "k", nil, spent.Fresh)
			if _, err := f.l.Complete(ctx, spent.Completion{Namespace: nsRetake, Key: "k", Seq: a.Record.Seq, Result: []byte("done")}); err != nil {
				t.Fatal(err)
			}
			f.forget(t, nsRetake)
			f.clock.Advance(lease)
			return a, f.claim(t, nsRetake, "k", nil, spent.Fresh)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newLedger(t)
			first, second := c.run(t, f)
			// Another key, claimed once, is never a double.
			f.claim(t, nsHold, "other", []byte("r"), spent.Fresh)
			ds := f.doubles(t)
			if !c.doubled {
				if len(ds) != 0 {
					t.Fatalf("doubles: got %+v, want none", ds)
				}
				return
			}
			if len(ds) != 1 {
				t.Fatalf("doubles: got %d, want 1", len(ds))
			}
			d := ds[0]
			if d.First.Seq != first.Record.Seq || d.Second.Seq != second.Record.Seq || d.Hash != first.Record.Hash {
				t.Fatalf("double: got seqs %v, %v of %v, want %v, %v of %v", d.First.Seq, d.Second.Seq, d.Hash, first.Record.Seq, second.Record.Seq, first.Record.Hash)
			}
		})
	}
}

func TestFind(t *testing.T) {
	f := newLedger(t)
	a := f.claim(t, nsHold, "pay-1", []byte("r"), spent.Fresh)
	f.claim(t, nsHold, "pay-2", []byte("r"), spent.Fresh)
	evs, _ := mustRead(t, f.log.Path())
	got := audit.Find(evs, nsHold, spent.KeyHash(make([]byte, spent.MinSecretLen), nsHold, "pay-1"))
	if len(got) != 1 || got[0].Seq != a.Record.Seq || got[0].Node != 1 {
		t.Fatalf("Find: got %+v, want the one acceptance %v on node 1", got, a.Record.Seq)
	}
	if got := audit.Find(evs, nsRetake, a.Record.Hash); len(got) != 0 {
		t.Fatalf("Find in another namespace: got %+v, want none", got)
	}
}

// TestAuditedLedgerFailsClosed: a ledger whose log cannot fsync answers an
// error, never fresh, and its retry is a repeat.
func TestAuditedLedgerFailsClosed(t *testing.T) {
	fl := &fileLog{}
	log := mustOpen(t, audit.Config{OpenFile: fl.open})
	cfg := spent.DefaultConfig()
	cfg.Secret = make([]byte, spent.MinSecretLen)
	cfg.Audit = log
	store := inmem.New()
	defer store.Close()
	l, err := spent.NewLedger(context.Background(), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fl.failSync.Store(1)
	_, err = l.Claim(context.Background(), spent.Claim{Namespace: "default", Key: "k", Result: []byte("r")})
	if got := spent.ErrorCode(err); got != spent.EUnavailable {
		t.Fatalf("claim with a failing fsync: got %q (%v), want %q", got, err, spent.EUnavailable)
	}
	a, err := l.Claim(context.Background(), spent.Claim{Namespace: "default", Key: "k", Result: []byte("r")})
	if err != nil || a.Outcome != spent.Replayed {
		t.Fatalf("retry: got %v, %v, want replayed", a.Outcome, err)
	}
}
