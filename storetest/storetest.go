// Package storetest is the conformance suite every spent.Store must pass.
//
// In the common case, a store's package runs the whole suite from one test:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			Open: func(tb testing.TB, dir string) spent.Store { return mustOpen(tb, dir) },
//		})
//	}
//
// Run builds its own ledgers over the store, with a fake [Clock] and a fixed
// secret, and checks the invariants of docs/concepts.md through [spent.Service]:
// every outcome in both modes, completion and release, lease expiry under
// retake and hold, the TTL boundary to the nanosecond, exact replay of stored
// bytes, one fresh claim among many concurrent ones, linearizability of random
// concurrent histories (checked with porcupine), durability across close and
// reopen, the bounded counters of Store.Count, the forgetting of one
// namespace by Store.Purge, the index by seq of [spent.SeqLister] and
// [spent.Ledger.Seq] over it, and survival of kill -9 at random moments.
// Store-level tests call the store directly for what the ledger does not
// expose (DeleteExpired, Purge, ReserveSeq, ListPending ordering), and
// check its Complete and Release against [EndCases], the table of rulings
// that [spent.RuleEnd] states.
//
// When Harness.Wrap is set, the behavioural tests talk to the wrapped service
// (the HTTP client, say) and assert error codes with spent.ErrorCode; the
// store-level tests, the non-atomic-store check and the crash test use the
// ledger and the store directly.
//
// # Guarantees
//
// Every test can fail: each checks an exact answer, the linearizability
// checker is itself shown to reject a store whose claim is not atomic, the
// crash test is shown (in this package's own tests) to catch a store that
// acknowledges claims before writing them, and the Purge test to catch stores
// that purge too much, too little, or leave an index entry behind.
//
// Random tests log their seed; set SPENT_STORETEST_SEED to replay one. When
// the linearizability check fails, it writes porcupine's visualization to
// the test's artifact directory and names it in the failure; run go test
// with -artifacts to keep the file.
//
// # Caveats
//
// The crash test re-executes the test binary as a child process that opens the
// store (selected with -test.run and the environment variables
// SPENT_STORETEST_CRASH_DIR and SPENT_STORETEST_CRASH_TEST), so [Run] must be
// called at the top of its test function, and Harness.Open must work in a
// fresh process. It kills at least 20 children, and takes some tens of
// seconds. A harness for a store that keeps nothing across processes sets
// Harness.NoCrash; the crash test is then reported as skipped, never as
// passed.
package storetest

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// Harness tells the suite how to open the store under test.
type Harness struct {
	// Open opens the store kept in dir. The suite passes a fresh temporary
	// directory for a new store, and the same directory again after Close to
	// reopen it: a durable store must then hold everything it acknowledged.
	Open func(tb testing.TB, dir string) spent.Store
	// Wrap, when set, serves a ledger through another Service (the HTTP client
	// against a live server, say); the behavioural tests then run through it.
	Wrap func(tb testing.TB, l *spent.Ledger) spent.Service
	// NoCrash skips the crash test, which kills a child process holding the
	// store with SIGKILL and reopens its directory. Only test stores that keep
	// nothing across a process (such as inmem) may set it; a durable store must
	// never set it. The crash test is then reported as skipped, not passed.
	NoCrash bool
	// NativeExpiry declares a store whose engine forgets each record by
	// itself when its ExpiresAt passes on the engine's own (real) clock, such
	// as Redis with PEXPIREAT or etcd with leases. Its DeleteExpired removes
	// nothing and returns 0. The suite then checks exactly that, and instead
	// checks that a record written to expire a moment from now (real time) is
	// physically gone soon after, even when read at an earlier instant.
	NativeExpiry bool
	// NoSeqIndex declares a test store that keeps no index by seq (it is
	// no [spent.SeqLister]); the index tests are then reported as
	// skipped. Every store of this module keeps the index and must never
	// set it.
	NoSeqIndex bool
}

// Run runs the whole suite. It must be called from the top of a test (or
// subtest) function: when the crash test re-executes the binary, the child
// process enters Run through the same test and never returns from it.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	if isCrashChild(t) {
		runCrashChild(t, h) // exits the process
		return
	}
	runName := t.Name()
	t.Run("Claim", func(t *testing.T) { testClaim(t, h) })
	t.Run("Complete", func(t *testing.T) { testComplete(t, h) })
	t.Run("Release", func(t *testing.T) { testRelease(t, h) })
	t.Run("Early", func(t *testing.T) { testEarly(t, h) })
	t.Run("Lease", func(t *testing.T) { testLeases(t, h) })
	t.Run("Expiry", func(t *testing.T) { testExpiry(t, h) })
	t.Run("Replay", func(t *testing.T) { testReplay(t, h) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, h) })
	t.Run("Linearizability", func(t *testing.T) { testLinearizability(t, h) })
	t.Run("Durability", func(t *testing.T) { testDurability(t, h) })
	t.Run("Store", func(t *testing.T) { testStore(t, h) })
	t.Run("EndRuling", func(t *testing.T) { testEndRuling(t, h) })
	t.Run("ResultLimit", func(t *testing.T) { testResultLimit(t, h) })
	t.Run("Count", func(t *testing.T) { testCount(t, h) })
	t.Run("Purge", func(t *testing.T) { testPurge(t, h) })
	t.Run("Seq", func(t *testing.T) { testSeq(t, h) })
	t.Run("Crash", func(t *testing.T) { testCrash(t, h, runName) })
}

// Clock is a fake clock for tests, safe for concurrent use. Pass its Now
// method as spent.Config.Now. It is exported for tests of code built on the
// ledger; it is not for production.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads t until it is set or advanced.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, backwards or forwards.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// The suite's namespaces cover echo/refuse × hold/retake, with short leases
// and retentions (the clock is fake, so short costs nothing).
const (
	nsEchoHold     = "echo-hold" // also keeps raw keys (StoreRawKey)
	nsEchoRetake   = "echo-retake"
	nsRefuseHold   = "refuse-hold"
	nsRefuseRetake = "refuse-retake"

	testLease     = 5 * time.Second
	testRetention = 60 * time.Second
	// testMaxExpiry lets a claim's own expires_at lie past the retention,
	// as the suite's per-claim expiries do.
	testMaxExpiry = time.Hour
	testNode      = 1
	testSeqBlock  = 16
	testMaxResult = 256 << 10
)

var (
	// epoch is where every suite clock starts: a fixed instant with a
	// nanosecond part, so that lost precision shows.
	epoch = time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.UTC)
	// secret is the suite's fixed HMAC secret.
	secret = []byte("storetest fixed secret: 32+ bytes of it")

	fpA = fingerprint("request A")
	fpB = fingerprint("request B")

	allNamespaces = []string{nsEchoHold, nsEchoRetake, nsRefuseHold, nsRefuseRetake}
)

func fingerprint(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func policies() map[string]spent.Policy {
	p := func(m spent.Mode, e spent.LeaseExpiry) spent.Policy {
		return spent.Policy{Mode: m, Retention: testRetention, MaxExpiry: testMaxExpiry, Lease: testLease, OnLeaseExpiry: e}
	}
	ps := map[string]spent.Policy{
		nsEchoHold:     p(spent.ModeEcho, spent.LeaseExpiryHold),
		nsEchoRetake:   p(spent.ModeEcho, spent.LeaseExpiryRetake),
		nsRefuseHold:   p(spent.ModeRefuse, spent.LeaseExpiryHold),
		nsRefuseRetake: p(spent.ModeRefuse, spent.LeaseExpiryRetake),
	}
	eh := ps[nsEchoHold]
	eh.StoreRawKey = true
	ps[nsEchoHold] = eh
	return ps
}

func testConfig(clock *Clock) spent.Config {
	cfg := spent.DefaultConfig()
	cfg.Secret = secret
	cfg.Node = testNode
	cfg.Namespaces = policies()
	cfg.MaxResult = testMaxResult
	cfg.SeqBlock = testSeqBlock
	cfg.Now = clock.Now
	return cfg
}

// env is one store under test with a ledger over it and the service the
// behavioural tests talk to.
type env struct {
	t      *testing.T
	h      Harness
	dir    string
	clock  *Clock
	store  spent.Store
	ledger *spent.Ledger
	svc    spent.Service
	wrap   func(spent.Store) spent.Store // wraps the opened store, or nil
	config func(*spent.Config)           // adjusts the ledger's config, or nil
	direct bool                          // ignore Harness.Wrap
	open   bool
}

type envOption func(*env)

// withStoreWrapper puts w between the ledger and the store under test.
func withStoreWrapper(w func(spent.Store) spent.Store) envOption {
	return func(e *env) { e.wrap = w }
}

// withConfig adjusts the ledger's configuration.
func withConfig(f func(*spent.Config)) envOption {
	return func(e *env) { e.config = f }
}

// withoutWrap talks to the ledger directly even when the harness wraps it.
func withoutWrap() envOption { return func(e *env) { e.direct = true } }

// newEnv opens a fresh store in a new directory; it is closed at cleanup.
func newEnv(t *testing.T, h Harness, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, h: h, dir: t.TempDir(), clock: NewClock(epoch)}
	for _, o := range opts {
		o(e)
	}
	e.openStore()
	t.Cleanup(e.close)
	return e
}

func (e *env) openStore() {
	e.t.Helper()
	s := e.h.Open(e.t, e.dir)
	if s == nil {
		e.t.Fatal("storetest: Harness.Open returned nil")
	}
	if e.wrap != nil {
		s = e.wrap(s)
	}
	e.store = s
	e.open = true
	cfg := testConfig(e.clock)
	if e.config != nil {
		e.config(&cfg)
	}
	l, err := spent.NewLedger(context.Background(), s, cfg)
	if err != nil {
		e.t.Fatalf("NewLedger: %v", err)
	}
	e.ledger = l
	e.svc = l
	if e.h.Wrap != nil && !e.direct {
		e.svc = e.h.Wrap(e.t, l)
	}
}

func (e *env) close() {
	if !e.open {
		return
	}
	e.open = false
	if err := e.store.Close(); err != nil {
		e.t.Errorf("Close: %v", err)
	}
}

// reopen closes the store and opens the same directory again, with a new
// ledger (and service) over it. The clock keeps its time.
func (e *env) reopen() {
	e.t.Helper()
	e.close()
	e.openStore()
}

func (e *env) hash(ns, key string) spent.Hash { return e.ledger.HashKey(ns, key) }

// claim makes c and fails the test on error.
func (e *env) claim(c spent.Claim) spent.Answer {
	e.t.Helper()
	r, err := e.svc.Claim(context.Background(), c)
	if err != nil {
		e.t.Fatalf("Claim(%s, %q): got error %v, want none", c.Namespace, c.Key, err)
	}
	return r
}

// claimWant makes c and checks its outcome.
func (e *env) claimWant(c spent.Claim, want spent.Outcome) spent.Answer {
	e.t.Helper()
	r := e.claim(c)
	if r.Outcome != want {
		e.t.Fatalf("Claim(%s, %q) at %s: got %v, want %v", c.Namespace, c.Key, e.since(), r.Outcome, want)
	}
	return r
}

func (e *env) complete(c spent.Completion) (spent.Record, error) {
	return e.svc.Complete(context.Background(), c)
}

func (e *env) release(r spent.Release) error {
	return e.svc.Release(context.Background(), r)
}

func (e *env) get(ns, key string) (spent.Record, error) {
	return e.svc.Get(context.Background(), ns, key)
}

func (e *env) unknown(ns string, limit int) []spent.Record {
	e.t.Helper()
	recs, err := e.svc.Unknown(context.Background(), ns, limit)
	if err != nil {
		e.t.Fatalf("Unknown(%q): got error %v, want none", ns, err)
	}
	return recs
}

// since describes the clock as an offset from the epoch, for messages.
func (e *env) since() string { return "epoch+" + e.clock.Now().Sub(epoch).String() }

// oneStep and twoStep build claims with fingerprint A at place "gate-1".
func oneStep(ns, key string, result []byte) spent.Claim {
	if result == nil {
		result = []byte{}
	}
	return spent.Claim{Namespace: ns, Key: key, Fingerprint: fpA, Place: "gate-1", Result: result}
}

func twoStep(ns, key string) spent.Claim {
	return spent.Claim{Namespace: ns, Key: key, Fingerprint: fpA, Place: "gate-1"}
}

func isEcho(ns string) bool   { return policies()[ns].Mode == spent.ModeEcho }
func isRetake(ns string) bool { return policies()[ns].OnLeaseExpiry == spent.LeaseExpiryRetake }

// secondAnswer is what a repeat with the same fingerprint gets from a
// complete record.
func secondAnswer(ns string) spent.Outcome {
	if isEcho(ns) {
		return spent.Replayed
	}
	return spent.Refused
}

// wantCode checks that err carries the domain error code want ("" for none).
func wantCode(tb testing.TB, what string, err error, want string) {
	tb.Helper()
	if got := spent.ErrorCode(err); got != want {
		tb.Fatalf("%s: got code %q, want %q (error: %v)", what, got, want, err)
	}
}

// forEachNamespace runs f as a subtest per namespace.
func forEachNamespace(t *testing.T, nss []string, f func(t *testing.T, ns string)) {
	for _, ns := range nss {
		t.Run(ns, func(t *testing.T) { f(t, ns) })
	}
}
