package strictjson_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spentledger/spent/internal/strictjson"
)

// The fuzz targets of this file check the package's stated rules against
// encoding/json, which reads every JSON text but keeps none of those rules:
// whatever strictjson accepts, encoding/json reads as the same value, and
// whatever valid JSON strictjson refuses breaks one of the rules of the
// package documentation. Their seed corpora are in testdata/fuzz.

// fuzzDocs are seeds shared by the targets that read documents: the
// documents of the package's tests, and edge cases.
var fuzzDocs = []string{
	`{"id":"a","count":2,"raw":"AAE=","when":"2024-01-02T03:04:05Z","inner":{"name":"x"},"list":[{"name":"y"}],"map":{"k":{"name":"z"}},"any":{"free":[1,{"form":true}]},"num":12.5,"promoted":"p","Untagged":"u","headers":{"A":"b"}}`,
	`{"id":null,"inner":null}`,
	`{"ID":"a"}`,
	`{"id":"a","id":"b"}`,
	`{"id":"a","\u0069d":"b"}`,
	"{\"id\":\"\xff\"}",
	`{"id":"\ud800"}`,
	`{"id":"\ud83d\ude00 \u00e9 \u2028"}`,
	`{"id":"a"} {}`,
	`{"any":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`,
	strings.Repeat("[", 65) + "1" + strings.Repeat("]", 65),
	`[1,-0,0.5e-3,-12E+2,9223372036854775807,-9223372036854775808,9223372036854775808,1e400]`,
	`"\/\"\\\b\f\r\t\n"`,
	`{"raw":"AAE=\n","hex":"0aFf"}`,
	`{"when":"2024-02-29T23:59:59.123456789Z","late":"2024-02-30T00:00:00Z"}`,
	"{\"a\":\x01}",
	` true `,
	`nul`,
	``,
}

// rulesRefusal fails t unless err, a refusal of the valid JSON text b,
// names a rule the package documents and b breaks that rule.
func rulesRefusal(t *testing.T, b []byte, err error) {
	t.Helper()
	var me *strictjson.MemberError
	var se *strictjson.SyntaxError
	switch {
	case errors.As(err, &me) && errors.Is(err, strictjson.ErrDuplicate):
		if !hasDuplicate(b) {
			t.Fatalf("%q: refused as %v, but encoding/json finds no object with a member twice", b, err)
		}
	case errors.As(err, &se) && se.Msg == "invalid UTF-8 in string":
		if utf8.Valid(b) {
			t.Fatalf("%q: refused as %v, but it is valid UTF-8", b, err)
		}
	case errors.As(err, &se) && se.Msg == `lone surrogate in \u escape`:
		if !loneSurrogate(b) {
			t.Fatalf(`%q: refused as %v, but it has no \u escape of a lone surrogate`, b, err)
		}
	case errors.As(err, &se) && se.Msg == "nested too deep":
		if d := nesting(b); d <= strictjson.MaxDepth {
			t.Fatalf("%q: refused as %v, but it nests only %d deep", b, err, d)
		}
	default:
		t.Fatalf("%q: valid JSON refused for a reason the package does not document: %v", b, err)
	}
}

// loneSurrogate reports whether a string of the valid JSON text b has a
// \u escape of a surrogate that is not one half of a high-low pair.
func loneSurrogate(b []byte) bool {
	escape := func(i int) (rune, bool) { // the \uXXXX at b[i:], if any
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		r, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
		return rune(r), err == nil
	}
	in := false
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"':
			in = !in
		case in && b[i] == '\\':
			r, ok := escape(i)
			switch {
			case !ok:
				i++ // another escape: skip its letter
			case r >= 0xD800 && r < 0xDC00:
				lo, ok := escape(i + 6)
				if !ok || lo < 0xDC00 || lo >= 0xE000 {
					return true
				}
				i += 11
			case r >= 0xDC00 && r < 0xE000:
				return true
			default:
				i += 5
			}
		}
	}
	return false
}

// hasDuplicate reports whether some object of the valid JSON text b has a
// member twice, as encoding/json reads the names.
func hasDuplicate(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	// Each open container: nil for an array, the names seen for an object.
	var stack []map[string]bool
	expectName := func() bool { return len(stack) > 0 && stack[len(stack)-1] != nil }
	for {
		nameNext := expectName() && dec.More()
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{':
				stack = append(stack, map[string]bool{})
			case '[':
				stack = append(stack, nil)
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if nameNext {
				top := stack[len(stack)-1]
				if top[tok] {
					return true
				}
				top[tok] = true
				// The value follows; read it so that the next string
				// token is a name again.
				if err := skipValue(dec, &stack); err != nil {
					return false
				}
			}
		}
	}
}

// skipValue reads one value from dec; a container is pushed on stack, to
// be read by the caller's loop.
func skipValue(dec *json.Decoder, stack *[]map[string]bool) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		*stack = append(*stack, map[string]bool{})
	case json.Delim('['):
		*stack = append(*stack, nil)
	}
	return nil
}

// nesting returns how deep the containers of the valid JSON text b nest.
func nesting(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	depth, most := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return most
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			most = max(most, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// valueReader reads any value with the Decoder's typed methods, into the
// shapes encoding/json decodes into an any with UseNumber. It reads
// strings with each of the string methods in turn.
type valueReader struct {
	t       *testing.T
	d       *strictjson.Decoder
	strings []string // every string value read
	numbers []string // every number read
}

func (r *valueReader) value(depth int) (any, error) {
	d := r.d
	if depth > strictjson.MaxDepth {
		return nil, d.Fail("nested too deep")
	}
	switch d.Peek() {
	case '{':
		m := map[string]any{}
		err := d.Object(func(name []byte) error {
			k := string(name)
			if _, dup := m[k]; dup {
				r.t.Fatalf("Object called member for %q twice in one object", k)
			}
			v, err := r.value(depth + 1)
			m[k] = v
			return err
		})
		return m, err
	case '[':
		a := []any{}
		err := d.Array(func(i int) error {
			if i != len(a) {
				r.t.Fatalf("Array called elem with %d after %d elements", i, len(a))
			}
			v, err := r.value(depth + 1)
			a = append(a, v)
			return err
		})
		return a, err
	case '"':
		var s string
		var err error
		switch len(r.strings) % 4 {
		case 0:
			s, err = d.String()
		case 1:
			var b []byte
			b, err = d.Bytes()
			s = string(b)
		case 2:
			s, err = d.Interned()
		case 3:
			s, err = d.StringLike("k")
		}
		if err == nil {
			r.strings = append(r.strings, s)
		}
		return s, err
	case 't', 'f':
		return d.Bool()
	case 'n':
		if d.Null() {
			return nil, nil
		}
		return nil, d.Fail("want a value")
	}
	n, err := d.Number()
	if err == nil {
		r.numbers = append(r.numbers, string(n))
	}
	return json.Number(n), err
}

// FuzzDecoder reads arbitrary bytes as one JSON value with the Decoder's
// typed methods and with Skip, and checks that
//   - the two ways agree on whether the text is accepted;
//   - what is accepted is valid JSON that encoding/json reads as the same
//     value, and every string and number in it reads back through
//     AppendString, Int, Hex and Base64 as those methods document;
//   - valid JSON is refused only for a documented rule (a member given
//     twice, invalid UTF-8, a lone surrogate, nesting past MaxDepth);
//   - Members refuses exactly the members it is not given.
func FuzzDecoder(f *testing.F) {
	for _, s := range fuzzDocs {
		f.Add([]byte(s))
	}
	intern := map[string]string{"a": "a", "k": "k", "name": "name"}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := &strictjson.Decoder{Intern: intern}
		d.Reset(b)
		r := &valueReader{t: t, d: d}
		v, err := r.value(0)
		if err == nil {
			err = d.End()
		}
		if d.Offset() < 0 || d.Offset() > len(b) {
			t.Fatalf("%q: offset %d outside the input", b, d.Offset())
		}

		var skip strictjson.Decoder
		skip.Reset(b)
		serr := skip.Skip(0)
		if serr == nil {
			serr = skip.End()
		}
		if (err == nil) != (serr == nil) {
			t.Fatalf("%q: the typed methods say %v, Skip says %v", b, err, serr)
		}

		if err != nil {
			if json.Valid(b) {
				rulesRefusal(t, b, err)
			}
			return
		}
		if d.Offset() != len(b) {
			t.Fatalf("%q: accepted at offset %d of %d", b, d.Offset(), len(b))
		}
		if !json.Valid(b) {
			t.Fatalf("%q: accepted, but encoding/json says it is not JSON", b)
		}
		std := json.NewDecoder(bytes.NewReader(b))
		std.UseNumber()
		var want any
		if err := std.Decode(&want); err != nil {
			t.Fatalf("%q: encoding/json: %v", b, err)
		}
		if !reflect.DeepEqual(v, want) {
			t.Fatalf("%q: read as %#v, encoding/json reads %#v", b, v, want)
		}
		if hasDuplicate(b) {
			t.Fatalf("%q: accepted with a member given twice", b)
		}
		if loneSurrogate(b) {
			t.Fatalf("%q: accepted with a \\u escape of a lone surrogate", b)
		}

		for i, s := range r.strings {
			if i == 8 {
				break
			}
			checkString(t, s)
		}
		for _, n := range r.numbers {
			checkInt(t, n)
		}
		if m, ok := v.(map[string]any); ok && len(m) <= 64 {
			checkMembers(t, b, m, intern)
		}
	})
}

// checkString checks that s, a string the Decoder read, is written back
// exactly by AppendString, and that Hex and Base64 read it as
// encoding/hex and the strict base64 encoding do.
func checkString(t *testing.T, s string) {
	t.Helper()
	enc := strictjson.AppendString([]byte("prefix"), s)
	if !bytes.HasPrefix(enc, []byte("prefix")) {
		t.Fatalf("AppendString(%q) lost what it appended to: %q", s, enc)
	}
	enc = enc[len("prefix"):]
	var d strictjson.Decoder
	d.Reset(enc)
	got, err := d.String()
	if err != nil || got != s || d.End() != nil {
		t.Fatalf("AppendString(%q) = %s, read back as %q, %v", s, enc, got, err)
	}

	d.Reset(enc)
	h, err := d.Hex(0)
	want, werr := hex.DecodeString(s)
	if (err == nil) != (werr == nil) || err == nil && !bytes.Equal(h, want) {
		t.Fatalf("Hex of %q: got %x, %v; encoding/hex gets %x, %v", s, h, err, want, werr)
	}

	d.Reset(enc)
	b64, err := d.Base64()
	want, werr = strictjson.B64.DecodeString(s)
	if werr == nil && strings.ContainsAny(s, "\r\n") {
		werr = errors.New("line break")
	}
	if (err == nil) != (werr == nil) || err == nil && !bytes.Equal(b64, want) {
		t.Fatalf("Base64 of %q: got %x, %v; want %x, %v", s, b64, err, want, werr)
	}
	if err == nil && b64 == nil {
		t.Fatalf("Base64 of %q: nil, documented never nil", s)
	}
}

// checkInt checks that Int reads the number text n exactly when it is a
// whole int64 without a fraction or exponent.
func checkInt(t *testing.T, n string) {
	t.Helper()
	var d strictjson.Decoder
	d.Reset([]byte(n))
	got, err := d.Int()
	whole := !strings.ContainsAny(n, ".eE")
	if err == nil && (!whole || strconv.FormatInt(got, 10) != n && n != "-0") {
		t.Fatalf("Int of %s: got %d", n, got)
	}
	if _, perr := strconv.ParseInt(n, 10, 64); whole && (perr == nil) != (err == nil) {
		t.Fatalf("Int of %s: got %d, %v; strconv says %v", n, got, err, perr)
	}
}

// checkMembers reads the accepted object b with Members, first knowing
// all its members, then all but one, which must be refused as unknown.
func checkMembers(t *testing.T, b []byte, m map[string]any, intern map[string]string) {
	t.Helper()
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	read := func(names []string) (uint64, error) {
		d := &strictjson.Decoder{Intern: intern}
		d.Reset(b)
		r := &valueReader{t: t, d: d}
		present, err := d.Members(names, func(i int) error {
			_, err := r.value(1)
			return err
		})
		if err == nil {
			err = d.End()
		}
		return present, err
	}
	present, err := read(names)
	if err != nil {
		t.Fatalf("%q: Members of its own names: %v", b, err)
	}
	for i, k := range names {
		if got, want := present&(1<<i) != 0, m[k] != nil; got != want {
			t.Fatalf("%q: member %q present %v, want %v (null is absent)", b, k, got, want)
		}
	}
	if len(names) == 0 {
		return
	}
	_, err = read(names[1:])
	var me *strictjson.MemberError
	if !errors.As(err, &me) || !errors.Is(err, strictjson.ErrUnknown) || me.Name != names[0] {
		t.Fatalf("%q: Members without %q: got %v, want it refused as unknown", b, names[0], err)
	}
}

// FuzzAppendString writes arbitrary strings, valid UTF-8 or not, and checks
// that the output is JSON that the Decoder and encoding/json both read as
// encoding/json's own encoding of the string reads (invalid UTF-8 becomes
// U+FFFD), with no control character, U+2028 or U+2029 left unescaped.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\ nl\n tab\t ctl\x01\x1f\x7f", "ünï\u2028\u2029", "<&>", "a\xffb", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\U0010ffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := strictjson.AppendString(nil, s)
		if !utf8.Valid(enc) {
			t.Fatalf("AppendString(%q) = %q: not UTF-8", s, enc)
		}
		for _, c := range string(enc) {
			if c < 0x20 || c == '\u2028' || c == '\u2029' {
				t.Fatalf("AppendString(%q) = %q: %U unescaped", s, enc, c)
			}
		}
		std, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		var d strictjson.Decoder
		d.Reset(enc)
		got, err := d.String()
		if err != nil || d.End() != nil || got != want {
			t.Fatalf("AppendString(%q) = %s: read back as %q, %v; want %q", s, enc, got, err, want)
		}
		var viaStd string
		if err := json.Unmarshal(enc, &viaStd); err != nil || viaStd != want {
			t.Fatalf("AppendString(%q) = %s: encoding/json reads %q, %v; want %q", s, enc, viaStd, err, want)
		}
	})
}

// FuzzTime checks the time and duration writers and reader:
//   - ParseTime's fast path for the server's own form agrees with
//     time.Time.UnmarshalText, the general RFC 3339 reader;
//   - AppendTime writes what time.RFC3339Nano writes in UTC, and ParseTime
//     reads it back to the same instant for the years RFC 3339 can hold;
//   - AppendSeconds writes every duration exactly, as a JSON number that
//     reads back to it to the nanosecond.
func FuzzTime(f *testing.F) {
	type seed struct {
		s         string
		sec, nsec int64
		d         time.Duration
	}
	for _, c := range []seed{
		{"2024-01-02T03:04:05Z", 1704164645, 0, 28500 * time.Millisecond},
		{"2024-02-29T23:59:59.123456789Z", 1709251199, 123456789, -time.Nanosecond},
		{"2024-02-30T00:00:00Z", 0, 1, 1<<63 - 1},
		{"2023-02-29T00:00:00Z", -62135596800, 0, -1 << 63},
		{"2024-01-02T03:04:05.Z", 253402300799, 999999999, 0},
		{"2024-01-02T03:04:05.1234567890Z", 253402300800, 0, time.Second},
		{"2024-01-02T24:00:00Z", -62167219200, 0, -time.Second},
		{"2024-01-02T23:59:60Z", 1 << 62, 0, 10 * time.Minute},
		{"2024-01-02T03:04:05+01:00", -1 << 62, 0, time.Hour},
		{"0000-01-01T00:00:00Z", 0, -1, 1},
		{"", 0, 0, 0},
	} {
		f.Add(c.s, c.sec, c.nsec, int64(c.d))
	}
	f.Fuzz(func(t *testing.T, s string, sec, nsec, d int64) {
		got, err := strictjson.ParseTime([]byte(s))
		var want time.Time
		werr := want.UnmarshalText([]byte(s))
		if (err == nil) != (werr == nil) || err == nil && !got.Equal(want) {
			t.Fatalf("ParseTime(%q) = %v, %v; time.Time.UnmarshalText gives %v, %v", s, got, err, want, werr)
		}

		tm := time.Unix(sec, nsec)
		enc := strictjson.AppendTime(nil, tm)
		if w := `"` + tm.UTC().Format(time.RFC3339Nano) + `"`; string(enc) != w {
			t.Fatalf("AppendTime(%v) = %s, want %s", tm, enc, w)
		}
		if y := tm.UTC().Year(); y >= 0 && y <= 9999 {
			back, err := strictjson.ParseTime(enc[1 : len(enc)-1])
			if err != nil || !back.Equal(tm) {
				t.Fatalf("AppendTime(%v) = %s, read back as %v, %v", tm, enc, back, err)
			}
		}

		secs := strictjson.AppendSeconds(nil, time.Duration(d))
		if !secondsForm.Match(secs) {
			t.Fatalf("AppendSeconds(%d ns) = %q: not a JSON number in the documented form", d, secs)
		}
		back, err := time.ParseDuration(string(secs) + "s")
		if err != nil || back != time.Duration(d) {
			t.Fatalf("AppendSeconds(%d ns) = %s, which is %d ns, %v", d, secs, back, err)
		}
		if !json.Valid(secs) {
			t.Fatalf("AppendSeconds(%d ns) = %s: not JSON", d, secs)
		}
	})
}

// secondsForm is AppendSeconds' form: whole seconds, then a fraction
// without trailing zeros when there is one.
var secondsForm = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$`)

// fuzzEmbedded and fuzzTarget are the shapes FuzzUnmarshal decodes into:
// every kind of field the package's rules treat differently.
type fuzzEmbedded struct {
	Promoted string `json:"promoted"`
}

type fuzzInner struct {
	Name string `json:"name"`
	N    *int64 `json:"n"`
}

type fuzzTarget struct {
	fuzzEmbedded
	ID       string               `json:"id"`
	Count    int                  `json:"count,omitempty"`
	Raw      []byte               `json:"raw"`
	When     *time.Time           `json:"when"`
	Inner    *fuzzInner           `json:"inner"`
	List     []fuzzInner          `json:"list"`
	Map      map[string]fuzzInner `json:"map"`
	Any      any                  `json:"any"`
	Num      json.Number          `json:"num"`
	Flag     bool                 `json:"flag"`
	Float    float64              `json:"float"`
	Pair     [2]uint8             `json:"pair"`
	Skipped  string               `json:"-"`
	Untagged string
	Headers  map[string]string `json:"headers"`
}

// fuzzFields are the member names fuzzTarget has, exactly.
var fuzzFields = []string{"promoted", "id", "count", "raw", "when", "inner", "list", "map", "any", "num", "flag", "float", "pair", "Untagged", "headers"}

// FuzzUnmarshal decodes arbitrary bytes into a struct under the default
// rules, with unknown members skipped, and with a fuzzed size limit, and
// checks that
//   - a document over its limit is refused with ErrTooLarge, and only then;
//   - what is accepted is accepted by encoding/json with unknown fields
//     disallowed, as the same value, has no member twice and no member
//     whose name differs only in case from a field's;
//   - skipping unknown members accepts everything the default rules do,
//     and the default rules refuse only for an unknown member beyond that;
//   - a decoded value written by encoding/json decodes again to the same
//     value (the round trip is stable).
func FuzzUnmarshal(f *testing.F) {
	for _, s := range fuzzDocs {
		f.Add([]byte(s), 0)
	}
	f.Add([]byte(`{"id":"0123456789"}`), 19)
	f.Add([]byte(`{"id":"0123456789"}`), 18)
	f.Add([]byte(`{"Promoted":"p","extra":{"a":[1,2]}}`), -1)
	f.Add([]byte(`{"skipped":"s","Skipped":"s","untagged":"u"}`), 0)
	f.Add([]byte(`{"pair":[1,2,3],"float":1e308,"count":9223372036854775807,"flag":null}`), 0)
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		limit %= 1 << 12 // from -4095 to 4095: a negative limit means none
		var strict fuzzTarget
		err := strictjson.Rules{MaxSize: limit}.Unmarshal(b, &strict)
		over := limit > 0 && len(b) > limit || limit == 0 && len(b) > strictjson.DefaultMaxSize
		if over != errors.Is(err, strictjson.ErrTooLarge) {
			t.Fatalf("%d bytes, limit %d: got %v", len(b), limit, err)
		}
		if over {
			return
		}

		var lenient fuzzTarget
		lerr := strictjson.Rules{MaxSize: -1, SkipUnknown: true}.Unmarshal(b, &lenient)
		if err == nil && lerr != nil {
			t.Fatalf("%q: accepted, but refused with unknown members skipped: %v", b, lerr)
		}
		if err != nil && lerr == nil && !errors.Is(err, strictjson.ErrUnknown) {
			t.Fatalf("%q: accepted with unknown members skipped, refused without for another reason: %v", b, err)
		}
		if lerr != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("%q: accepted, but encoding/json says it is not JSON", b)
		}
		if hasDuplicate(b) {
			t.Fatalf("%q: accepted with a member given twice", b)
		}
		if loneSurrogate(b) {
			t.Fatalf("%q: accepted with a \\u escape of a lone surrogate", b)
		}
		checkNames(t, b)
		if err == nil {
			var std fuzzTarget
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&std); err != nil {
				t.Fatalf("%q: accepted, but encoding/json with unknown fields disallowed: %v", b, err)
			}
			if got, want := mustMarshal(t, strict), mustMarshal(t, std); !bytes.Equal(got, want) {
				t.Fatalf("%q: decoded as %s, encoding/json decodes %s", b, got, want)
			}
			if got, want := mustMarshal(t, strict), mustMarshal(t, lenient); !bytes.Equal(got, want) {
				t.Fatalf("%q: decoded as %s, with unknown members skipped as %s", b, got, want)
			}
		}

		out := mustMarshal(t, lenient)
		var again fuzzTarget
		if err := (strictjson.Rules{MaxSize: -1}).Unmarshal(out, &again); err != nil {
			t.Fatalf("%q: decoded and written as %s, which is refused: %v", b, out, err)
		}
		if out2 := mustMarshal(t, again); !bytes.Equal(out, out2) {
			t.Fatalf("%q: written as %s, then as %s", b, out, out2)
		}
	})
}

// checkNames checks that no member of the accepted object b has a name
// that differs only in case from a field's name without being it.
func checkNames(t *testing.T, b []byte) {
	t.Helper()
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return // not an object, or null
	}
	for name := range top {
		for _, f := range fuzzFields {
			if name != f && strings.EqualFold(name, f) {
				t.Fatalf("%q: accepted member %q, which differs only in case from field %q", b, name, f)
			}
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding/json cannot write %#v: %v", v, err)
	}
	return b
}
