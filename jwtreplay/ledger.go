package jwtreplay

import (
	"context"
	"errors"
	"time"

	"github.com/spentledger/spent"
)

// checkNamespace refuses a namespace that svc reports with a policy other
// than refuse, or whose max_expiry (its retention unless set) is shorter
// than need: every claim here carries its own expires_at, up to need from
// now, which the ledger refuses beyond max_expiry. A service that cannot
// report policies (the HTTP client) passes: the operator checks.
func checkNamespace(svc spent.Service, ns string, need time.Duration, why string) error {
	return spent.RequirePolicy(svc, ns, spent.PolicyNeed{
		Component: "jwtreplay", Mode: spent.ModeRefuse, Keep: need, OwnExpiry: true,
		Why: "a replay must be refused, and an id remembered while its token is accepted: " + why,
		Fix: "give it the policy of Options.Policy",
	})
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
