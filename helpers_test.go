package spent_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/storetest"
)

var (
	testEpoch  = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	testSecret = []byte("root package test secret, 32+ bytes long")
	fpA        = sum("request A")
	fpB        = sum("request B")
)

const (
	nsEcho     = "echo"   // echo, hold
	nsRefuse   = "refuse" // refuse, retake
	testLease  = 10 * time.Second
	testMaxRes = 1024
)

func sum(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func testConfig(clock *storetest.Clock) spent.Config {
	cfg := spent.DefaultConfig()
	cfg.Secret = testSecret
	cfg.Now = clock.Now
	cfg.MaxResult = testMaxRes
	cfg.Namespaces = map[string]spent.Policy{
		nsEcho:   {Mode: spent.ModeEcho, Retention: time.Hour, Lease: testLease, OnLeaseExpiry: spent.LeaseExpiryHold},
		nsRefuse: {Mode: spent.ModeRefuse, Retention: time.Hour, Lease: testLease, OnLeaseExpiry: spent.LeaseExpiryRetake},
	}
	return cfg
}

// fixture is a ledger over an inmem store with a fake clock.
type fixture struct {
	ledger *spent.Ledger
	store  *inmem.Store
	clock  *storetest.Clock
}

// mustOpen returns a fixture; mods adjust the configuration first.
func mustOpen(tb testing.TB, mods ...func(*spent.Config)) *fixture {
	tb.Helper()
	f := &fixture{store: inmem.New(), clock: storetest.NewClock(testEpoch)}
	cfg := testConfig(f.clock)
	for _, m := range mods {
		m(&cfg)
	}
	l, err := spent.NewLedger(context.Background(), f.store, cfg)
	if err != nil {
		tb.Fatalf("NewLedger: %v", err)
	}
	tb.Cleanup(func() { f.store.Close() })
	f.ledger = l
	return f
}

func (f *fixture) claim(tb testing.TB, c spent.Claim) spent.Answer {
	tb.Helper()
	r, err := f.ledger.Claim(context.Background(), c)
	if err != nil {
		tb.Fatalf("Claim(%s, %q): got error %v, want none", c.Namespace, c.Key, err)
	}
	return r
}

func wantCode(tb testing.TB, what string, err error, want string) {
	tb.Helper()
	if got := spent.ErrorCode(err); got != want {
		tb.Fatalf("%s: got code %q, want %q (error: %v)", what, got, want, err)
	}
}

func wantOutcome(tb testing.TB, what string, r spent.Answer, want spent.Outcome) {
	tb.Helper()
	if r.Outcome != want {
		tb.Fatalf("%s: got %v, want %v", what, r.Outcome, want)
	}
}
