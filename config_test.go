package spent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/storetest"
)

func TestPolicyValidate(t *testing.T) {
	good := spent.Policy{Mode: spent.ModeEcho, Retention: time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold}
	valid := map[string]func(*spent.Policy){
		"Default":              func(p *spent.Policy) { *p = spent.DefaultPolicy() },
		"EchoHold":             func(p *spent.Policy) {},
		"RefuseRetake":         func(p *spent.Policy) { p.Mode, p.OnLeaseExpiry = spent.ModeRefuse, spent.LeaseExpiryRetake },
		"LeaseEqualsRetention": func(p *spent.Policy) { p.Lease = p.Retention },
		"StoreRawKeyInEcho":    func(p *spent.Policy) { p.StoreRawKey = true },
	}
	invalid := map[string]func(*spent.Policy){
		"NoMode":                   func(p *spent.Policy) { p.Mode = "" },
		"UnknownMode":              func(p *spent.Policy) { p.Mode = "replay" },
		"NoLeaseExpiry":            func(p *spent.Policy) { p.OnLeaseExpiry = "" },
		"UnknownLeaseExpiry":       func(p *spent.Policy) { p.OnLeaseExpiry = "forget" },
		"ZeroRetention":            func(p *spent.Policy) { p.Retention = 0 },
		"NegativeRetention":        func(p *spent.Policy) { p.Retention = -time.Hour },
		"ZeroLease":                func(p *spent.Policy) { p.Lease = 0 },
		"NegativeLease":            func(p *spent.Policy) { p.Lease = -time.Second },
		"LeaseLongerThanRetention": func(p *spent.Policy) { p.Lease = p.Retention + time.Nanosecond },
		"StoreRawKeyInRefuse":      func(p *spent.Policy) { p.Mode, p.StoreRawKey = spent.ModeRefuse, true },
	}
	for name, mod := range valid {
		t.Run(name, func(t *testing.T) {
			p := good
			mod(&p)
			if err := p.Validate(); err != nil {
				t.Fatalf("Validate(%+v): got %v, want nil", p, err)
			}
		})
	}
	for name, mod := range invalid {
		t.Run(name, func(t *testing.T) {
			p := good
			mod(&p)
			if err := p.Validate(); err == nil {
				t.Fatalf("Validate(%+v): got nil, want an error", p)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() spent.Config {
		cfg := spent.DefaultConfig()
		cfg.Secret = make([]byte, spent.MinSecretLen)
		return cfg
	}
	if err := (&spent.Config{}).Validate(); err == nil {
		t.Fatalf("Validate of the zero config: got nil, want an error")
	}
	noSecret := spent.DefaultConfig()
	if err := noSecret.Validate(); err == nil {
		t.Fatalf("Validate of DefaultConfig without a secret: got nil, want an error")
	}
	valid := map[string]func(*spent.Config){
		"DefaultWithSecret":  func(c *spent.Config) {},
		"NamespaceOf64Bytes": func(c *spent.Config) { c.Namespaces[strings.Repeat("n", 64)] = spent.DefaultPolicy() },
	}
	invalid := map[string]func(*spent.Config){
		"ShortSecret":        func(c *spent.Config) { c.Secret = c.Secret[:spent.MinSecretLen-1] },
		"NodeZero":           func(c *spent.Config) { c.Node = 0 },
		"NoNamespaces":       func(c *spent.Config) { c.Namespaces = nil },
		"EmptyNamespaceName": func(c *spent.Config) { c.Namespaces[""] = spent.DefaultPolicy() },
		"NamespaceOf65Bytes": func(c *spent.Config) { c.Namespaces[strings.Repeat("n", 65)] = spent.DefaultPolicy() },
		"InvalidPolicy":      func(c *spent.Config) { c.Namespaces["bad"] = spent.Policy{Mode: spent.ModeEcho} },
		"ZeroMaxResult":      func(c *spent.Config) { c.MaxResult = 0 },
		"ZeroSeqBlock":       func(c *spent.Config) { c.SeqBlock = 0 },
		"NoClock":            func(c *spent.Config) { c.Now = nil },
	}
	for name, mod := range valid {
		t.Run(name, func(t *testing.T) {
			cfg := base()
			mod(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate: got %v, want nil", err)
			}
		})
	}
	for name, mod := range invalid {
		t.Run(name, func(t *testing.T) {
			cfg := base()
			mod(&cfg)
			if err := cfg.Validate(); err == nil {
				t.Fatalf("Validate: got nil, want an error")
			}
			if _, err := spent.NewLedger(context.Background(), inmem.New(), cfg); err == nil {
				t.Fatalf("NewLedger: got nil error, want the validation error")
			}
		})
	}
}

func TestPolicyErrorNamesNamespace(t *testing.T) {
	cfg := testConfig(storetest.NewClock(testEpoch))
	cfg.Namespaces["broken"] = spent.Policy{Mode: spent.ModeEcho, Retention: time.Hour, Lease: 2 * time.Hour, OnLeaseExpiry: spent.LeaseExpiryHold}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `"broken"`) {
		t.Fatalf("Validate: got %v, want an error naming namespace %q", err, "broken")
	}
}

func TestNewLedgerNeedsAWorkingStore(t *testing.T) {
	s := inmem.New()
	boom := errors.New("disk on fire")
	s.SetFaults(inmem.Faults{Before: func(op string) error { return boom }})
	_, err := spent.NewLedger(context.Background(), s, testConfig(storetest.NewClock(testEpoch)))
	wantCode(t, "NewLedger over a failing store", err, spent.EUnavailable)
	if !errors.Is(err, boom) {
		t.Fatalf("NewLedger: got %v, want an error wrapping %v", err, boom)
	}
}

func TestLedgerAccessors(t *testing.T) {
	f := mustOpen(t)
	if got := f.ledger.Namespaces(); len(got) != 2 || got[0] != nsEcho || got[1] != nsRefuse {
		t.Fatalf("Namespaces: got %v, want [%s %s]", got, nsEcho, nsRefuse)
	}
	p, ok := f.ledger.Policy(nsRefuse)
	if !ok || p.Mode != spent.ModeRefuse || p.OnLeaseExpiry != spent.LeaseExpiryRetake {
		t.Fatalf("Policy(%s): got %+v, %v, want refuse/retake, true", nsRefuse, p, ok)
	}
	if _, ok := f.ledger.Policy("nowhere"); ok {
		t.Fatalf("Policy(nowhere): got ok, want not ok")
	}
	if got := f.ledger.Now(); !got.Equal(testEpoch) {
		t.Fatalf("Now: got %v, want %v", got, testEpoch)
	}
	if f.ledger.Store() != spent.Store(f.store) {
		t.Fatalf("Store: got another store, want the one given")
	}
}
