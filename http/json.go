package http

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"
)

// This file holds the small, strict JSON reader and the appenders that the
// server and the client use on the hot path instead of encoding/json. The
// wire objects are flat and few, so a hand-written reader costs little code
// and buys three things: no reflection, exact field names (encoding/json
// matches names case-insensitively), and rejection of what encoding/json
// would silently repair (invalid UTF-8, lone surrogates, duplicate fields).

// maxDepth bounds nesting when skipping values the client does not know.
const maxDepth = 64

// b64 is the strict standard base64 encoding used for result bytes.
var b64 = base64.StdEncoding.Strict()

// decoder reads one JSON text from b.
type decoder struct {
	b   []byte
	i   int
	key []byte // scratch for unescaping member names
	val []byte // scratch for unescaping string values
	// names maps known namespace names to themselves, so that reading one
	// does not allocate; nil reads every name afresh.
	names map[string]string
}

// syntaxError reports malformed JSON or a value of the wrong shape.
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string {
	return e.msg + " at offset " + strconv.Itoa(e.off)
}

func (d *decoder) reset(b []byte) {
	d.b, d.i = b, 0
}

func (d *decoder) fail(msg string) error { return &syntaxError{msg: msg, off: d.i} }

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte, or 0 at the end.
func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *decoder) consume(c byte) bool {
	if d.peek() == c {
		d.i++
		return true
	}
	return false
}

// end checks that nothing but white space follows the value.
func (d *decoder) end() error {
	d.ws()
	if d.i != len(d.b) {
		return d.fail("unexpected data after the JSON value")
	}
	return nil
}

// null consumes a JSON null if one comes next.
func (d *decoder) null() bool {
	if d.peek() == 'n' && d.literal("null") {
		return true
	}
	return false
}

func (d *decoder) literal(lit string) bool {
	if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// object reads an object, calling member for each member with its name; member
// must read the value. The name is only valid until member reads the value.
// Callers that care reject duplicate names themselves (see fields).
func (d *decoder) object(member func(name []byte) error) error {
	if !d.consume('{') {
		return d.fail("want an object")
	}
	if d.consume('}') {
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.fail("want a member name")
		}
		name, err := d.rawString(&d.key)
		if err != nil {
			return err
		}
		if !d.consume(':') {
			return d.fail("want ':'")
		}
		if err := member(name); err != nil {
			return err
		}
		if d.consume(',') {
			continue
		}
		if d.consume('}') {
			return nil
		}
		return d.fail("want ',' or '}'")
	}
}

// array reads an array, calling elem for each element; elem must read it.
func (d *decoder) array(elem func(i int) error) error {
	if !d.consume('[') {
		return d.fail("want an array")
	}
	if d.consume(']') {
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		if d.consume(',') {
			continue
		}
		if d.consume(']') {
			return nil
		}
		return d.fail("want ',' or ']'")
	}
}

// rawString reads a string and returns its unescaped bytes, which alias the
// input or *scratch and are valid until the next read into the same scratch.
func (d *decoder) rawString(scratch *[]byte) ([]byte, error) {
	if !d.consume('"') {
		return nil, d.fail("want a string")
	}
	start := d.i
	ascii := true
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			d.i++
			continue
		}
		switch {
		case c == '"':
			s := d.b[start:d.i]
			if !ascii && !utf8.Valid(s) {
				return nil, &syntaxError{msg: "invalid UTF-8 in string", off: start}
			}
			d.i++
			return s, nil
		case c == '\\':
			return d.slowString(start, scratch)
		case c < 0x20:
			return nil, d.fail("control character in string")
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.i++
	}
	return nil, d.fail("unterminated string")
}

// slowString finishes a string that holds escapes, from d.i at the first
// backslash.
func (d *decoder) slowString(start int, scratch *[]byte) ([]byte, error) {
	out := append((*scratch)[:0], d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			*scratch = out
			if !utf8.Valid(out) {
				return nil, &syntaxError{msg: "invalid UTF-8 in string", off: start}
			}
			return out, nil
		case c < 0x20:
			return nil, d.fail("control character in string")
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return nil, d.fail("unterminated string")
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return nil, d.fail("bad \\u escape")
			}
			if r >= 0xD800 && r < 0xDC00 {
				// A high surrogate must be followed by a low one.
				if !d.literal(`\u`) {
					return nil, d.fail("lone surrogate in \\u escape")
				}
				lo, ok := d.hex4()
				if !ok || lo < 0xDC00 || lo >= 0xE000 {
					return nil, d.fail("lone surrogate in \\u escape")
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			} else if r >= 0xDC00 && r < 0xE000 {
				return nil, d.fail("lone surrogate in \\u escape")
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, d.fail("bad escape in string")
		}
	}
	return nil, d.fail("unterminated string")
}

func (d *decoder) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.i += 4
	return r, true
}

// str reads a string value.
func (d *decoder) str() (string, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// namespace reads a namespace name, interned when known.
func (d *decoder) namespace() (string, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return "", err
	}
	if s, ok := d.names[string(b)]; ok {
		return s, nil
	}
	return string(b), nil
}

// strLike reads a string value, returning like itself when they are equal,
// which saves an allocation when an answer repeats what the request said.
func (d *decoder) strLike(like string) (string, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return "", err
	}
	if string(b) == like {
		return like, nil
	}
	return string(b), nil
}

// hexBytes reads a string of hex digits, as long as want bytes when want > 0.
func (d *decoder) hexBytes(want int) ([]byte, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return nil, err
	}
	if want > 0 && len(b) != 2*want {
		return nil, errors.New("want " + strconv.Itoa(2*want) + " hex digits, got " + strconv.Itoa(len(b)))
	}
	out := make([]byte, len(b)/2)
	if _, err := hex.Decode(out, b); err != nil {
		return nil, errors.New("not hex")
	}
	return out, nil
}

// base64Bytes reads a string of standard, padded base64 and returns the bytes,
// never nil (an empty string is an empty result, not an absent one).
func (d *decoder) base64Bytes() ([]byte, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return nil, err
	}
	for _, c := range b {
		if c == '\r' || c == '\n' {
			return nil, errors.New("not standard base64: line break")
		}
	}
	out := make([]byte, b64.DecodedLen(len(b)))
	n, err := b64.Decode(out, b)
	if err != nil {
		return nil, errors.New("not standard base64")
	}
	return out[:n], nil
}

// timestamp reads an RFC 3339 time.
func (d *decoder) timestamp() (time.Time, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return time.Time{}, err
	}
	return parseTime(b)
}

// boolean reads true or false.
func (d *decoder) boolean() (bool, error) {
	switch d.peek() {
	case 't':
		if d.literal("true") {
			return true, nil
		}
	case 'f':
		if d.literal("false") {
			return false, nil
		}
	}
	return false, d.fail("want true or false")
}

// number reads a JSON number and returns its text.
func (d *decoder) number() ([]byte, error) {
	d.ws()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.i < len(d.b) && '1' <= d.b[d.i] && d.b[d.i] <= '9':
		d.digits()
	default:
		return nil, d.fail("want a number")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if d.digits() == 0 {
			return nil, d.fail("want digits after '.'")
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return nil, d.fail("want digits in exponent")
		}
	}
	return d.b[start:d.i], nil
}

func (d *decoder) digits() int {
	n := 0
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}

// integer reads a number that must be a whole int64 written without a
// fraction or exponent.
func (d *decoder) integer() (int64, error) {
	b, err := d.number()
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, errors.New("want an integer")
	}
	return n, nil
}

// skip reads and discards any value.
func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return d.fail("nested too deep")
	}
	switch d.peek() {
	case '{':
		return d.object(func([]byte) error { return d.skip(depth + 1) })
	case '[':
		return d.array(func(int) error { return d.skip(depth + 1) })
	case '"':
		_, err := d.rawString(&d.val)
		return err
	case 't', 'f':
		_, err := d.boolean()
		return err
	case 'n':
		if d.null() {
			return nil
		}
	default:
		_, err := d.number()
		return err
	}
	return d.fail("want a value")
}

// appendString appends s as a JSON string. Invalid UTF-8 is replaced by
// U+FFFD, as encoding/json does; U+2028 and U+2029 are escaped so that the
// output is also valid JavaScript.
func appendString(b []byte, s string) []byte {
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

// appendTime appends t in UTC as an RFC 3339 string with as many fractional
// digits as it needs, as time.RFC3339Nano would, without its generality.
func appendTime(b []byte, t time.Time) []byte {
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

// parseTime parses an RFC 3339 time. The form the server writes,
// "2006-01-02T15:04:05.999999999Z", is read directly; anything else goes
// through time.Time.UnmarshalText.
func parseTime(s []byte) (time.Time, error) {
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

// appendSeconds appends d as a JSON number of seconds, exact to the
// nanosecond: 28.5 for 28.5 s.
func appendSeconds(b []byte, d time.Duration) []byte {
	if d < 0 {
		b = append(b, '-')
		d = -d
	}
	b = strconv.AppendInt(b, int64(d/time.Second), 10)
	return appendFraction(b, int(d%time.Second))
}
