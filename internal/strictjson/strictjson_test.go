package strictjson_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/internal/strictjson"
)

type inner struct {
	Name string `json:"name"`
}

type Embedded struct {
	Promoted string `json:"promoted"`
}

type target struct {
	Embedded
	ID       string            `json:"id"`
	Count    int               `json:"count,omitempty"`
	Raw      []byte            `json:"raw"`
	When     time.Time         `json:"when"`
	Inner    *inner            `json:"inner"`
	List     []inner           `json:"list"`
	Map      map[string]inner  `json:"map"`
	Any      any               `json:"any"`
	Num      json.Number       `json:"num"`
	Skipped  string            `json:"-"`
	Untagged string            // named by its Go name
	Headers  map[string]string `json:"headers"`
}

// TestUnmarshalRules has one case per rule: each bad document is refused
// with the error that names the rule, and each good one decodes.
func TestUnmarshalRules(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want error  // nil: accepted
		msg  string // in the error, when refused
	}{
		{"Valid", `{"id":"a","count":2,"raw":"AAE=","when":"2024-01-02T03:04:05Z","inner":{"name":"x"},"list":[{"name":"y"}],"map":{"k":{"name":"z"}},"any":{"free":[1,{"form":true}]},"num":12.5,"promoted":"p","Untagged":"u","headers":{"A":"b"}}`, nil, ""},
		{"NullMeansAbsent", `{"id":null,"inner":null}`, nil, ""},
		{"CaseDifferingName", `{"ID":"a"}`, strictjson.ErrCase, `"ID"`},
		{"CaseDifferingNested", `{"inner":{"Name":"x"}}`, strictjson.ErrCase, `"Name"`},
		{"CaseDifferingPromoted", `{"Promoted":"p"}`, strictjson.ErrCase, `"Promoted"`},
		{"CaseDifferingGoName", `{"untagged":"u"}`, strictjson.ErrCase, `"untagged"`},
		{"Duplicate", `{"id":"a","id":"b"}`, strictjson.ErrDuplicate, `"id"`},
		{"DuplicateNested", `{"list":[{"name":"a","name":"a"}]}`, strictjson.ErrDuplicate, `"name"`},
		{"DuplicateMapKey", `{"headers":{"A":"1","A":"2"}}`, strictjson.ErrDuplicate, `"A"`},
		{"DuplicateInAny", `{"any":{"x":1,"x":1}}`, strictjson.ErrDuplicate, `"x"`},
		{"DuplicateEscaped", `{"id":"a","\u0069d":"b"}`, strictjson.ErrDuplicate, `"id"`},
		{"InvalidUTF8", "{\"id\":\"\xff\"}", nil, "invalid UTF-8"},
		{"InvalidUTF8AfterEscape", "{\"id\":\"a\\n\xff\"}", nil, "invalid UTF-8"},
		{"LoneSurrogate", `{"id":"\ud800"}`, nil, "lone surrogate"},
		{"InvalidUTF8InName", "{\"\xff\":1}", nil, "invalid UTF-8"},
		{"TrailingData", `{"id":"a"} {}`, nil, "after the JSON value"},
		{"TrailingGarbage", `{"id":"a"}x`, nil, "after the JSON value"},
		{"UnknownMember", `{"id":"a","extra":1}`, strictjson.ErrUnknown, `"extra"`},
		{"IgnoredFieldIsUnknown", `{"Skipped":"s"}`, strictjson.ErrUnknown, `"Skipped"`},
		{"TooLarge", `{"id":"` + strings.Repeat("a", strictjson.DefaultMaxSize) + `"}`, strictjson.ErrTooLarge, "over the limit"},
		{"TooDeep", `{"any":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, nil, "nested too deep"},
		{"WrongType", `{"count":"2"}`, nil, "cannot unmarshal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v target
			err := strictjson.Unmarshal([]byte(c.doc), &v)
			accepted := c.want == nil && c.msg == ""
			if accepted {
				if err != nil {
					t.Fatalf("got %v, want it accepted", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got it accepted (%+v), want it refused", v)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %q, want it to say %q", err, c.msg)
			}
		})
	}
}

func TestUnmarshalDecodes(t *testing.T) {
	var v target
	doc := `{"id":"a","raw":"AAE=","when":"2024-01-02T03:04:05Z","inner":{"name":"x"},"promoted":"p","any":[1]}`
	if err := strictjson.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	if v.ID != "a" || string(v.Raw) != "\x00\x01" || v.Inner == nil || v.Inner.Name != "x" || v.Promoted != "p" || !v.When.Equal(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("got %+v", v)
	}
}

func TestSkipUnknown(t *testing.T) {
	r := strictjson.Rules{SkipUnknown: true}
	var v inner
	if err := r.Unmarshal([]byte(`{"name":"x","ext":{"a":[1,2]}}`), &v); err != nil || v.Name != "x" {
		t.Fatalf("got %+v, %v; want the unknown member skipped", v, err)
	}
	// Skipped values follow the rules too, and a known name still has to
	// match exactly: "Name" is refused, not skipped (encoding/json would
	// read it into Name).
	for doc, want := range map[string]error{
		`{"name":"x","ext":{"a":1,"a":2}}`: strictjson.ErrDuplicate,
		`{"name":"x","name":"y"}`:          strictjson.ErrDuplicate,
	} {
		if err := r.Unmarshal([]byte(doc), &v); !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", doc, err, want)
		}
	}
	if err := r.Unmarshal([]byte(`{"Name":"x"}`), &v); !errors.Is(err, strictjson.ErrCase) {
		t.Fatalf("a name differing in case: got %v, want ErrCase", err)
	}
	if err := r.Unmarshal([]byte("{\"ext\":\"\xff\"}"), &v); err == nil {
		t.Fatal("invalid UTF-8 in a skipped member: accepted")
	}
}

func TestMaxSize(t *testing.T) {
	doc := []byte(`{"name":"0123456789"}`)
	var v inner
	if err := (strictjson.Rules{MaxSize: len(doc)}).Unmarshal(doc, &v); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if err := (strictjson.Rules{MaxSize: len(doc) - 1}).Unmarshal(doc, &v); !errors.Is(err, strictjson.ErrTooLarge) {
		t.Fatalf("over the limit: got %v, want ErrTooLarge", err)
	}
	big := []byte(`{"name":"` + strings.Repeat("a", strictjson.DefaultMaxSize) + `"}`)
	if err := (strictjson.Rules{MaxSize: -1}).Unmarshal(big, &v); err != nil || len(v.Name) != strictjson.DefaultMaxSize {
		t.Fatalf("no limit: got %v", err)
	}
}

// TestEmbeddedDominance checks the encoding/json rules for names claimed by
// several fields: the shallower wins, a tag breaks a tie, and a tie without
// one leaves the name to no field (so it is unknown).
func TestEmbeddedDominance(t *testing.T) {
	type A struct{ X, Y, Z string }
	type B struct {
		X string
		Y string `json:"Y"`
		Z string
	}
	type C struct {
		A
		B
		X string
	}
	var v C
	if err := strictjson.Unmarshal([]byte(`{"X":"top","Y":"tagged"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.X != "top" || v.B.Y != "tagged" || v.A.Y != "" {
		t.Fatalf("got %+v", v)
	}
	if err := strictjson.Unmarshal([]byte(`{"Z":"ambiguous"}`), &v); !errors.Is(err, strictjson.ErrUnknown) {
		t.Fatalf("ambiguous name: got %v, want ErrUnknown", err)
	}
}

func TestUnmarshalNeedsPointer(t *testing.T) {
	var v inner
	if err := strictjson.Unmarshal([]byte(`{}`), v); err == nil {
		t.Fatal("a non-pointer: accepted")
	}
}

// TestDuplicateManyMembers checks duplicates past the linear scan, where a
// set takes over.
func TestDuplicateManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"m` + strings.Repeat("x", i) + `":1`)
	}
	ok := b.String() + "}"
	var v map[string]int
	if err := strictjson.Unmarshal([]byte(ok), &v); err != nil || len(v) != 100 {
		t.Fatalf("100 distinct members: got %d, %v", len(v), err)
	}
	for _, at := range []int{0, 31, 32, 99} {
		dup := b.String() + `,"m` + strings.Repeat("x", at) + `":2}`
		if err := strictjson.Unmarshal([]byte(dup), &v); !errors.Is(err, strictjson.ErrDuplicate) {
			t.Errorf("member %d repeated last: got %v, want ErrDuplicate", at, err)
		}
	}
}

func TestMembers(t *testing.T) {
	names := []string{"a", "b"}
	cases := []struct {
		doc     string
		present uint64
		want    error
		name    string
	}{
		{`{"a":"x","b":"y"}`, 3, nil, ""},
		{`{"b":null}`, 0, nil, ""},
		{`{"A":"x"}`, 0, strictjson.ErrUnknown, "A"},
		{`{"c":"x"}`, 0, strictjson.ErrUnknown, "c"},
		{`{"a":"x","a":"x"}`, 0, strictjson.ErrDuplicate, "a"},
		{`{"a":"x","a":null}`, 0, strictjson.ErrDuplicate, "a"},
		{`{"a":1}`, 0, nil, "a"},
	}
	for _, c := range cases {
		var d strictjson.Decoder
		d.Reset([]byte(c.doc))
		present, err := d.Members(names, func(int) error {
			_, err := d.String()
			return err
		})
		var me *strictjson.MemberError
		switch {
		case c.name == "":
			if err != nil || present != c.present {
				t.Errorf("%s: got %b, %v; want %b", c.doc, present, err, c.present)
			}
		case !errors.As(err, &me) || me.Name != c.name || (c.want != nil && !errors.Is(err, c.want)):
			t.Errorf("%s: got %v, want a *MemberError for %q (%v)", c.doc, err, c.name, c.want)
		}
	}
}

func TestAppendStringRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\ nl\n tab\t ctl\x01", "ünï\u2028\u2029", "<&>"} {
		b := strictjson.AppendString(nil, s)
		var d strictjson.Decoder
		d.Reset(b)
		got, err := d.String()
		if err != nil || got != s || d.End() != nil {
			t.Errorf("%q: wrote %s, read %q, %v", s, b, got, err)
		}
		var std string
		if err := json.Unmarshal(b, &std); err != nil || std != s {
			t.Errorf("%q: encoding/json reads %s as %q, %v", s, b, std, err)
		}
	}
	if got := string(strictjson.AppendString(nil, "a\xffb")); got != `"a\ufffdb"` {
		t.Errorf("invalid UTF-8: got %s, want it replaced by U+FFFD", got)
	}
}

func TestTimeRoundTrip(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC),
		time.Date(2024, 1, 2, 3, 4, 5, 120000000, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
	} {
		b := strictjson.AppendTime(nil, tm)
		got, err := strictjson.ParseTime(b[1 : len(b)-1])
		if err != nil || !got.Equal(tm) {
			t.Errorf("%v: wrote %s, read %v, %v", tm, b, got, err)
		}
	}
	if got := string(strictjson.AppendSeconds(nil, 28500*time.Millisecond)); got != "28.5" {
		t.Errorf("28.5 s: got %s", got)
	}
}
