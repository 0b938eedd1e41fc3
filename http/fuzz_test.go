package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/internal/strictjson"
)

// FuzzClaimBody posts arbitrary bodies to /v1/claim and checks that the
// server answers every one with a table status and valid JSON, accepts only
// what encoding/json also reads as JSON, and reads strings as it does.
func FuzzClaimBody(f *testing.F) {
	for _, s := range []string{
		`{"namespace":"raw","key":"k"}`,
		`{"namespace":"raw","key":"k\u00e9\ud83d\ude00\n","place":"p","result":"AAE=","fingerprint":"` + fp("x") + `"}`,
		`{"namespace":"echo","key":"k","expires_at":"2030-01-01T00:00:00.5Z","result":null}`,
		`{"namespace":"raw","key":"\/\"\\\b\f\r\t"} `,
		`{"namespace":"raw","key":"t","result_text":"paid \u00e9"}`,
		`{"namespace":"raw","key":"t","result":"","result_text":""}`,
		`{"namespace":"echo","key":"k","key":"k"}`,
		`{"namespace":"echo","key":"\ud800"}`,
		`[1,2,3]`,
		``,
	} {
		f.Add([]byte(s))
	}
	cfg := ledgerConfig(func() time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) })
	l, err := spent.NewLedger(context.Background(), inmem.New(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	srv, err := sphttp.NewServer(l, sphttp.DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	statuses := map[int]bool{200: true, 400: true, 404: true, 409: true, 413: true, 503: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/claim", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		if !statuses[w.Code] {
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("answer is not JSON: %q", w.Body)
		}
		if w.Code != 200 {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted a body encoding/json rejects: %q", body)
		}
		var in struct{ Namespace, Key string }
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatalf("accepted %q: encoding/json: %v", body, err)
		}
		var out struct {
			Namespace string `json:"namespace"`
			Hash      string `json:"hash"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if out.Namespace != in.Namespace || out.Hash != l.HashKey(in.Namespace, in.Key).String() {
			t.Fatalf("%q: server read namespace %q hash %s, encoding/json reads %q %q", body, out.Namespace, out.Hash, in.Namespace, in.Key)
		}
	})
}

// jsonNumber is the grammar of a JSON number.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// FuzzClaimTimes posts claims whose wait (a JSON number of seconds) and
// expires_at (an RFC 3339 string) are fuzzed, either left out when empty,
// and checks, in exact arithmetic, the durations and times the server
// makes of them:
//   - a claim is answered 200 or 400, never with a server error;
//   - a claim answered 200 asked for a wait from 0 to the server's
//     max_wait (read to the nanosecond, truncated), and its record expires
//     after now and no later than the namespace's expiry limit, at the
//     instant expires_at names when given: never at a wrapped time;
//   - without expires_at, a wait in that range written without an
//     exponent is accepted.
func FuzzClaimTimes(f *testing.F) {
	for _, w := range []string{"", "0", "-0", "1.5", "30", "30.000000001", "30.0000000001", "31", "-0.0000000001", "-1", "1e1", "600", "9223372036.854775807", "9223372036.854775808", "1e400"} {
		for _, e := range []string{"", "2025-01-01T01:00:00Z", "2025-01-01T00:00:00Z", "2025-01-02T00:00:00.000000001Z", "2024-12-31T23:59:59.999999999-00:01", "9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z", "2025-01-01T01:00:00"} {
			f.Add(w, e)
		}
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err := spent.NewLedger(context.Background(), inmem.New(), ledgerConfig(func() time.Time { return now }))
	if err != nil {
		f.Fatal(err)
	}
	srv, err := sphttp.NewServer(l, sphttp.DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	p, _ := l.Policy("raw")
	limit := p.ExpiryLimit()
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, wait, expiresAt string) {
		body := []byte(`{"namespace":"raw","key":"k` + strconv.FormatInt(n.Add(1), 10) + `"`)
		var waitNS *big.Int
		if wait != "" {
			if !jsonNumber.MatchString(wait) {
				return
			}
			body = append(append(body, `,"wait":`...), wait...)
			r, ok := new(big.Rat).SetString(wait)
			if !ok {
				// An exponent too large for big.Rat: never a wait
				// from 0 to 30 s but by underflow, and the server
				// reads no exponents.
				r = new(big.Rat).SetInt64(-1)
			}
			r.Mul(r, new(big.Rat).SetInt64(int64(time.Second)))
			waitNS = new(big.Int).Quo(r.Num(), r.Denom()) // truncated toward zero
		}
		if expiresAt != "" {
			body = strictjson.AppendString(append(body, `,"expires_at":`...), expiresAt)
		}
		body = append(body, '}')

		req := httptest.NewRequest(http.MethodPost, "/v1/claim", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)

		waitOK := waitNS == nil || waitNS.Sign() >= 0 && waitNS.Cmp(big.NewInt(int64(sphttp.DefaultMaxWait))) <= 0
		switch {
		case w.Code != 200 && w.Code != 400:
			t.Fatalf("%s: status %d: %s", body, w.Code, w.Body)
		case w.Code == 400 && expiresAt == "" && waitOK && !bytes.ContainsAny([]byte(wait), "eE"):
			t.Fatalf("%s: refused, but its wait is from 0 to %v: %s", body, sphttp.DefaultMaxWait, w.Body)
		case w.Code != 200:
			return
		case !waitOK:
			t.Fatalf("%s: accepted a wait of %s ns, over the server's %v", body, waitNS, sphttp.DefaultMaxWait)
		}
		var out struct {
			ExpiresAt time.Time `json:"expires_at"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: answer %s: %v", body, w.Body, err)
		}
		if !out.ExpiresAt.After(now) || out.ExpiresAt.Sub(now) > limit {
			t.Fatalf("%s: record expires at %v, want after %v and within %v", body, out.ExpiresAt, now, limit)
		}
		if expiresAt != "" {
			var want time.Time
			sent, _ := json.Marshal(expiresAt) // what the server read: invalid UTF-8 replaced
			var s string
			_ = json.Unmarshal(sent, &s)
			if err := want.UnmarshalText([]byte(s)); err != nil || !out.ExpiresAt.Equal(want) {
				t.Fatalf("%s: record expires at %v; expires_at reads as %v, %v", body, out.ExpiresAt, want, err)
			}
		}
	})
}
