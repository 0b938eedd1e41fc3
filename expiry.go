package spent

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Expiry is a claim's own expiry as its client sent it: a lifetime from now
// or an instant, as any integer in any unit. The ledger turns it into the
// record's expires_at with one rule for every front end ([Policy.ExpiresAt]),
// so that no integer a client can send yields a record that lives less than
// its namespace's [Policy.MinExpiry] or longer than its max_expiry, and no
// arithmetic on it can wrap. The zero Expiry asks for the namespace's
// retention.
//
// Build one with [ExpiresIn] (Redis's EX and PX), [ExpiresAtUnix] (EXAT,
// PXAT, SPENT.CLAIM's EXPIRESAT), [ExpiresAtTime] (the HTTP API's
// expires_at) or [ParseExpiresIn] (an ISO 8601 duration, the HTTP API's
// expires_in).
type Expiry struct {
	kind  expiryKind
	in    time.Duration // kindIn: the lifetime, saturated at math.MaxInt64
	at    time.Time     // kindAt: the instant
	over  bool          // the value did not fit: further off than any limit
	past  bool          // the value was zero or negative
	clamp bool
	floor time.Duration
	what  string // the value as the client wrote it, for error messages
}

type expiryKind uint8

const (
	kindNone expiryKind = iota
	kindIn
	kindAt
)

// IsZero reports whether e asks for nothing (the namespace's retention).
func (e Expiry) IsZero() bool { return e.kind == kindNone }

// String returns the value as the client wrote it.
func (e Expiry) String() string { return e.what }

// Lifetime returns the lifetime e asks for, when it asks for one (a
// lifetime too large for a time.Duration is math.MaxInt64, and one of zero
// or less is 0).
func (e Expiry) Lifetime() (time.Duration, bool) {
	return e.in, e.kind == kindIn
}

// Instant returns the instant e asks for, when it asks for one; ok is
// false for an instant past what time.Time holds (over every limit) and
// for one at or before the Unix epoch.
func (e Expiry) Instant() (t time.Time, ok bool) {
	return e.at, e.kind == kindAt && !e.over && !e.past
}

// Local reports whether e carries what only a front end in the server's
// process may ask ([Expiry.Clamped], [Expiry.AtLeast]): the HTTP client
// refuses to send it.
func (e Expiry) Local() bool { return e.clamp || e.floor > 0 }

// ExpiresIn asks for a lifetime of n units (time.Second for Redis's EX,
// time.Millisecond for PX) from the claim's time. Any n is accepted here: a
// product too large for a time.Duration saturates (and is then over any
// max_expiry), and n of zero or less is refused by the rule as not in the
// future.
func ExpiresIn(n int64, unit time.Duration) Expiry {
	e := Expiry{kind: kindIn, what: strconv.FormatInt(n, 10) + " × " + unit.String()}
	if n <= 0 || unit <= 0 {
		e.past = true
		return e
	}
	hi, lo := bits.Mul64(uint64(n), uint64(unit))
	if hi != 0 || lo > math.MaxInt64 {
		e.in, e.over = math.MaxInt64, true
		return e
	}
	e.in = time.Duration(lo)
	return e
}

// maxUnixSeconds is the last second time.Unix represents without its
// internal arithmetic wrapping (about 292 billion years from now); any
// instant past it is treated as being over every limit.
const maxUnixSeconds = math.MaxInt64 - 62135596800 - 1

// ExpiresAtUnix asks for the instant n units (time.Second for EXAT,
// time.Millisecond for PXAT) after the Unix epoch. Any n is accepted: an
// instant past what time.Time can hold saturates (and is over any
// max_expiry), and one at or before the claim's time is refused by the rule
// as not in the future.
func ExpiresAtUnix(n int64, unit time.Duration) Expiry {
	e := Expiry{kind: kindAt, what: strconv.FormatInt(n, 10) + " × " + unit.String() + " since the Unix epoch"}
	if unit <= 0 || n <= 0 {
		e.past = true
		return e
	}
	if unit%time.Second == 0 {
		per := int64(unit / time.Second)
		if n > maxUnixSeconds/per {
			e.over = true
			return e
		}
		e.at = time.Unix(n*per, 0)
		return e
	}
	if unit < time.Second && time.Second%unit == 0 {
		// A fraction of a second (ms, µs, ns): whole seconds, then the rest.
		per := int64(time.Second / unit)
		e.at = time.Unix(n/per, n%per*int64(unit))
		return e
	}
	// An odd unit: go through nanoseconds, with saturation.
	hi, lo := bits.Mul64(uint64(n), uint64(unit))
	if hi != 0 || lo > math.MaxInt64 {
		e.over = true
		return e
	}
	e.at = time.Unix(int64(lo)/int64(time.Second), int64(lo)%int64(time.Second))
	return e
}

// ExpiresAtTime asks for the instant t. The zero time asks for nothing.
func ExpiresAtTime(t time.Time) Expiry {
	if t.IsZero() {
		return Expiry{}
	}
	return Expiry{kind: kindAt, at: t, what: t.Format(time.RFC3339Nano)}
}

// Clamped returns e, with a lifetime outside the namespace's range clamped
// into it rather than refused: a Redis client expects any SET … EX to be
// taken, so the RESP listener clamps. Other front ends refuse an expiry
// beyond max_expiry (EExpiryTooLong), which tells the client its credential
// outlives what the ledger promises to remember. A lifetime under the
// minimum is raised in both cases: remembering a key longer is harmless.
func (e Expiry) Clamped() Expiry {
	e.clamp = true
	return e
}

// AtLeast returns e with a minimum lifetime of d of the front end's own
// (a RESP prefix's min_expiry), raised over the namespace's; it never
// exceeds the namespace's max_expiry.
func (e Expiry) AtLeast(d time.Duration) Expiry {
	e.floor = max(e.floor, d)
	return e
}

// ExpiresAt applies the one expiry rule of the ledger to e at now, and
// returns the record's expires_at:
//
//  1. No expiry asked for: now + Retention.
//  2. An instant at or before now, or a lifetime of zero or less: EInvalid
//     (not in the future).
//  3. A lifetime longer than [Policy.ExpiryLimit] (max_expiry), or a value
//     too large to compute: EExpiryTooLong, or max_expiry when e is
//     [Expiry.Clamped].
//  4. A lifetime shorter than MinExpiry (or e's own floor, see
//     [Expiry.AtLeast]): raised to it.
//
// So every record lives at least min(floor, max_expiry) and at most
// max_expiry from now, whatever integer the client sent.
func (p Policy) ExpiresAt(now time.Time, e Expiry) (time.Time, error) {
	if e.kind == kindNone {
		return now.Add(p.Retention), nil
	}
	limit := p.ExpiryLimit()
	var life time.Duration
	switch {
	case e.past:
		return time.Time{}, Errorf(EInvalid, "expiry %s is not in the future", e.what)
	case e.over:
		life = math.MaxInt64
	case e.kind == kindIn:
		life = e.in
	default:
		if !e.at.After(now) {
			return time.Time{}, Errorf(EInvalid, "expires_at %s is not in the future", e.at.Format(time.RFC3339Nano))
		}
		life = e.at.Sub(now) // saturates
	}
	if life > limit {
		if !e.clamp {
			what := e.what
			if e.kind == kindAt && !e.over {
				what = e.at.Format(time.RFC3339Nano)
			}
			away := "further than any duration"
			if life < math.MaxInt64 {
				away = life.Round(time.Second).String() + " away"
			}
			return time.Time{}, Errorf(EExpiryTooLong, "expires_at %s is %s: the namespace keeps a key at most %v (its max_expiry); ask for an earlier expiry, or raise the namespace's max_expiry", what, away, limit)
		}
		life = limit
	}
	if floor := min(max(p.MinExpiry, e.floor), limit); life < floor {
		life = floor
	}
	if e.kind == kindAt && !e.over && life == e.at.Sub(now) {
		return e.at, nil // exactly the instant asked for
	}
	return now.Add(life), nil
}

// ParseExpiresIn parses an ISO 8601 duration (the HTTP API's expires_in):
// "P" then weeks, days, and after "T" hours, minutes and seconds, each an
// unsigned integer with its letter, in that order, the seconds optionally
// with a fraction ("PT30S", "P1DT6H", "PT0.5S", "P2W"). Years and months are
// refused, since their length depends on the calendar: give days. A value
// too large for a time.Duration saturates, and is then over any
// max_expiry; zero is refused by the rule as not in the future.
func ParseExpiresIn(s string) (Expiry, error) {
	bad := func(why string) (Expiry, error) {
		return Expiry{}, Errorf(EInvalid, "expires_in %s: %s; want an ISO 8601 duration such as \"PT30S\", \"PT15M\" or \"P1DT6H\"", QuoteInput(s), why)
	}
	if len(s) > 64 {
		return bad("longer than 64 bytes")
	}
	if len(s) < 3 || s[0] != 'P' {
		return bad("no P and value")
	}
	var sum nanoSum
	last := -1 // the place in isoUnits of the last unit read
	inTime, any := false, false
	for i := 1; i < len(s); {
		if s[i] == 'T' {
			if inTime || i == len(s)-1 {
				return bad("a misplaced T")
			}
			inTime, last = true, 2
			i++
			continue
		}
		c, why := isoComponent(s, i)
		if why != "" {
			return bad(why)
		}
		if c.letter == 'Y' || (c.letter == 'M' && !inTime) {
			return bad("years and months have no fixed length; give days")
		}
		pos := strings.IndexByte(isoUnits, c.letter)
		if pos < 0 || c.letter == 'T' || pos <= last || (pos >= 3) != inTime {
			return bad("units out of order or unknown (W, D, then T, H, M, S)")
		}
		if c.frac != "" && c.letter != 'S' {
			return bad("only seconds may have a fraction")
		}
		last, any = pos, true
		sum.addDigits(c.digits, isoUnitLen[pos])
		sum.addFraction(c.frac)
		i = c.next
	}
	if !any {
		return bad("no components")
	}
	e := Expiry{kind: kindIn, what: s}
	switch {
	case sum.over:
		e.in, e.over = math.MaxInt64, true
	case sum.total == 0:
		e.past = true
	default:
		e.in = time.Duration(sum.total)
	}
	return e, nil
}

// isoUnits are the unit letters of an ISO 8601 duration that ParseExpiresIn
// takes, in the order they must come (H, M and S after the T), and
// isoUnitLen their lengths.
const isoUnits = "WDTHMS"

var isoUnitLen = [len(isoUnits)]time.Duration{7 * 24 * time.Hour, 24 * time.Hour, 0, time.Hour, time.Minute, time.Second}

// isoPart is one component of an ISO 8601 duration: its digits, the digits
// of its fraction (none when empty), its unit letter, and where the next
// one begins.
type isoPart struct {
	digits, frac string
	letter       byte
	next         int
}

// isoComponent reads the component of s that begins at i, or says what is
// wrong with it.
func isoComponent(s string, i int) (isoPart, string) {
	digitsFrom := func(i int) int {
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i
	}
	j := digitsFrom(i)
	if j == i {
		return isoPart{}, "a component without digits"
	}
	c := isoPart{digits: s[i:j]}
	if j < len(s) && (s[j] == '.' || s[j] == ',') {
		k := digitsFrom(j + 1)
		if k == j+1 {
			return isoPart{}, "a fraction without digits"
		}
		c.frac, j = s[j+1:k], k
	}
	if j == len(s) {
		return isoPart{}, "a number without its unit letter"
	}
	c.letter, c.next = s[j], j+1
	return c, ""
}

// nanoSum adds up a duration in nanoseconds, and says whether it passed
// math.MaxInt64 (then it stops adding).
type nanoSum struct {
	total uint64
	over  bool
}

// add adds n units of unit.
func (t *nanoSum) add(n uint64, unit time.Duration) {
	if t.over {
		return
	}
	hi, lo := bits.Mul64(n, uint64(unit))
	sum, carry := bits.Add64(t.total, lo, 0)
	if hi != 0 || carry != 0 || sum > math.MaxInt64 {
		t.over = true
		return
	}
	t.total = sum
}

// addDigits adds the decimal digits of a component, in unit; more digits
// than 64 bits hold are more than any duration.
func (t *nanoSum) addDigits(digits string, unit time.Duration) {
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		t.over = true
		return
	}
	t.add(n, unit)
}

// addFraction adds a fraction of a second given by its digits, to the
// nanosecond (further digits are dropped).
func (t *nanoSum) addFraction(frac string) {
	if frac == "" {
		return
	}
	frac = frac[:min(len(frac), 9)]
	f, _ := strconv.ParseUint(frac, 10, 64)
	for range 9 - len(frac) {
		f *= 10
	}
	t.add(f, time.Nanosecond)
}
