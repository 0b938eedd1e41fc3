package doortest

import (
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"
)

// overflowIntegers are the integers every expiry form is tried with: zero,
// ±1, every power of two, the int64 extremes, and the values where a
// product by a unit passes int64 (9223372036 s and 9223372036854 ms are
// the last that fit in a time.Duration; 18446744074 s wraps uint64
// nanoseconds to a few seconds).
func overflowIntegers() []int64 {
	v := []int64{0, 1, -1, 2, -2, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1,
		18446744074, 18446744073, 9223372036, 9223372037, 9223372036854, 9223372036855, 9223372036854775, 9223372036854776,
		-9223372036, -18446744074, 1<<31 - 1, 1<<32 - 1, 1<<63 - 1}
	for k := 2; k < 63; k++ {
		v = append(v, 1<<k)
	}
	for _, k := range []int{16, 31, 32, 33, 62} {
		v = append(v, -(1 << k))
	}
	return v
}

// relativeIntegers are integers of f near now: lifetimes, or instants
// from now, under min_expiry, between the bounds, and past max_expiry;
// and, for an instant, one in the past.
func relativeIntegers(f ExpiryForm, now time.Time) []int64 {
	var v []int64
	for _, d := range []time.Duration{30 * time.Minute, 2 * time.Hour, 47 * time.Hour, 49 * time.Hour, 400 * 24 * time.Hour, -time.Hour} {
		if f.Instant {
			v = append(v, now.Add(d).UnixNano()/int64(f.Unit))
		} else if d > 0 {
			v = append(v, int64(d/f.Unit))
		}
	}
	return v
}

// margin is how close to a bound (now, min_expiry, max_expiry) an
// integer may fall before the suite skips it as too close to call: the
// client's clock and the server's read the same time a little apart.
const margin = 5 * time.Second

// tolerance is how far a record's expires_at may lie outside the span the
// suite computes for it: the wire's precision (milliseconds, seconds) and
// the rounding of a lifetime.
const tolerance = time.Second

// expectation is what the expiry rule makes of an integer in a form, for a
// claim sent at t0 and answered at t1.
type expectation struct {
	refused Want      // non-zero: the claim is refused
	life    *big.Int  // the lifetime the record gets, in ns (nil: an instant)
	at      time.Time // the instant the record gets, when life is nil
	close   bool      // the integer lies too near a bound to call
}

// expect applies the ledger's one expiry rule (docs/resp.md, "Expiry"):
// not in the future is refused; past max_expiry is capped (a form that
// clamps) or refused; under min_expiry is raised to it; anything else is
// kept as asked.
func expect(f ExpiryForm, n int64, now time.Time) expectation {
	if n <= 0 {
		return expectation{refused: f.Invalid}
	}
	asked := new(big.Int).Mul(big.NewInt(n), big.NewInt(int64(f.Unit)))
	life := new(big.Int).Set(asked)
	if f.Instant {
		life.Sub(asked, big.NewInt(now.UnixNano()))
	}
	dur := func(d time.Duration) *big.Int { return big.NewInt(int64(d)) }
	near := func(d time.Duration) bool {
		diff := new(big.Int).Sub(life, dur(d))
		return diff.CmpAbs(dur(margin)) < 0
	}
	if f.Instant && (near(0) || near(MinExpiry) || near(MaxExpiry)) {
		// (A lifetime is compared with the bounds exactly; an instant
		// depends on when the server reads its clock.)
		return expectation{close: true}
	}
	switch {
	case life.Sign() <= 0:
		return expectation{refused: f.Invalid}
	case life.Cmp(dur(MaxExpiry)) > 0 && !f.Clamps:
		return expectation{refused: f.TooLong}
	case life.Cmp(dur(MaxExpiry)) > 0:
		return expectation{life: dur(MaxExpiry)}
	case life.Cmp(dur(MinExpiry)) < 0:
		return expectation{life: dur(MinExpiry)}
	case f.Instant:
		return expectation{at: time.Unix(0, 0).Add(time.Duration(asked.Int64()))}
	}
	return expectation{life: life}
}

// testExpiryOverflow claims a new key in NSBounded (min_expiry 1h,
// max_expiry 48h) for every expiry form the door takes and every integer
// of overflowIntegers and relativeIntegers. An accepted claim's record,
// read back through the door, expires as the one rule says: the instant
// or lifetime asked for, raised to min_expiry, capped at max_expiry when
// the form clamps; so it always lives between the two. A refused claim is
// refused with the form's documented answer and leaves no record.
func testExpiryOverflow(t *testing.T, bin string, d Door) {
	c := claimer(t, d)
	forms := c.ExpiryForms()
	if len(forms) == 0 {
		t.Fatalf("door %s takes no expiry forms", d.Name())
	}
	s := startServer(t, bin, d, "")
	t.Run("group", func(t *testing.T) {
		for _, f := range forms {
			t.Run(f.Name, func(t *testing.T) {
				t.Parallel()
				cl := dial(t, c, s.Addr, ClaimToken)
				ints := append(overflowIntegers(), relativeIntegers(f, time.Now())...)
				var accepted, refused, inexpressible, tooClose, failures int
				for i, n := range ints {
					if failures >= 10 {
						t.Fatalf("stopping after %d failures", failures)
					}
					key := fmt.Sprintf("expiry-%s-%d", f.Name, i)
					t0 := time.Now()
					e := expect(f, n, t0)
					if e.close {
						tooClose++
						continue
					}
					ctx, cancel := opCtx()
					r, err := cl.Claim(ctx, Claim{Namespace: NSBounded, Key: key, Value: []byte("v"), Expiry: &Expiry{Form: f.Name, N: n}})
					cancel()
					t1 := time.Now()
					if err == ErrInexpressible {
						inexpressible++
						continue
					}
					if err != nil {
						t.Fatalf("%s %d: %v", f.Name, n, err)
					}
					ctx, cancel = opCtx()
					rec, found, err := cl.Get(ctx, NSBounded, key)
					cancel()
					if err != nil {
						t.Fatalf("%s %d: reading the record: %v", f.Name, n, err)
					}
					if !e.refused.IsZero() {
						refused++
						switch {
						case !e.refused.Matches(r):
							failures++
							t.Errorf("%s %d: got %s, want %s", f.Name, n, show(r), showWant(e.refused))
						case found:
							failures++
							t.Errorf("%s %d: refused, yet the key has a record expiring at %v; want nothing claimed", f.Name, n, rec.ExpiresAt)
						}
						continue
					}
					accepted++
					lo, hi := e.at, e.at
					if e.life != nil {
						life := time.Duration(e.life.Int64())
						lo, hi = t0.Add(life), t1.Add(life)
					}
					switch {
					case r.Outcome != "fresh":
						failures++
						t.Errorf("%s %d: got %s, want fresh", f.Name, n, show(r))
					case !found:
						failures++
						t.Errorf("%s %d: fresh, and then no record", f.Name, n)
					case rec.ExpiresAt.Before(lo.Add(-tolerance)) || rec.ExpiresAt.After(hi.Add(tolerance)):
						failures++
						t.Errorf("%s %d: the record lives %v (expires at %v), want %v to %v (between min_expiry %v and max_expiry %v)",
							f.Name, n, rec.ExpiresAt.Sub(t1).Round(time.Second), rec.ExpiresAt.UTC(), lo.Sub(t0).Round(time.Second), hi.Sub(t0).Round(time.Second), MinExpiry, MaxExpiry)
					}
				}
				t.Logf("%s: %d integers: %d accepted, %d refused, %d the form cannot carry, %d too near a bound to call", f.Name, len(ints), accepted, refused, inexpressible, tooClose)
				if accepted == 0 || refused == 0 {
					t.Fatalf("%s: %d accepted, %d refused: want both kinds among the integers", f.Name, accepted, refused)
				}
			})
		}
	})
}
