package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/spentledger/spent/idempotency"
)

var keyVectors = []struct {
	in, key string // key "" means malformed
}{
	{`abc`, "abc"},
	{`"abc"`, "abc"},
	{` "abc" `, "abc"},
	{`8e03978e-40d5-43e8-bc93-6894a57f9324`, "8e03978e-40d5-43e8-bc93-6894a57f9324"},
	{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324"},
	{`"a\"b\\c"`, `a"b\c`},
	{`a"b`, `a"b`},
	{`key_with.punct:~!`, "key_with.punct:~!"},
	{``, ""},
	{`""`, ""},
	{`"a b"`, ""},
	{`a b`, ""},
	{`"abc`, ""},
	{`"a\b"`, ""},
	{`"abc"x`, ""},
	{`"abc";v=1`, ""},
	{"\"a\tb\"", ""},
	{"a\x7fb", ""},
	{"caf\u00e9", ""},
	{`"` + strings.Repeat("k", 255) + `"`, strings.Repeat("k", 255)},
	{`"` + strings.Repeat("k", 256) + `"`, ""},
	{strings.Repeat("k", 256), ""},
}

func TestParseKey(t *testing.T) {
	for _, v := range keyVectors {
		got, err := idempotency.ParseKey(v.in)
		if v.key == "" {
			if !errors.Is(err, idempotency.ErrKeyInvalid) {
				t.Errorf("ParseKey(%q): got %q, %v; want ErrKeyInvalid", v.in, got, err)
			}
			continue
		}
		if err != nil || got != v.key {
			t.Errorf("ParseKey(%q): got %q, %v; want %q", v.in, got, err, v.key)
		}
	}
}

func TestFormatKey(t *testing.T) {
	f, err := idempotency.FormatKey(`a"b\c`)
	if err != nil || f != `"a\"b\\c"` {
		t.Fatalf("FormatKey: got %q, %v", f, err)
	}
	if _, err := idempotency.FormatKey("a b"); err == nil {
		t.Fatal("FormatKey of a key with a space: got no error")
	}
}

// FuzzParseKey: whatever ParseKey accepts is a valid key that FormatKey
// writes back in a form ParseKey reads as the same key.
func FuzzParseKey(f *testing.F) {
	for _, v := range keyVectors {
		f.Add(v.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := idempotency.ParseKey(in)
		if err != nil {
			return
		}
		if len(k) == 0 || len(k) > idempotency.MaxKeyLen {
			t.Fatalf("ParseKey(%q) = %q: length out of range", in, k)
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x21 || k[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: byte %#x outside the character set", in, k, k[i])
			}
		}
		q, err := idempotency.FormatKey(k)
		if err != nil {
			t.Fatalf("FormatKey(%q): %v", k, err)
		}
		if k2, err := idempotency.ParseKey(q); err != nil || k2 != k {
			t.Fatalf("ParseKey(FormatKey(%q)) = %q, %v", k, k2, err)
		}
	})
}
