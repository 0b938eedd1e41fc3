package spent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// reporter is a PolicyReporter over a map, as a *Ledger reports its
// namespaces.
type reporter map[string]spent.Policy

func (r reporter) Policy(ns string) (spent.Policy, bool) { p, ok := r[ns]; return p, ok }

func TestRequirePolicy(t *testing.T) {
	good := spent.Policy{Mode: spent.ModeRefuse, Retention: time.Hour, MaxExpiry: 2 * time.Hour, Lease: time.Second, OnLeaseExpiry: spent.LeaseExpiryHold}
	need := spent.PolicyNeed{Component: "tokens", Mode: spent.ModeRefuse, OnLeaseExpiry: spent.LeaseExpiryHold, NoRawKey: true,
		Keep: time.Hour, Why: "a spent token must stay spent", Fix: "use tokens.Policy"}
	with := func(edit func(*spent.Policy)) reporter {
		p := good
		edit(&p)
		return reporter{"t": p}
	}
	for _, c := range []struct {
		name string
		svc  any
		need spent.PolicyNeed
		want []string // in the error; nil: no error
	}{
		{"Met", reporter{"t": good}, need, nil},
		{"NotAReporter", struct{}{}, need, nil},
		{"NothingAsked", reporter{"t": good}, spent.PolicyNeed{Component: "x"}, nil},
		{"Unknown", reporter{}, need, []string{`tokens: namespace "t" is not configured in the ledger (a spent token must stay spent); use tokens.Policy`}},
		{"Mode", with(func(p *spent.Policy) { p.Mode = spent.ModeEcho }), need, []string{`tokens: namespace "t" has mode echo: want refuse (`}},
		{"LeaseExpiry", with(func(p *spent.Policy) { p.OnLeaseExpiry = spent.LeaseExpiryRetake }), need, []string{"has on_lease_expiry retake: want hold"}},
		{"RawKey", with(func(p *spent.Policy) { p.StoreRawKey = true }), need, []string{"stores raw keys: want store_raw_key off"}},
		{"ShortRetention", with(func(p *spent.Policy) { p.Retention = time.Minute }), need, []string{"keeps records at most 1m0s (its retention): want at least 1h0m0s"}},
		{"EveryWrong", with(func(p *spent.Policy) { p.Mode, p.Retention = spent.ModeEcho, time.Minute }), need,
			[]string{"has mode echo: want refuse; keeps records at most 1m0s"}},
		// A component whose claims carry their own expiry needs
		// max_expiry, not the retention, to reach Keep.
		{"OwnExpiryMet", with(func(p *spent.Policy) { p.Retention = time.Minute }),
			spent.PolicyNeed{Component: "jwt", Keep: 2 * time.Hour, OwnExpiry: true}, nil},
		{"OwnExpiryShort", reporter{"t": good}, spent.PolicyNeed{Component: "jwt", Keep: 3 * time.Hour, OwnExpiry: true},
			[]string{"keeps records at most 2h0m0s (its max_expiry, or its retention when unset): want at least 3h0m0s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := spent.RequirePolicy(c.svc, "t", c.need)
			if c.want == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got nil, want an error saying %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("got %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// A *Ledger reports its namespaces' policies.
func TestLedgerIsAPolicyReporter(t *testing.T) {
	l := mustOpen(t).ledger
	if err := spent.RequirePolicy(l, "nope", spent.PolicyNeed{Component: "x"}); err == nil || !strings.Contains(err.Error(), "not configured") {
		t.Fatalf("an unknown namespace of a ledger: got %v, want not configured", err)
	}
}
