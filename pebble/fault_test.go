package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
)

// fault is a kind of file-system failure the tests inject.
type fault struct {
	name string
	// err returns the error an operation gets while the fault is on, or
	// nil.
	err func(op errorfs.Op) error
}

var errNoSpace = fmt.Errorf("%w (injected)", syscall.ENOSPC)

func isWAL(op errorfs.Op) bool { return strings.HasSuffix(op.Path, ".log") }

var faults = []fault{
	{"FailedWALWrite", func(op errorfs.Op) error {
		if isWAL(op) && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt) {
			return errorfs.ErrInjected
		}
		return nil
	}},
	{"FailedWALSync", func(op errorfs.Op) error {
		if isWAL(op) && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) {
			return errorfs.ErrInjected
		}
		return nil
	}},
	{"FailedWrites", func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return errorfs.ErrInjected
		}
		return nil
	}},
	{"DiskFull", func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpCreate, errorfs.OpFilePreallocate, errorfs.OpReuseForWrite:
			return errNoSpace
		}
		return nil
	}},
	{"FailedReads", func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && (op.Kind == errorfs.OpFileRead || op.Kind == errorfs.OpFileReadAt) {
			return errorfs.ErrInjected
		}
		return nil
	}},
}

// faultFS is pebble's errorfs with its one gap closed: errorfs does not
// wrap the file ReuseForWrite returns, so a recycled WAL (pebble reuses old
// ones once a flush has freed them) would take no fault.
type faultFS struct {
	*errorfs.FS
	inj errorfs.Injector
}

func newFaultFS(inj errorfs.Injector) faultFS {
	return faultFS{errorfs.Wrap(vfs.NewCrashableMem(), inj), inj}
}

// mem is the in-memory file system under the faults.
func (fs faultFS) mem() *vfs.MemFS { return fs.Unwrap().(*vfs.MemFS) }

// ReuseForWrite implements vfs.FS, with the faults on the file it returns.
func (fs faultFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	return errorfs.WrapFile(f, namedInjector{fs.inj, newname}), nil
}

// namedInjector gives the operations of a file wrapped by errorfs.WrapFile,
// which carry no path, the file's path.
type namedInjector struct {
	errorfs.Injector
	path string
}

func (n namedInjector) MaybeError(op errorfs.Op) error {
	if op.Path == "" {
		op.Path = n.path
	}
	return n.Injector.MaybeError(op)
}

// TestFaultsUnderLoad runs concurrent claims through a Ledger on the store
// while the file system fails, then stops failing. No claim may be answered
// fresh unless its record is durable (a power cut afterwards keeps it), no
// key acknowledged before may be answered fresh again, and the store must
// serve again by itself once the fault clears.
func TestFaultsUnderLoad(t *testing.T) {
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			toggle := &errorfs.Toggle{Injector: errorfs.InjectorFunc(f.err)}
			ffs := newFaultFS(toggle)
			mem := ffs.mem()
			opts := pebble.WithFS(pebble.DefaultOptions(), ffs)
			opts.MemTableSize = 1 << 20 // flushes, so that reads go to tables
			// A filter that never fills: a larger one's build would read
			// every table into the block cache, and the claims would then
			// read no table the faults could fail.
			opts.ExpectedRecords = 1 << 20
			store, err := pebble.Open("db", opts)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			ledger := newFaultLedger(t, store)
			ctx := context.Background()

			var (
				mu      sync.Mutex
				acked   []string // keys answered fresh
				next    atomic.Int64
				errs    atomic.Int64
				stop    = make(chan struct{})
				wg      sync.WaitGroup
				ackedAt = func(i int) string {
					mu.Lock()
					defer mu.Unlock()
					return acked[i%len(acked)]
				}
			)
			claim := func(key string) (spent.Answer, error) {
				return ledger.Claim(ctx, spent.Claim{Namespace: "ns", Key: key, Result: []byte("paid:" + key)})
			}
			// Keys acknowledged before any fault, some of them flushed to
			// tables.
			for i := 0; i < 4000; i += 500 {
				cs := make([]spent.Claim, 500)
				for j := range cs {
					key := fmt.Sprintf("before-%d", i+j)
					cs[j] = spent.Claim{Namespace: "ns", Key: key, Result: []byte("paid:" + key)}
				}
				res, err := ledger.ClaimBatch(ctx, cs)
				if err != nil {
					t.Fatal(err)
				}
				for j := range res {
					if res[j].Outcome != spent.Fresh {
						t.Fatalf("claim %s: %v", cs[j].Key, res[j].Outcome)
					}
					acked = append(acked, cs[j].Key)
				}
			}
			for w := range 8 {
				wg.Go(func() {
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						if n%3 == 2 {
							// A repeat of an acknowledged key: never fresh.
							key := ackedAt(int(next.Add(1)) * 7919)
							res, err := claim(key)
							if err == nil && res.Outcome != spent.Replayed {
								t.Errorf("repeat of acknowledged %s: outcome %s, want replayed", key, res.Outcome)
							}
							if err != nil {
								errs.Add(1)
							}
							continue
						}
						key := fmt.Sprintf("w%d-%d", w, n)
						res, err := claim(key)
						if err != nil {
							errs.Add(1)
							continue
						}
						if res.Outcome == spent.Fresh {
							mu.Lock()
							acked = append(acked, key)
							mu.Unlock()
						}
					}
				})
			}
			time.Sleep(200 * time.Millisecond)
			toggle.On()
			time.Sleep(300 * time.Millisecond)
			toggle.Off()
			// The store serves again by itself: claims succeed without a
			// restart.
			deadline := time.Now().Add(30 * time.Second)
			for {
				if _, err := claim(fmt.Sprintf("after-%d", time.Now().UnixNano())); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the store still fails 30 s after the fault cleared: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			// Claims failed while the fault was on, or after it until the
			// store had reopened (a write that failed then may only be
			// answered later).
			failed := errs.Load()
			time.Sleep(200 * time.Millisecond)
			close(stop)
			wg.Wait()
			if failed == 0 {
				t.Fatalf("no claim failed while the fault was on: the fault was not injected")
			}

			// A power cut now: only what was synced survives. Every key
			// answered fresh must be there.
			mu.Lock()
			keys := append([]string(nil), acked...)
			mu.Unlock()
			crashed := mem.CrashClone(vfs.CrashCloneCfg{})
			if err := store.Close(); err != nil {
				t.Logf("Close: %v", err)
			}
			store2, err := pebble.Open("db", pebble.WithFS(pebble.DefaultOptions(), crashed))
			if err != nil {
				t.Fatalf("reopening after a power cut: %v", err)
			}
			defer store2.Close()
			ledger2 := newFaultLedger(t, store2)
			for i := 0; i < len(keys); i += 1000 {
				cs := make([]spent.Claim, 0, 1000)
				for _, key := range keys[i:min(i+1000, len(keys))] {
					cs = append(cs, spent.Claim{Namespace: "ns", Key: key, Result: []byte("again")})
				}
				res, err := ledger2.ClaimBatch(ctx, cs)
				if err != nil {
					t.Fatal(err)
				}
				for j := range res {
					if key := cs[j].Key; res[j].Outcome != spent.Replayed || string(res[j].Record.Result) != "paid:"+key {
						t.Fatalf("acknowledged %s after the power cut: %v %q; want replayed %q", key, res[j].Outcome, res[j].Record.Result, "paid:"+key)
					}
				}
			}
			t.Logf("%d claims failed until the store served again; %d keys acknowledged, all kept", failed, len(keys))
		})
	}
}

var faultSecret = []byte("0123456789abcdef0123456789abcdef")

func newFaultLedger(tb testing.TB, store spent.Store) *spent.Ledger {
	tb.Helper()
	cfg := spent.DefaultConfig()
	cfg.Secret = faultSecret
	cfg.Namespaces = map[string]spent.Policy{"ns": spent.DefaultPolicy()}
	cfg.SeqBlock = 64
	l, err := spent.NewLedger(context.Background(), store, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// TestFailedStoreRefusesUntilReopened checks the states a failure goes
// through: every call fails with ErrFailed while the disk fails, and the
// store answers again, by itself, once it does not.
func TestFailedStoreRefusesUntilReopened(t *testing.T) {
	toggle := &errorfs.Toggle{Injector: errorfs.InjectorFunc(faults[1].err)} // failed WAL syncs
	s := MustOpenWith(t, "db", pebble.WithFS(pebble.DefaultOptions(), newFaultFS(toggle)))
	ctx := context.Background()
	rng := newRand(t, 7)
	mustClaim(t, s, completeOp(randHash(rng), 1, t0, t0.Add(time.Hour)))
	toggle.On()
	if _, err := s.Claim(ctx, completeOp(randHash(rng), 2, t0, t0.Add(time.Hour))); !errors.Is(err, pebble.ErrFailed) {
		t.Fatalf("claim while syncs fail: got %v, want ErrFailed", err)
	}
	// Still failing: every call is refused, reads too.
	time.Sleep(300 * time.Millisecond)
	if _, err := s.Get(ctx, randHash(rng), t0); !errors.Is(err, pebble.ErrFailed) {
		t.Fatalf("get while failed: got %v, want ErrFailed", err)
	}
	toggle.Off()
	deadline := time.Now().Add(20 * time.Second)
	for seq := uint64(3); ; seq++ {
		_, err := s.Claim(ctx, completeOp(randHash(rng), seq, t0, t0.Add(time.Hour)))
		if err == nil {
			break
		}
		if !errors.Is(err, pebble.ErrFailed) || time.Now().After(deadline) {
			t.Fatalf("claim after the fault cleared: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
