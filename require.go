package spent

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// PolicyReporter reports the policy of a namespace, and whether it is
// configured. A *Ledger is one; a Service that is not (the HTTP client)
// cannot be checked by [RequirePolicy].
type PolicyReporter interface {
	Policy(namespace string) (Policy, bool)
}

var _ PolicyReporter = (*Ledger)(nil)

// PolicyNeed is what a component built over a ledger (a middleware, a
// token issuer, the resolver) needs of its namespace's policy, for
// [RequirePolicy]. A zero field asks nothing.
type PolicyNeed struct {
	// Component names the component in the error ("idempotency",
	// "webhooks", "privacypass: origin").
	Component string
	// Mode is the mode the namespace must have.
	Mode Mode
	// OnLeaseExpiry is the rule the namespace must have.
	OnLeaseExpiry LeaseExpiry
	// NoRawKey asks that the namespace not store raw keys.
	NoRawKey bool
	// Keep is how long the namespace must be able to keep a record: its
	// retention, or, with OwnExpiry, its max_expiry (Policy.ExpiryLimit).
	Keep time.Duration
	// OwnExpiry says that the component's claims carry their own expiry,
	// which the ledger refuses past max_expiry: Keep is then checked
	// against it rather than the retention.
	OwnExpiry bool
	// Why says what goes wrong without the need met; it ends the error.
	Why string
	// Fix says how to configure the namespace ("add it with
	// idempotency.Policies"); it ends the error after Why.
	Fix string
}

// RequirePolicy checks that namespace ns has the policy need asks for, as
// svc reports it. It returns nil when svc is no [PolicyReporter]: only the
// operator of the remote ledger can check then. Every component checks its
// namespace with it, so that a misconfigured namespace is refused at
// start-up, in one form of words: what the namespace has, what the
// component wants, why, and how to fix it.
func RequirePolicy(svc any, ns string, need PolicyNeed) error {
	pr, ok := svc.(PolicyReporter)
	if !ok {
		return nil
	}
	p, ok := pr.Policy(ns)
	var wrong []string
	switch {
	case !ok:
		wrong = append(wrong, "is not configured in the ledger")
	default:
		if need.Mode != "" && p.Mode != need.Mode {
			wrong = append(wrong, fmt.Sprintf("has mode %s: want %s", p.Mode, need.Mode))
		}
		if need.OnLeaseExpiry != "" && p.OnLeaseExpiry != need.OnLeaseExpiry {
			wrong = append(wrong, fmt.Sprintf("has on_lease_expiry %s: want %s", p.OnLeaseExpiry, need.OnLeaseExpiry))
		}
		if need.NoRawKey && p.StoreRawKey {
			wrong = append(wrong, "stores raw keys: want store_raw_key off")
		}
		if need.Keep > 0 {
			kept, what := p.Retention, "retention"
			if need.OwnExpiry {
				kept, what = p.ExpiryLimit(), "max_expiry, or its retention when unset"
			}
			if kept < need.Keep {
				wrong = append(wrong, fmt.Sprintf("keeps records at most %v (its %s): want at least %v", kept, what, need.Keep))
			}
		}
	}
	if len(wrong) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s: namespace %s %s", need.Component, QuoteInput(ns), strings.Join(wrong, "; "))
	if need.Why != "" {
		msg += " (" + need.Why + ")"
	}
	if need.Fix != "" {
		msg += "; " + need.Fix
	}
	return errors.New(msg)
}
