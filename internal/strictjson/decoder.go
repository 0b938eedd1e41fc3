package strictjson

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects.
const MaxDepth = 64

// B64 is the strict standard base64 encoding (RFC 4648 §4, padded) that the
// HTTP API uses for bytes.
var B64 = base64.StdEncoding.Strict()

// Errors a member of an object is refused with, inside a *MemberError.
var (
	// ErrDuplicate is returned when an object has a member twice.
	ErrDuplicate = errors.New("given twice")
	// ErrUnknown is returned for a member the reader does not know.
	ErrUnknown = errors.New("unknown member")
	// ErrCase is returned for a member whose name differs only in case
	// from a known one, even where unknown members are skipped.
	ErrCase = errors.New("differs in case from a known member")
)

// SyntaxError reports malformed JSON or a value of the wrong shape, with the
// byte offset where reading stopped.
type SyntaxError struct {
	// Msg says what was wrong.
	Msg string
	// Offset is where in the input.
	Offset int
}

// Error returns the message and the offset.
func (e *SyntaxError) Error() string {
	return e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// MemberError reports a member that is refused: unknown (ErrUnknown), given
// twice (ErrDuplicate), or whose value could not be read (the reader's
// error).
type MemberError struct {
	// Name is the member's name, unescaped.
	Name string
	// Err is the reason.
	Err error
}

// Error returns the name and the reason.
func (e *MemberError) Error() string {
	return strconv.Quote(e.Name) + ": " + e.Err.Error()
}

// Unwrap returns the reason.
func (e *MemberError) Unwrap() error { return e.Err }

// Decoder reads one JSON text from a byte slice, value by value. It refuses
// duplicate member names in every object it reads and invalid UTF-8 in every
// string; the caller reads the values it expects, in order, and calls End
// last. Its zero value is ready for Reset. A Decoder keeps its scratch
// buffers across Resets, so that pooled decoders do not allocate.
type Decoder struct {
	b   []byte
	i   int
	key []byte // scratch for unescaping member names
	val []byte // scratch for unescaping string values
	// seen holds the member names of the objects being read, each as a
	// 4-byte length and the name, for the duplicate check.
	seen []byte
	// Intern maps strings the caller expects to themselves, so that
	// reading one with Interned does not allocate; nil reads every string
	// afresh.
	Intern map[string]string
}

// Reset makes d read b from its start.
func (d *Decoder) Reset(b []byte) {
	d.b, d.i, d.seen = b, 0, d.seen[:0]
}

// Offset returns how many bytes of the input were read.
func (d *Decoder) Offset() int { return d.i }

// Fail returns a *SyntaxError with msg at the current offset.
func (d *Decoder) Fail(msg string) error { return &SyntaxError{Msg: msg, Offset: d.i} }

func (d *Decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// Peek skips white space and returns the next byte, or 0 at the end.
func (d *Decoder) Peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *Decoder) consume(c byte) bool {
	if d.Peek() == c {
		d.i++
		return true
	}
	return false
}

// End checks that nothing but white space follows the value.
func (d *Decoder) End() error {
	d.ws()
	if d.i != len(d.b) {
		return d.Fail("unexpected data after the JSON value")
	}
	return nil
}

// Null consumes a JSON null if one comes next.
func (d *Decoder) Null() bool {
	return d.Peek() == 'n' && d.literal("null")
}

func (d *Decoder) literal(lit string) bool {
	if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// linearNames is how many members of one object are checked for duplicates
// by comparing with each earlier name; past it, a map is built.
const linearNames = 32

// Object reads an object, calling member for each member with its name;
// member must read the value. The name is only valid until member reads the
// value. A name given twice is refused with a *MemberError wrapping
// ErrDuplicate before member is called for it.
func (d *Decoder) Object(member func(name []byte) error) error {
	if !d.consume('{') {
		return d.Fail("want an object")
	}
	if d.consume('}') {
		return nil
	}
	base := len(d.seen)
	defer func() { d.seen = d.seen[:base] }()
	var many map[string]struct{} // set once the object has many members
	for n := 0; ; n++ {
		if d.Peek() != '"' {
			return d.Fail("want a member name")
		}
		name, err := d.rawString(&d.key)
		if err != nil {
			return err
		}
		if d.repeated(base, n, name, &many) {
			return &MemberError{Name: string(name), Err: ErrDuplicate}
		}
		if !d.consume(':') {
			return d.Fail("want ':'")
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
		return d.Fail("want ',' or '}'")
	}
}

// repeated reports whether name is among the earlier names of the object
// whose names start at d.seen[base:], and records it. n is the number of
// earlier names.
func (d *Decoder) repeated(base, n int, name []byte, many *map[string]struct{}) bool {
	if *many != nil {
		if _, ok := (*many)[string(name)]; ok {
			return true
		}
		(*many)[string(name)] = struct{}{}
		return false
	}
	for p := base; p < len(d.seen); {
		l := int(d.seen[p])<<24 | int(d.seen[p+1])<<16 | int(d.seen[p+2])<<8 | int(d.seen[p+3])
		if bytes.Equal(d.seen[p+4:p+4+l], name) {
			return true
		}
		p += 4 + l
	}
	if n < linearNames {
		l := len(name)
		d.seen = append(d.seen, byte(l>>24), byte(l>>16), byte(l>>8), byte(l))
		d.seen = append(d.seen, name...)
		return false
	}
	*many = make(map[string]struct{}, 2*linearNames)
	for p := base; p < len(d.seen); {
		l := int(d.seen[p])<<24 | int(d.seen[p+1])<<16 | int(d.seen[p+2])<<8 | int(d.seen[p+3])
		(*many)[string(d.seen[p+4:p+4+l])] = struct{}{}
		p += 4 + l
	}
	(*many)[string(name)] = struct{}{}
	return false
}

// Members reads an object whose members are listed in names (at most 64),
// refusing unknown ones with a *MemberError wrapping ErrUnknown, and
// duplicates as Object does. A member whose value is null counts as absent,
// for languages whose encoders write it. read reads the value of names[i];
// an error it returns is wrapped in a *MemberError naming the member unless
// it is a *MemberError already. Members returns the set of members present,
// bit i standing for names[i].
func (d *Decoder) Members(names []string, read func(i int) error) (present uint64, err error) {
	err = d.Object(func(name []byte) error {
		i := 0
		for i < len(names) && names[i] != string(name) {
			i++
		}
		if i == len(names) {
			return &MemberError{Name: string(name), Err: ErrUnknown}
		}
		if d.Null() {
			return nil
		}
		present |= 1 << i
		if err := read(i); err != nil {
			var me *MemberError
			if errors.As(err, &me) {
				return err
			}
			return &MemberError{Name: names[i], Err: err}
		}
		return nil
	})
	return present, err
}

// Array reads an array, calling elem for each element; elem must read it.
func (d *Decoder) Array(elem func(i int) error) error {
	if !d.consume('[') {
		return d.Fail("want an array")
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
		return d.Fail("want ',' or ']'")
	}
}

// Bytes reads a string and returns its unescaped bytes, which alias the
// input or the decoder's scratch and are valid until the next string read.
func (d *Decoder) Bytes() ([]byte, error) {
	return d.rawString(&d.val)
}

// rawString reads a string and returns its unescaped bytes, which alias the
// input or *scratch and are valid until the next read into the same scratch.
func (d *Decoder) rawString(scratch *[]byte) ([]byte, error) {
	if !d.consume('"') {
		return nil, d.Fail("want a string")
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
				return nil, &SyntaxError{Msg: "invalid UTF-8 in string", Offset: start}
			}
			d.i++
			return s, nil
		case c == '\\':
			return d.slowString(start, scratch)
		case c < 0x20:
			return nil, d.Fail("control character in string")
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.i++
	}
	return nil, d.Fail("unterminated string")
}

// slowString finishes a string that holds escapes, from d.i at the first
// backslash.
func (d *Decoder) slowString(start int, scratch *[]byte) ([]byte, error) {
	out := append((*scratch)[:0], d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			*scratch = out
			if !utf8.Valid(out) {
				return nil, &SyntaxError{Msg: "invalid UTF-8 in string", Offset: start}
			}
			return out, nil
		case c < 0x20:
			return nil, d.Fail("control character in string")
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return nil, d.Fail("unterminated string")
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
				return nil, d.Fail("bad \\u escape")
			}
			if r >= 0xD800 && r < 0xDC00 {
				// A high surrogate must be followed by a low one.
				if !d.literal(`\u`) {
					return nil, d.Fail("lone surrogate in \\u escape")
				}
				lo, ok := d.hex4()
				if !ok || lo < 0xDC00 || lo >= 0xE000 {
					return nil, d.Fail("lone surrogate in \\u escape")
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			} else if r >= 0xDC00 && r < 0xE000 {
				return nil, d.Fail("lone surrogate in \\u escape")
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, d.Fail("bad escape in string")
		}
	}
	return nil, d.Fail("unterminated string")
}

func (d *Decoder) hex4() (rune, bool) {
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

// String reads a string value.
func (d *Decoder) String() (string, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Interned reads a string value, returning the string of d.Intern when it
// holds one equal to it.
func (d *Decoder) Interned() (string, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return "", err
	}
	if s, ok := d.Intern[string(b)]; ok {
		return s, nil
	}
	return string(b), nil
}

// StringLike reads a string value, returning like itself when they are
// equal, which saves an allocation when an answer repeats what the request
// said.
func (d *Decoder) StringLike(like string) (string, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return "", err
	}
	if string(b) == like {
		return like, nil
	}
	return string(b), nil
}

// Hex reads a string of hex digits, as long as want bytes when want > 0.
func (d *Decoder) Hex(want int) ([]byte, error) {
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

// Base64 reads a string of standard, padded base64 and returns the bytes,
// never nil (an empty string is an empty result, not an absent one).
func (d *Decoder) Base64() ([]byte, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return nil, err
	}
	for _, c := range b {
		if c == '\r' || c == '\n' {
			return nil, errors.New("not standard base64: line break")
		}
	}
	out := make([]byte, B64.DecodedLen(len(b)))
	n, err := B64.Decode(out, b)
	if err != nil {
		return nil, errors.New("not standard base64")
	}
	return out[:n], nil
}

// Time reads an RFC 3339 time.
func (d *Decoder) Time() (time.Time, error) {
	b, err := d.rawString(&d.val)
	if err != nil {
		return time.Time{}, err
	}
	return ParseTime(b)
}

// Bool reads true or false.
func (d *Decoder) Bool() (bool, error) {
	switch d.Peek() {
	case 't':
		if d.literal("true") {
			return true, nil
		}
	case 'f':
		if d.literal("false") {
			return false, nil
		}
	}
	return false, d.Fail("want true or false")
}

// Number reads a JSON number and returns its text, which aliases the input.
func (d *Decoder) Number() ([]byte, error) {
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
		return nil, d.Fail("want a number")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if d.digits() == 0 {
			return nil, d.Fail("want digits after '.'")
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return nil, d.Fail("want digits in exponent")
		}
	}
	return d.b[start:d.i], nil
}

func (d *Decoder) digits() int {
	n := 0
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}

// Int reads a number that must be a whole int64 written without a fraction
// or exponent.
func (d *Decoder) Int() (int64, error) {
	b, err := d.Number()
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, errors.New("want an integer")
	}
	return n, nil
}

// Skip reads and discards any value, by the same rules as the rest: no
// duplicate members, valid UTF-8. depth is the nesting the value is at;
// past MaxDepth it fails.
func (d *Decoder) Skip(depth int) error {
	if depth > MaxDepth {
		return d.Fail("nested too deep")
	}
	switch d.Peek() {
	case '{':
		return d.Object(func([]byte) error { return d.Skip(depth + 1) })
	case '[':
		return d.Array(func(int) error { return d.Skip(depth + 1) })
	case '"':
		_, err := d.rawString(&d.val)
		return err
	case 't', 'f':
		_, err := d.Bool()
		return err
	case 'n':
		if d.Null() {
			return nil
		}
	default:
		_, err := d.Number()
		return err
	}
	return d.Fail("want a value")
}
