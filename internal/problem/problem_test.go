package problem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/spentledger/spent/internal/problem"
)

const prefix = "https://github.com/spentledger/spent/blob/main/docs/http-api.md#code-"

// TestAppendWire checks the exact bytes, against the example in
// docs/http-api.md.
func TestAppendWire(t *testing.T) {
	got := string(problem.Append(nil, prefix, "not_found", "Not found", 404, "no live record for this key"))
	want := `{"type":"https://github.com/spentledger/spent/blob/main/docs/http-api.md#code-not_found","title":"Not found","status":404,"detail":"no live record for this key","code":"not_found"}` + "\n"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestAppendEscapes(t *testing.T) {
	got := string(problem.Append([]byte("keep:"), "p#", "c", "T", 400, "a \"quoted\" <tag> & \xff\n\u2028"))
	want := `keep:{"type":"p#c","title":"T","status":400,"detail":"a \"quoted\" <tag> & \ufffd\n\u2028","code":"c"}` + "\n"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Retry-After", "3")
	doc := problem.Append(nil, prefix, "unavailable", "Unavailable", 503, "later")
	problem.Write(rec, 503, doc)
	res := rec.Result()
	for k, v := range map[string]string{
		"Content-Type":   "application/problem+json",
		"Cache-Control":  "no-store",
		"Content-Length": "165",
		"Retry-After":    "3",
	} {
		if got := res.Header.Get(k); got != v {
			t.Errorf("%s: got %q, want %q", k, got, v)
		}
	}
	if res.StatusCode != 503 || rec.Body.String() != string(doc) || len(doc) != 165 {
		t.Fatalf("got %d %q (%d bytes), want 503 and the document", res.StatusCode, rec.Body.String(), len(doc))
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:            "1",
		0:                       "1",
		time.Millisecond:        "1",
		time.Second:             "1",
		time.Second + 1:         "2",
		90*time.Second - 100000: "90",
	} {
		if got := problem.RetryAfter(d); got != want {
			t.Errorf("%v: got %s, want %s", d, got, want)
		}
	}
}

func TestRead(t *testing.T) {
	doc := string(problem.Append(nil, prefix, "mismatch", "Mismatch", 422, "d"))
	h := func(ct string) http.Header { return http.Header{"Content-Type": {ct}} }
	cases := []struct {
		name, ct, body string
		ok             bool
	}{
		{"Written", "application/problem+json", doc, true},
		{"WithParameter", "application/problem+json; charset=utf-8", doc, true},
		{"ExtensionMember", "application/problem+json", `{"code":"mismatch","status":422,"detail":"d","type":"` + prefix + `mismatch","title":"Mismatch","balance":{"a":[1]}}`, true},
		{"NotAProblem", "application/json", doc, false},
		{"LongerMediaType", "application/problem+jsonx", doc, false},
		{"NoCode", "application/problem+json", `{"title":"x"}`, false},
		{"DuplicateCode", "application/problem+json", `{"code":"mismatch","code":"internal"}`, false},
		{"CaseDiffers", "application/problem+json", `{"Code":"mismatch"}`, false},
		{"InvalidUTF8", "application/problem+json", "{\"code\":\"mismatch\",\"detail\":\"\xff\"}", false},
		{"Trailing", "application/problem+json", doc + "{}", false},
		{"StatusNotInteger", "application/problem+json", `{"code":"mismatch","status":"422"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, ok := problem.Read(h(c.ct), []byte(c.body))
			if ok != c.ok {
				t.Fatalf("got %+v, %v; want ok %v", p, ok, c.ok)
			}
			if ok && (p.Code != "mismatch" || p.Status != 422 || p.Detail != "d" || p.Title != "Mismatch" || p.Type != prefix+"mismatch") {
				t.Fatalf("got %+v", p)
			}
		})
	}
}
