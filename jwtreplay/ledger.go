package jwtreplay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spentledger/spent"
)

// policyReader is what a *spent.Ledger offers to read namespace policies.
type policyReader interface {
	Policy(namespace string) (spent.Policy, bool)
}

// checkNamespace refuses a namespace that svc reports with a policy other
// than refuse, or whose max_expiry (its retention unless set) is shorter
// than need: every claim here carries its own expires_at, up to need from
// now, which the ledger refuses beyond max_expiry. A service that cannot
// report policies (the HTTP client) passes: the operator checks.
func checkNamespace(svc spent.Service, ns string, need time.Duration, why string) error {
	pl, ok := svc.(policyReader)
	if !ok {
		return nil
	}
	p, ok := pl.Policy(ns)
	if !ok {
		return fmt.Errorf("jwtreplay: namespace %q is not configured in the ledger: add it with mode refuse and retention at least %v (%s)", ns, need, why)
	}
	if p.Mode != spent.ModeRefuse {
		return fmt.Errorf("jwtreplay: namespace %q is in %s mode: want refuse, so that a replay is refused", ns, p.Mode)
	}
	if lim := p.ExpiryLimit(); lim < need {
		return fmt.Errorf("jwtreplay: namespace %q keeps records at most %v (its max_expiry, or its retention when unset): want at least %v (%s), or ids would be forgotten while their tokens are still accepted", ns, lim, need, why)
	}
	return nil
}

// policy returns a refuse policy with retention r.
func policy(r time.Duration) spent.Policy {
	return spent.Policy{
		Mode: spent.ModeRefuse, Retention: r, Lease: min(30*time.Second, r),
		OnLeaseExpiry: spent.LeaseExpiryHold,
	}
}

// clockOf returns now, else the service's clock when it has one (a
// *spent.Ledger), else time.Now.
func clockOf(svc spent.Service, now func() time.Time) func() time.Time {
	if now != nil {
		return now
	}
	if c, ok := svc.(interface{ Now() time.Time }); ok {
		return c.Now
	}
	return time.Now
}

// claimOnce makes the one-step claim of key in ns until expires and returns
// its seq when fresh. Any other outcome is a replay; any error refuses.
func claimOnce(ctx context.Context, svc spent.Service, ns, key, place string, expires time.Time, what string) (spent.Seq, error) {
	ans, err := svc.Claim(ctx, spent.Claim{
		Namespace: ns, Key: key, Place: place, Result: []byte{}, ExpiresAt: expires,
	})
	if err != nil {
		switch code := spent.ErrorCode(err); {
		case code == spent.EExpiryTooLong:
			return spent.Seq{}, refuseErr(CodeLifetimeTooLong, err,
				"the ledger will not remember this %s until %s (namespace %q: its max_expiry is shorter): present a shorter-lived one, or raise max_expiry",
				what, expires.UTC().Format(time.RFC3339), ns)
		case code == spent.EUnavailable || ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
			return spent.Seq{}, refuseErr(CodeUnavailable, err, "the ledger could not record this %s: retry", what)
		default:
			return spent.Seq{}, refuseErr(CodeInternal, err, "the ledger refused the claim of this %s (namespace %q): check its configuration", what, ns)
		}
	}
	if ans.Outcome != spent.Fresh {
		rec := ans.Record
		where := ""
		if rec.Place != "" {
			where = " at " + rec.Place
		}
		return spent.Seq{}, refuse(CodeReplayed, "this %s was first presented at %s%s and is remembered until %s",
			what, rec.FirstSeen.UTC().Format(time.RFC3339), where, rec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return ans.Record.Seq, nil
}
