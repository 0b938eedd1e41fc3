package spent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// TestMaxExpiry: a claim's own expires_at may lie at most the namespace's
// max_expiry from now (its retention when unset). Beyond it the claim is
// refused with expiry_too_long and nothing is written, so a token cannot
// make the ledger keep its id for years, and a later claim of the key is
// still fresh.
func TestMaxExpiry(t *testing.T) {
	const nsLong = "long" // max_expiry 48 h over a 1 h retention
	f := mustOpen(t, func(c *spent.Config) {
		c.Namespaces[nsLong] = spent.Policy{Mode: spent.ModeRefuse, Retention: time.Hour, MaxExpiry: 48 * time.Hour,
			Lease: testLease, OnLeaseExpiry: spent.LeaseExpiryHold}
	})
	ctx := context.Background()
	now := testEpoch
	tenYears := now.AddDate(10, 0, 0)

	for _, tc := range []struct {
		name    string
		ns      string
		expires time.Time
		fresh   bool
	}{
		{"DefaultLimitIsRetention", nsRefuse, now.Add(time.Hour), true},
		{"PastRetentionRefused", nsRefuse, now.Add(time.Hour + time.Nanosecond), false},
		{"TenYearsRefused", nsEcho, tenYears, false},
		{"WithinMaxExpiry", nsLong, now.Add(48 * time.Hour), true},
		{"PastMaxExpiryRefused", nsLong, now.Add(48*time.Hour + time.Second), false},
		{"TenYearsPastMaxExpiryRefused", nsLong, tenYears, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := spent.Claim{Namespace: tc.ns, Key: tc.name, Result: []byte("r"), ExpiresAt: tc.expires}
			a, err := f.ledger.Claim(ctx, c)
			if tc.fresh {
				if err != nil {
					t.Fatalf("Claim: got %v, want fresh", err)
				}
				wantOutcome(t, "Claim", a, spent.Fresh)
				if !a.Record.ExpiresAt.Equal(tc.expires) {
					t.Fatalf("expires_at: got %v, want %v (kept as asked, not clamped)", a.Record.ExpiresAt, tc.expires)
				}
				return
			}
			wantCode(t, "Claim", err, spent.EExpiryTooLong)
			for _, w := range []string{"max_expiry", spent.QuoteInput(tc.ns)} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q: want it to name %q", err, w)
				}
			}
			if _, err := f.ledger.Get(ctx, tc.ns, tc.name); spent.ErrorCode(err) != spent.ENotFound {
				t.Fatalf("Get after the refusal: got %v, want not_found (nothing written)", err)
			}
			// Refused, not clamped: the key is still free for a claim
			// the ledger can keep.
			c.ExpiresAt = time.Time{}
			wantOutcome(t, "Claim without expires_at", f.claim(t, c), spent.Fresh)
		})
	}

	t.Run("BatchRefusedWhole", func(t *testing.T) {
		_, err := f.ledger.ClaimBatch(ctx, []spent.Claim{
			{Namespace: nsRefuse, Key: "batch-ok", Result: []byte{}},
			{Namespace: nsRefuse, Key: "batch-long", Result: []byte{}, ExpiresAt: tenYears},
		})
		wantCode(t, "ClaimBatch", err, spent.EExpiryTooLong)
		if !strings.Contains(err.Error(), "claims[1]") {
			t.Fatalf("error %q: want it to name claims[1]", err)
		}
		if _, err := f.ledger.Get(ctx, nsRefuse, "batch-ok"); spent.ErrorCode(err) != spent.ENotFound {
			t.Fatalf("Get of the batch's other claim: got %v, want not_found (the batch wrote nothing)", err)
		}
	})
}

// TestMaxExpiryValidate: a max_expiry shorter than the retention, or
// negative, is refused with the reason; zero means the retention.
func TestMaxExpiryValidate(t *testing.T) {
	base := spent.Policy{Mode: spent.ModeRefuse, Retention: time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold}
	for _, tc := range []struct {
		max     time.Duration
		wantErr string
		limit   time.Duration
	}{
		{0, "", time.Hour},
		{time.Hour, "", time.Hour},
		{90 * 24 * time.Hour, "", 90 * 24 * time.Hour},
		{time.Hour - time.Second, "shorter than retention", 0},
		{-time.Second, "must not be negative", 0},
	} {
		p := base
		p.MaxExpiry = tc.max
		err := p.Validate()
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("max_expiry %v: got %v, want valid", tc.max, err)
			}
			if got := p.ExpiryLimit(); got != tc.limit {
				t.Errorf("max_expiry %v: ExpiryLimit got %v, want %v", tc.max, got, tc.limit)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("max_expiry %v: got %v, want an error saying %q", tc.max, err, tc.wantErr)
		}
	}
}
