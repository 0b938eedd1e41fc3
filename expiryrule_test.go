package spent_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// expiryInputs returns int64 values that sweep the whole range: every power
// of two and its neighbours, both signs, the extremes, the decimal
// magnitudes, and random values of every bit length.
func expiryInputs(seed uint64) []int64 {
	var out []int64
	add := func(n int64) { out = append(out, n, -n) }
	for k := range 63 {
		p := int64(1) << k
		add(p - 1)
		add(p)
		add(p + 1)
	}
	for p := int64(1); p <= math.MaxInt64/10; p *= 10 {
		add(p)
		add(p - 1)
		add(p + 1)
	}
	out = append(out, 0, math.MaxInt64, math.MinInt64, math.MaxInt64-1, math.MinInt64+1,
		18446744074, 18446744073710, 9223372036, 9223372037, 9223372036854)
	r := rand.New(rand.NewPCG(seed, 1))
	for range 20000 {
		bits := r.IntN(64)
		n := int64(r.Uint64() >> (64 - bits))
		if bits == 0 {
			n = 0
		}
		if r.IntN(2) == 0 {
			n = -n
		}
		out = append(out, n)
	}
	return out
}

// expiryPolicies are the namespaces the property runs against: no minimum,
// a minimum, a max_expiry above the retention, and the largest durations a
// configuration can hold.
var expiryPolicies = map[string]spent.Policy{
	"plain":   {Mode: spent.ModeRefuse, Retention: time.Hour, Lease: time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
	"minimum": {Mode: spent.ModeRefuse, Retention: 30 * time.Hour, MinExpiry: 30 * time.Hour, MaxExpiry: 48 * time.Hour, Lease: time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
	"long":    {Mode: spent.ModeEcho, Retention: 24 * time.Hour, MinExpiry: time.Minute, MaxExpiry: 400 * 24 * time.Hour, Lease: time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
	"huge":    {Mode: spent.ModeEcho, Retention: math.MaxInt64 / 2, MinExpiry: time.Hour, MaxExpiry: math.MaxInt64, Lease: time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
}

// checkExpiry asserts the promise of the rule for one input: either an
// error (invalid or expiry_too_long, and never for a clamped lifetime
// within reach), or an expires_at at least min(floor, max_expiry) and at
// most max_expiry from now.
func checkExpiry(t *testing.T, name string, p spent.Policy, now time.Time, e spent.Expiry, floor time.Duration) {
	t.Helper()
	exp, err := p.ExpiresAt(now, e)
	if err != nil {
		switch spent.ErrorCode(err) {
		case spent.EInvalid, spent.EExpiryTooLong:
		default:
			t.Fatalf("%s: %s: got error %v, want invalid or expiry_too_long", name, e, err)
		}
		return
	}
	lo := min(max(p.MinExpiry, floor), p.ExpiryLimit())
	life := exp.Sub(now)
	if life < lo || life > p.ExpiryLimit() {
		t.Fatalf("%s: %s: record lives %v, want %v to %v (expires_at %v, now %v)", name, e, life, lo, p.ExpiryLimit(), exp, now)
	}
	if !exp.After(now) {
		t.Fatalf("%s: %s: expires_at %v not after now %v", name, e, exp, now)
	}
}

// TestExpiryRuleProperty sweeps the whole int64 range of every unit and
// form a front end passes to the ledger (EX and PX as lifetimes, EXAT, PXAT
// and EXPIRESAT as instants, in seconds, milliseconds, microseconds and
// nanoseconds), refused and clamped, with and without a floor of the front
// end's own, against namespaces with and without a minimum: no value yields
// a record that lives less than the minimum or longer than max_expiry, and
// none wraps. A clamped lifetime is never refused for being too long.
func TestExpiryRuleProperty(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 0, 0, 123456789, time.UTC)
	inputs := expiryInputs(31)
	units := []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour, 3 * time.Millisecond, 1500 * time.Millisecond, time.Second + 32}
	for name, p := range expiryPolicies {
		if err := p.Validate(); err != nil {
			t.Fatalf("policy %s: %v", name, err)
		}
		for _, unit := range units {
			for _, n := range inputs {
				for _, floor := range []time.Duration{0, 30 * time.Hour} {
					for _, e := range []spent.Expiry{spent.ExpiresIn(n, unit), spent.ExpiresAtUnix(n, unit)} {
						e = e.AtLeast(floor)
						checkExpiry(t, name, p, now, e, floor)
						c := e.Clamped()
						checkExpiry(t, name, p, now, c, floor)
						if _, err := p.ExpiresAt(now, c); spent.ErrorCode(err) == spent.EExpiryTooLong {
							t.Fatalf("%s: clamped %s: got %v, want it clamped, never refused as too long", name, c, err)
						}
					}
				}
			}
		}
	}
}

// TestExpiryRuleCases pins the rule's answers: the overflow of finding 2 of
// issue 31 (EX 18446744074 and PX 18446744073710, which wrapped to a
// 275 ms life), exact instants kept as asked, a lifetime under the minimum
// raised, and one beyond max_expiry refused unless clamped.
func TestExpiryRuleCases(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	p := expiryPolicies["minimum"] // retention 30 h, min 30 h, max 48 h
	plain := expiryPolicies["plain"]
	for _, tc := range []struct {
		name string
		p    spent.Policy
		e    spent.Expiry
		want time.Duration // the life; 0 with code
		code string
	}{
		{"NoneIsRetention", plain, spent.Expiry{}, time.Hour, ""},
		{"EXOverflowClampedToMax", p, spent.ExpiresIn(18446744074, time.Second).Clamped(), 48 * time.Hour, ""},
		{"PXOverflowClampedToMax", p, spent.ExpiresIn(18446744073710, time.Millisecond).Clamped(), 48 * time.Hour, ""},
		{"EXOverflowRefused", p, spent.ExpiresIn(18446744074, time.Second), 0, spent.EExpiryTooLong},
		{"MaxInt64SecondsClamped", p, spent.ExpiresIn(math.MaxInt64, time.Second).Clamped(), 48 * time.Hour, ""},
		{"EXATFarFutureClamped", p, spent.ExpiresAtUnix(math.MaxInt64, time.Second).Clamped(), 48 * time.Hour, ""},
		{"PXATFarFutureClamped", p, spent.ExpiresAtUnix(math.MaxInt64, time.Millisecond).Clamped(), 48 * time.Hour, ""},
		{"ShortRaisedToMinimum", p, spent.ExpiresIn(60, time.Second), 30 * time.Hour, ""},
		{"ShortRaisedToFloor", plain, spent.ExpiresIn(1, time.Second).AtLeast(30 * time.Minute), 30 * time.Minute, ""},
		{"FloorNeverOverMax", plain, spent.ExpiresIn(1, time.Second).AtLeast(30 * time.Hour), time.Hour, ""},
		{"WithinKeptExactly", p, spent.ExpiresIn(40*3600, time.Second), 40 * time.Hour, ""},
		{"Zero", p, spent.ExpiresIn(0, time.Second), 0, spent.EInvalid},
		{"Negative", p, spent.ExpiresIn(-5, time.Second).Clamped(), 0, spent.EInvalid},
		{"MinInt64", p, spent.ExpiresIn(math.MinInt64, time.Millisecond).Clamped(), 0, spent.EInvalid},
		{"PastInstant", p, spent.ExpiresAtUnix(now.Unix()-1, time.Second).Clamped(), 0, spent.EInvalid},
		{"NowInstant", p, spent.ExpiresAtTime(now), 0, spent.EInvalid},
		{"InstantKept", p, spent.ExpiresAtUnix(now.Add(47*time.Hour).UnixMilli(), time.Millisecond), 47 * time.Hour, ""},
		{"InstantPastMaxRefused", p, spent.ExpiresAtTime(now.Add(48*time.Hour + time.Nanosecond)), 0, spent.EExpiryTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := tc.p.ExpiresAt(now, tc.e)
			if tc.code != "" {
				if got := spent.ErrorCode(err); got != tc.code {
					t.Fatalf("got %v (%v), want code %s", exp, err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want a life of %v", err, tc.want)
			}
			if got := exp.Sub(now); got != tc.want {
				t.Fatalf("life: got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestParseExpiresIn: ISO 8601 durations, their refusals, and saturation.
func TestParseExpiresIn(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration // -1: refused by the parser; -2: parsed, over any limit; -3: parsed, not in the future
	}{
		{"PT30S", 30 * time.Second},
		{"PT0.5S", 500 * time.Millisecond},
		{"PT1,25S", 1250 * time.Millisecond},
		{"PT15M", 15 * time.Minute},
		{"P1DT6H", 30 * time.Hour},
		{"P2W", 14 * 24 * time.Hour},
		{"P1W2DT3H4M5.000000006S", (9*24+3)*time.Hour + 4*time.Minute + 5*time.Second + 6},
		{"PT0.0000000019S", time.Nanosecond},
		{"PT0S", -3},
		{"P0D", -3},
		{"P99999999999999999999D", -2},
		{"PT9223372036S", -2},
		{"P106751DT23H47M16.854775808S", -2},
		{"P106751DT23H47M16.854775807S", math.MaxInt64},
		{"P1Y", -1},
		{"P1M", -1},
		{"PT", -1},
		{"P", -1},
		{"P1T", -1}, {"P1TT5S", -1}, {"P1T5S", -1},
		{"", -1},
		{"30S", -1},
		{"PT1H2H", -1},
		{"PT1S1M", -1},
		{"P1H", -1},
		{"PT1D", -1},
		{"P1.5D", -1},
		{"PT-1S", -1},
		{"-PT1S", -1},
		{"PT1", -1},
		{"PT.5S", -1},
		{"PT1.S", -1},
		{"P1DT", -1},
		{"pt1s", -1},
		{"PT1S\n", -1},
		{strings.Repeat("9", 70), -1},
	} {
		t.Run(strconv.Quote(tc.in), func(t *testing.T) {
			e, err := spent.ParseExpiresIn(tc.in)
			if tc.want == -1 {
				if spent.ErrorCode(err) != spent.EInvalid {
					t.Fatalf("got %v, %v; want invalid", e, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want it parsed", err)
			}
			now := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
			// No minimum, and the largest max_expiry: a value is kept as
			// parsed.
			all := spent.Policy{Mode: spent.ModeEcho, Retention: time.Hour, MaxExpiry: math.MaxInt64, Lease: time.Second, OnLeaseExpiry: spent.LeaseExpiryHold}
			long := expiryPolicies["long"] // max_expiry 400 days
			switch tc.want {
			case -2:
				if _, err := long.ExpiresAt(now, e); spent.ErrorCode(err) != spent.EExpiryTooLong {
					t.Fatalf("over any limit: got %v, want expiry_too_long", err)
				}
				exp, err := long.ExpiresAt(now, e.Clamped())
				if err != nil || exp.Sub(now) != long.MaxExpiry {
					t.Fatalf("over any limit, clamped: got %v, %v; want max_expiry %v", exp.Sub(now), err, long.MaxExpiry)
				}
			case -3:
				if exp, err := all.ExpiresAt(now, e); spent.ErrorCode(err) != spent.EInvalid {
					t.Fatalf("got %v, %v; want invalid (not in the future)", exp, err)
				}
			default:
				exp, err := all.ExpiresAt(now, e)
				if err != nil {
					t.Fatal(err)
				}
				if exp.Sub(now) != tc.want {
					t.Fatalf("life: got %v, want %v", exp.Sub(now), tc.want)
				}
			}
		})
	}
}

// TestClaimExpiry: the ledger applies the rule to Claim.Expiry and to
// Claim.ExpiresAt, refuses both at once, and keeps the minimum of the
// namespace (min_expiry) whichever front end asks.
func TestClaimExpiry(t *testing.T) {
	f := mustOpen(t, func(c *spent.Config) {
		c.Namespaces["min"] = spent.Policy{Mode: spent.ModeRefuse, Retention: 2 * time.Hour, MinExpiry: 2 * time.Hour, Lease: testLease, OnLeaseExpiry: spent.LeaseExpiryHold}
	})
	ctx := context.Background()
	now := f.clock.Now()
	a, err := f.ledger.Claim(ctx, spent.Claim{Namespace: "min", Key: "short", Result: []byte{}, Expiry: spent.ExpiresIn(5, time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Record.ExpiresAt.Sub(now); got != 2*time.Hour {
		t.Fatalf("EX 5 in a namespace of min_expiry 2h: lives %v, want 2h", got)
	}
	a, err = f.ledger.Claim(ctx, spent.Claim{Namespace: "min", Key: "at", Result: []byte{}, ExpiresAt: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Record.ExpiresAt.Sub(now); got != 2*time.Hour {
		t.Fatalf("expires_at in a minute, min_expiry 2h: lives %v, want 2h", got)
	}
	_, err = f.ledger.Claim(ctx, spent.Claim{Namespace: "min", Key: "both", ExpiresAt: now.Add(time.Hour), Expiry: spent.ExpiresIn(5, time.Second)})
	wantCode(t, "both", err, spent.EInvalid)
	_, err = f.ledger.Claim(ctx, spent.Claim{Namespace: "min", Key: "over", Expiry: spent.ExpiresIn(18446744074, time.Second)})
	wantCode(t, "over", err, spent.EExpiryTooLong)
	a, err = f.ledger.Claim(ctx, spent.Claim{Namespace: "min", Key: "clamped", Result: []byte{}, Expiry: spent.ExpiresIn(18446744074, time.Second).Clamped()})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Record.ExpiresAt.Sub(now); got != 2*time.Hour {
		t.Fatalf("clamped EX 18446744074: lives %v, want max_expiry, 2h", got)
	}
}

// FuzzParseExpiresIn: no string makes the parser panic, and what it
// accepts obeys the rule's bounds in every namespace, refused or clamped.
func FuzzParseExpiresIn(f *testing.F) {
	for _, s := range []string{"PT30S", "P1DT6H", "PT0.5S", "P2W", "P99999999999999999999D", "PT0S", "P1Y", "PT1,25S"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		e, err := spent.ParseExpiresIn(s)
		if err != nil {
			if spent.ErrorCode(err) != spent.EInvalid {
				t.Fatalf("got %v, want invalid", err)
			}
			return
		}
		for name, p := range expiryPolicies {
			checkExpiry(t, name, p, now, e, 0)
			checkExpiry(t, name, p, now, e.Clamped(), 0)
		}
	})
}

// FuzzExpiryRule: any integer, any unit, any form: the rule's bounds hold.
func FuzzExpiryRule(f *testing.F) {
	f.Add(int64(18446744074), int64(time.Second), false, false, int64(0))
	f.Add(int64(18446744073710), int64(time.Millisecond), false, true, int64(0))
	f.Add(int64(math.MaxInt64), int64(time.Second), true, true, int64(time.Hour))
	f.Add(int64(-1), int64(time.Millisecond), true, false, int64(0))
	now := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, n, unit int64, at, clamp bool, floor int64) {
		e := spent.ExpiresIn(n, time.Duration(unit))
		if at {
			e = spent.ExpiresAtUnix(n, time.Duration(unit))
		}
		fl := time.Duration(max(floor, 0))
		e = e.AtLeast(fl)
		if clamp {
			e = e.Clamped()
		}
		for name, p := range expiryPolicies {
			checkExpiry(t, name, p, now, e, fl)
		}
	})
}
