package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
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
