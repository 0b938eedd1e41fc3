package strictjson

import (
	"errors"
	"strconv"
	"time"
	"unicode/utf8"
)

// This file holds the appenders that write what the Decoder reads, exactly:
// strings and RFC 3339 times without reflection or allocation.

// AppendString appends s as a JSON string. Invalid UTF-8 is replaced by
// U+FFFD, as encoding/json does; U+2028 and U+2029 are escaped so that the
// output is also valid JavaScript.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// AppendTime appends t in UTC as an RFC 3339 string with as many fractional
// digits as it needs, as time.RFC3339Nano would, without its generality.
func AppendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		b = append(b, '"')
		b = t.AppendFormat(b, time.RFC3339Nano)
		return append(b, '"')
	}
	hour, min, sec := t.Clock()
	b = append(b, '"',
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+month/10), byte('0'+month%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+min/10), byte('0'+min%10), ':',
		byte('0'+sec/10), byte('0'+sec%10))
	b = appendFraction(b, t.Nanosecond())
	return append(b, 'Z', '"')
}

// appendFraction appends ".ddd" for ns nanoseconds, trailing zeros trimmed,
// or nothing for zero.
func appendFraction(b []byte, ns int) []byte {
	if ns == 0 {
		return b
	}
	var digits [9]byte
	for i := 8; i >= 0; i-- {
		digits[i] = byte('0' + ns%10)
		ns /= 10
	}
	n := 9
	for digits[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, digits[:n]...)
}

// ParseTime parses an RFC 3339 time. The form the server writes,
// "2006-01-02T15:04:05.999999999Z", is read directly; anything else goes
// through time.Time.UnmarshalText.
func ParseTime(s []byte) (time.Time, error) {
	if t, ok := parseUTC(s); ok {
		return t, nil
	}
	var t time.Time
	if err := t.UnmarshalText(s); err != nil {
		return time.Time{}, errors.New("not an RFC 3339 time")
	}
	return t, nil
}

func parseUTC(s []byte) (time.Time, bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	num := func(b []byte) int {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(s[0:4]), num(s[5:7]), num(s[8:10])
	hour, min, sec := num(s[11:13]), num(s[14:16]), num(s[17:19])
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	if day > 28 && time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC).Day() != day {
		return time.Time{}, false // no such day in that month
	}
	ns := 0
	switch frac := s[19 : len(s)-1]; {
	case len(frac) == 0:
	case frac[0] != '.' || len(frac) < 2 || len(frac) > 10:
		return time.Time{}, false
	default:
		if ns = num(frac[1:]); ns < 0 {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			ns *= 10
		}
	}
	return time.Date(year, time.Month(month), day, hour, min, sec, ns, time.UTC), true
}

// AppendSeconds appends d as a JSON number of seconds, exact to the
// nanosecond: 28.5 for 28.5 s.
func AppendSeconds(b []byte, d time.Duration) []byte {
	// The magnitude is unsigned so that the most negative duration, whose
	// negation does not fit in an int64, is written too.
	u := uint64(d)
	if d < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/uint64(time.Second), 10)
	return appendFraction(b, int(u%uint64(time.Second)))
}
