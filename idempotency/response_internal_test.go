package idempotency

import (
	"bytes"
	"net/http"
	"testing"
)

func TestStoredRoundTrip(t *testing.T) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Add("Link", "</a>; rel=a")
	h.Add("Link", "</b>; rel=b")
	h.Set("Set-Cookie", "secret=1")
	body := []byte(`{"ok":true}` + "\x00\xff")
	enc := encodeStored(201, h, []string{"Content-Type", "Link", "Location"}, body)
	s, err := decodeStored(enc)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"Content-Type", "application/json"}, {"Link", "</a>; rel=a"}, {"Link", "</b>; rel=b"}}
	if s.status != 201 || !bytes.Equal(s.body, body) || len(s.header) != len(want) {
		t.Fatalf("got %+v", s)
	}
	for i := range want {
		if s.header[i] != want[i] {
			t.Fatalf("header %d: got %v, want %v", i, s.header[i], want[i])
		}
	}
}

func TestOperatorResult(t *testing.T) {
	for _, c := range []struct{ in, ct string }{
		{`{"state":"applied"}`, "application/json"},
		{`paid by hand`, "text/plain; charset=utf-8"},
		{``, "text/plain; charset=utf-8"},
	} {
		s, err := decodeStored([]byte(c.in))
		if err != nil || s.status != 200 || string(s.body) != c.in || s.header[0][1] != c.ct {
			t.Fatalf("operator result %q: got %+v, %v; want 200 %s", c.in, s, err, c.ct)
		}
	}
}

// FuzzDecodeStored: decoding never panics, and whatever decodes from the
// middleware's format encodes back to the same bytes.
func FuzzDecodeStored(f *testing.F) {
	h := http.Header{"Content-Type": {"text/plain"}, "Location": {"/x"}}
	f.Add(encodeStored(200, h, []string{"Content-Type", "Location"}, []byte("hello")))
	f.Add(encodeStored(204, nil, nil, nil))
	f.Add([]byte(`{"a":1}`))
	f.Add(append(append([]byte{}, magic...), 0xff, 0xff, 0xff))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeStored(b)
		if err != nil || !bytes.HasPrefix(b, magic) {
			return
		}
		hh := http.Header{}
		var names []string
		seen := map[string]bool{}
		for _, kv := range s.header {
			hh[kv[0]] = append(hh[kv[0]], kv[1])
			if !seen[kv[0]] {
				seen[kv[0]] = true
				names = append(names, kv[0])
			}
		}
		// Re-encoding groups values by name; compare after decoding again.
		s2, err := decodeStored(encodeStored(s.status, hh, names, s.body))
		if err != nil || s2.status != s.status || !bytes.Equal(s2.body, s.body) || len(s2.header) != len(s.header) {
			t.Fatalf("round trip of %q: %+v, %v", b, s2, err)
		}
	})
}
