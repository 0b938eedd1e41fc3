package doortest

import (
	"math"
	"testing"
	"time"
)

// TestExpect checks the suite's own reading of the expiry rule, which
// every door is then held to, against cases worked out by hand.
func TestExpect(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	invalid, tooLong := Want{Code: "INVALID"}, Want{Code: "EXPIRY_TOO_LONG"}
	ex := ExpiryForm{Name: "EX", Unit: time.Second, Clamps: true, Invalid: invalid}
	in := ExpiryForm{Name: "EXPIRESIN", Unit: time.Second, Invalid: invalid, TooLong: tooLong}
	days := ExpiryForm{Name: "EXPIRESIN (days)", Unit: 24 * time.Hour, Invalid: invalid, TooLong: tooLong}
	at := ExpiryForm{Name: "EXPIRESAT", Unit: time.Millisecond, Instant: true, Invalid: invalid, TooLong: tooLong}
	exat := ExpiryForm{Name: "EXAT", Unit: time.Second, Instant: true, Clamps: true, Invalid: invalid}
	for _, c := range []struct {
		f       ExpiryForm
		n       int64
		refused Want
		life    time.Duration // when accepted as a lifetime
		at      time.Time     // when accepted as an instant
		close   bool
	}{
		{f: ex, n: 0, refused: invalid},
		{f: ex, n: -1, refused: invalid},
		{f: ex, n: math.MinInt64, refused: invalid},
		{f: ex, n: 1, life: MinExpiry},
		{f: ex, n: 7200, life: 2 * time.Hour},
		{f: ex, n: math.MaxInt64, life: MaxExpiry},
		{f: ex, n: 18446744074, life: MaxExpiry}, // wraps uint64 nanoseconds to seconds
		{f: in, n: 18446744074, refused: tooLong},
		{f: in, n: int64(MaxExpiry / time.Second), life: MaxExpiry},
		{f: in, n: int64(MaxExpiry/time.Second) + 1, refused: tooLong},
		{f: days, n: 1, life: 24 * time.Hour},
		{f: days, n: 3, refused: tooLong},
		{f: days, n: math.MaxInt64, refused: tooLong},
		{f: at, n: now.Add(-time.Hour).UnixMilli(), refused: invalid},
		{f: at, n: now.Add(2 * time.Hour).UnixMilli(), at: now.Add(2 * time.Hour)},
		{f: at, n: now.Add(30 * time.Minute).UnixMilli(), life: MinExpiry},
		{f: at, n: now.Add(49 * time.Hour).UnixMilli(), refused: tooLong},
		{f: at, n: now.Add(time.Second).UnixMilli(), close: true},
		{f: at, n: now.Add(MinExpiry).UnixMilli(), close: true},
		{f: exat, n: now.Add(49 * time.Hour).Unix(), life: MaxExpiry},
		{f: exat, n: math.MaxInt64, life: MaxExpiry},
		{f: exat, n: 1 << 30, refused: invalid}, // 2004
	} {
		e := expect(c.f, c.n, now)
		var life time.Duration
		if e.life != nil {
			life = time.Duration(e.life.Int64())
		}
		if e.refused != c.refused || life != c.life || !e.at.Equal(c.at) || e.close != c.close {
			t.Errorf("%s %d: got refused %v, life %v, at %v, close %v; want %v, %v, %v, %v",
				c.f.Name, c.n, e.refused, life, e.at, e.close, c.refused, c.life, c.at, c.close)
		}
	}
}
