package http_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
)

func fp(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var (
	seqRE  = regexp.MustCompile(`^[0-9]+:[0-9]+$`)
	hashRE = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

func TestClaimWire(t *testing.T) {
	t.Run("FreshTwoStep", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		a := e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k1","place":"gate-1"}`)
		m := wantOK(t, a)
		if m["outcome"] != "fresh" || m["state"] != "pending" || m["place"] != "gate-1" || m["namespace"] != "echo" {
			t.Fatalf("got %s", a.body)
		}
		if s, _ := m["seq"].(string); !seqRE.MatchString(s) {
			t.Fatalf("seq: got %v, want node:counter", m["seq"])
		}
		if h, _ := m["hash"].(string); !hashRE.MatchString(h) {
			t.Fatalf("hash: got %v, want 32 hex digits", m["hash"])
		}
		for k, want := range map[string]time.Time{
			"first_seen":  e.clock.Now(),
			"lease_until": e.clock.Now().Add(30 * time.Second),
			"expires_at":  e.clock.Now().Add(24 * time.Hour),
		} {
			got, err := time.Parse(time.RFC3339Nano, m[k].(string))
			if err != nil || !got.Equal(want) {
				t.Fatalf("%s: got %v, want %v", k, m[k], want)
			}
		}
		if _, ok := m["result"]; ok {
			t.Fatalf("fresh answer carries a result: %s", a.body)
		}
		if a.header.Get("Idempotent-Replayed") != "" {
			t.Fatal("fresh answer flagged replayed")
		}
	})

	t.Run("ReplayReturnsFirstBytes", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		result := []byte{0, 1, 2, 0xff, 0xfe, '"', '\\', '\n', 0x80}
		body := fmt.Sprintf(`{"namespace":"echo","key":"k","fingerprint":%q,"result":%q}`,
			fp("req"), base64.StdEncoding.EncodeToString(result))
		first := wantOK(t, e.post(t, "/v1/claim", "", body))
		if first["outcome"] != "fresh" || first["state"] != "complete" {
			t.Fatalf("first: got %v", first)
		}
		a := e.post(t, "/v1/claim", "", body)
		m := wantOK(t, a)
		if m["outcome"] != "replayed" {
			t.Fatalf("outcome: got %v, want replayed", m["outcome"])
		}
		if got := a.header.Get("Idempotent-Replayed"); got != "true" {
			t.Fatalf("Idempotent-Replayed: got %q, want true", got)
		}
		got, err := base64.StdEncoding.DecodeString(m["result"].(string))
		if err != nil || !bytes.Equal(got, result) {
			t.Fatalf("result: got %x, want %x", got, result)
		}
		if m["seq"] != first["seq"] || m["first_seen"] != first["first_seen"] || m["fingerprint"] != fp("req") {
			t.Fatalf("replay does not describe the first record: %v vs %v", m, first)
		}
	})

	t.Run("EmptyResultIsOneStep", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k","result":""}`))
		if m["state"] != "complete" {
			t.Fatalf("state: got %v, want complete", m["state"])
		}
		a := e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k","result":""}`)
		m = wantOK(t, a)
		if m["outcome"] != "replayed" || m["result"] != "" {
			t.Fatalf("got %s, want replayed with empty result", a.body)
		}
	})

	t.Run("NullMeansAbsent", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k","result":null,"fingerprint":null,"place":null,"expires_at":null}`))
		if m["outcome"] != "fresh" || m["state"] != "pending" {
			t.Fatalf("got %v, want fresh pending", m)
		}
	})

	t.Run("InProgressRetryAfter", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`))
		a := e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`)
		m := wantOK(t, a)
		if m["outcome"] != "in_progress" || m["retry_after"] != json.Number("30") || a.header.Get("Retry-After") != "30" {
			t.Fatalf("got %s, Retry-After %q; want in_progress, 30", a.body, a.header.Get("Retry-After"))
		}
		e.clock.Advance(10500 * time.Millisecond)
		a = e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`)
		m = wantOK(t, a)
		if m["retry_after"] != json.Number("19.5") || a.header.Get("Retry-After") != "20" {
			t.Fatalf("got retry_after %v, Retry-After %q; want 19.5, 20", m["retry_after"], a.header.Get("Retry-After"))
		}
		if _, ok := m["unknown"]; ok {
			t.Fatalf("live lease flagged unknown: %s", a.body)
		}
	})

	t.Run("InProgressUnknown", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`))
		e.clock.Advance(31 * time.Second)
		a := e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`)
		m := wantOK(t, a)
		if m["outcome"] != "in_progress" || m["unknown"] != true {
			t.Fatalf("got %s, want in_progress unknown", a.body)
		}
		if _, ok := m["retry_after"]; ok || a.header.Get("Retry-After") != "" {
			t.Fatalf("unknown outcome carries a retry time: %s", a.body)
		}
	})

	t.Run("RefusedCitesFirstSeen", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		first := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"refuse","key":"ticket","place":"gate-1","result":"b2s="}`))
		e.clock.Advance(time.Minute)
		a := e.post(t, "/v1/claim", "", `{"namespace":"refuse","key":"ticket","place":"gate-2","result":"b2s="}`)
		m := wantOK(t, a)
		if m["outcome"] != "refused" || m["place"] != "gate-1" || m["first_seen"] != first["first_seen"] {
			t.Fatalf("got %s, want refused citing gate-1 at %v", a.body, first["first_seen"])
		}
		if _, ok := m["result"]; ok || a.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("refused answer carries a result or replay flag: %s", a.body)
		}
	})

	t.Run("Mismatch", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		wantOK(t, e.post(t, "/v1/claim", "", fmt.Sprintf(`{"namespace":"echo","key":"k","fingerprint":%q,"result":"AA=="}`, fp("a"))))
		a := e.post(t, "/v1/claim", "", fmt.Sprintf(`{"namespace":"echo","key":"k","fingerprint":%q,"result":"AA=="}`, fp("b")))
		m := wantOK(t, a)
		if m["outcome"] != "mismatch" {
			t.Fatalf("got %s, want mismatch", a.body)
		}
		if _, ok := m["result"]; ok {
			t.Fatalf("mismatch carries the stored result: %s", a.body)
		}
	})

	t.Run("ExpiresAt", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		exp := e.clock.Now().Add(90 * time.Minute).Format(time.RFC3339)
		m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k","expires_at":"`+exp+`"}`))
		if m["expires_at"] != exp {
			t.Fatalf("expires_at: got %v, want %s", m["expires_at"], exp)
		}
	})

	t.Run("RawKeyNamespace", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"raw","key":"order-\u00e9"}`))
		if m["key"] != "order-é" {
			t.Fatalf("key: got %v, want order-é", m["key"])
		}
		m = wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"order-1"}`))
		if _, ok := m["key"]; ok {
			t.Fatal("a namespace without store_raw_key shows the key")
		}
	})
}

func TestClaimsWire(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	a := e.post(t, "/v1/claims", "", `{"claims":[
		{"namespace":"echo","key":"a","result":"YQ=="},
		{"namespace":"echo","key":"b"},
		{"namespace":"echo","key":"a","result":"YQ=="},
		{"namespace":"echo","key":"b"},
		{"namespace":"refuse","key":"t","place":"p1"},
		{"namespace":"refuse","key":"t","place":"p2"}
	]}`)
	m := wantOK(t, a)
	if a.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("batch answer carries Idempotent-Replayed")
	}
	results := m["results"].([]any)
	want := []string{"fresh", "fresh", "replayed", "in_progress", "fresh", "in_progress"}
	if len(results) != len(want) {
		t.Fatalf("got %d results, want %d", len(results), len(want))
	}
	for i, r := range results {
		if got := r.(map[string]any)["outcome"]; got != want[i] {
			t.Errorf("results[%d]: got %v, want %s", i, got, want[i])
		}
	}
	if r := results[2].(map[string]any); r["result"] != "YQ==" {
		t.Errorf("results[2].result: got %v, want YQ==", r["result"])
	}

	t.Run("Empty", func(t *testing.T) {
		m := wantOK(t, e.post(t, "/v1/claims", "", `{"claims":[]}`))
		if rs := m["results"].([]any); len(rs) != 0 {
			t.Fatalf("got %d results, want 0", len(rs))
		}
	})
	t.Run("OneBadClaimRejectsAll", func(t *testing.T) {
		p := wantProblem(t, e.post(t, "/v1/claims", "", `{"claims":[{"namespace":"echo","key":"ok"},{"namespace":"echo","key":"x","fingerprint":"zz"}]}`), 400, spent.EInvalid)
		if !strings.Contains(p["detail"].(string), "claims[1].fingerprint") {
			t.Fatalf("detail does not name the claim: %v", p["detail"])
		}
		m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"ok"}`))
		if m["outcome"] != "fresh" {
			t.Fatalf("a rejected batch wrote claims[0]: %v", m["outcome"])
		}
	})
	t.Run("OverMaxBatch", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(`{"claims":[`)
		for i := range spent.MaxBatch + 1 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"namespace":"echo","key":"k%d"}`, i)
		}
		b.WriteString(`]}`)
		wantProblem(t, e.post(t, "/v1/claims", "", b.String()), 413, spent.ETooLarge)
	})
}

func TestCompleteReleaseGetWire(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`))
	seq := m["seq"].(string)

	t.Run("GetPending", func(t *testing.T) {
		g := wantOK(t, e.post(t, "/v1/get", "", `{"namespace":"echo","key":"k"}`))
		if g["state"] != "pending" || g["seq"] != seq {
			t.Fatalf("got %v", g)
		}
	})
	t.Run("Complete", func(t *testing.T) {
		c := wantOK(t, e.post(t, "/v1/complete", "", `{"namespace":"echo","key":"k","seq":"`+seq+`","result":"aGVsbG8="}`))
		if c["state"] != "complete" || c["result"] != "aGVsbG8=" || c["seq"] != seq {
			t.Fatalf("got %v", c)
		}
		if _, ok := c["lease_until"]; ok {
			t.Fatalf("complete record shows a lease: %v", c)
		}
	})
	t.Run("CompleteTwice", func(t *testing.T) {
		// Not pending any more, whatever the bytes: the ledger checks state
		// before it asks the store.
		wantProblem(t, e.post(t, "/v1/complete", "", `{"namespace":"echo","key":"k","seq":"`+seq+`","result":"b3RoZXI="}`), 409, spent.ENotPending)
	})
	t.Run("GetComplete", func(t *testing.T) {
		g := wantOK(t, e.post(t, "/v1/get", "", `{"namespace":"echo","key":"k"}`))
		if g["result"] != "aGVsbG8=" {
			t.Fatalf("got %v", g)
		}
	})
	t.Run("GetNotFound", func(t *testing.T) {
		wantProblem(t, e.post(t, "/v1/get", "", `{"namespace":"echo","key":"nope"}`), 404, spent.ENotFound)
	})
	t.Run("Release", func(t *testing.T) {
		m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"r"}`))
		a := e.post(t, "/v1/release", "", `{"namespace":"echo","key":"r","seq":"`+m["seq"].(string)+`"}`)
		if got := wantOK(t, a); len(got) != 0 {
			t.Fatalf("release: got %s, want {}", a.body)
		}
		m = wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"r"}`))
		if m["outcome"] != "fresh" {
			t.Fatalf("after release: got %v, want fresh", m["outcome"])
		}
		wantOK(t, e.post(t, "/v1/release", "", `{"namespace":"echo","key":"r","seq":"`+m["seq"].(string)+`"}`))
	})
	t.Run("ByHash", func(t *testing.T) {
		m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"h"}`))
		c := wantOK(t, e.post(t, "/v1/complete", "", `{"namespace":"echo","hash":"`+m["hash"].(string)+`","result":""}`))
		if c["state"] != "complete" || c["result"] != "" {
			t.Fatalf("got %v", c)
		}
	})
	t.Run("SeqMismatch", func(t *testing.T) {
		wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"s"}`))
		wantProblem(t, e.post(t, "/v1/release", "", `{"namespace":"echo","key":"s","seq":"9:999"}`), 409, spent.ESeqMismatch)
	})
	t.Run("LeaseExpiredThenForce", func(t *testing.T) {
		wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"x"}`))
		e.clock.Advance(time.Minute)
		wantProblem(t, e.post(t, "/v1/complete", "", `{"namespace":"echo","key":"x","result":""}`), 409, spent.ELeaseExpired)
		u := wantOK(t, e.post(t, "/v1/unknown", "", `{"namespace":"echo"}`))
		recs := u["records"].([]any)
		if len(recs) != 2 { // s and x
			t.Fatalf("unknown: got %d records, want 2: %v", len(recs), u)
		}
		c := wantOK(t, e.post(t, "/v1/complete", "", `{"namespace":"echo","key":"x","result":"","force":true}`))
		if c["state"] != "complete" {
			t.Fatalf("forced complete: got %v", c)
		}
		wantOK(t, e.post(t, "/v1/release", "", `{"namespace":"echo","key":"s","force":true}`))
		u = wantOK(t, e.post(t, "/v1/unknown", "", `{}`))
		if recs := u["records"].([]any); len(recs) != 0 {
			t.Fatalf("unknown after resolving: got %v", u)
		}
	})
	t.Run("Required", func(t *testing.T) {
		for _, tc := range []struct{ path, body string }{
			{"/v1/claim", `{"namespace":"echo"}`},
			{"/v1/claim", `{"key":"k"}`},
			{"/v1/complete", `{"namespace":"echo","key":"k"}`},
			{"/v1/complete", `{"namespace":"echo","result":""}`},
			{"/v1/release", `{"namespace":"echo"}`},
			{"/v1/get", `{"namespace":"echo"}`},
			{"/v1/claims", `{}`},
		} {
			p := wantProblem(t, e.post(t, tc.path, "", tc.body), 400, spent.EInvalid)
			if !strings.Contains(p["detail"].(string), "required") {
				t.Errorf("%s %s: detail %v", tc.path, tc.body, p["detail"])
			}
		}
	})
}

// TestResultTextWire checks result_text, the UTF-8 text form of a result on
// requests: its bytes are stored as they are (where "paid" given as result
// would decode as base64 to 3 other bytes), answers carry them in result as
// base64, and a request with both forms or invalid text is refused.
func TestResultTextWire(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	replay := func(t *testing.T, key string) map[string]any {
		t.Helper()
		m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"`+key+`"}`))
		if m["outcome"] != "replayed" {
			t.Fatalf("%s: got outcome %v, want replayed", key, m["outcome"])
		}
		return m
	}

	t.Run("ClaimStoresTextAsIs", func(t *testing.T) {
		text := `{"status":"paid"} – é ✓`
		body, _ := json.Marshal(map[string]string{"namespace": "echo", "key": "t1", "result_text": text})
		if m := wantOK(t, e.post(t, "/v1/claim", "", string(body))); m["outcome"] != "fresh" || m["state"] != "complete" {
			t.Fatalf("claim with result_text: got %v, want fresh and complete", m)
		}
		if m := replay(t, "t1"); m["result"] != b64(text) {
			t.Fatalf("replayed result: got %v, want base64 of %q", m["result"], text)
		}
		if _, ok := replay(t, "t1")["result_text"]; ok {
			t.Fatal("answer carries result_text; want result only")
		}
	})
	t.Run("PaidAsResultIsBase64", func(t *testing.T) {
		// The trap result_text exists for: "paid" is valid base64.
		wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"t2","result":"paid"}`))
		if got, _ := base64.StdEncoding.DecodeString(replay(t, "t2")["result"].(string)); string(got) == "paid" || len(got) != 3 {
			t.Fatalf("result \"paid\": stored %q, want the 3 bytes it decodes to", got)
		}
		wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"t3","result_text":"paid"}`))
		if got := replay(t, "t3")["result"]; got != b64("paid") {
			t.Fatalf("result_text \"paid\": stored %v, want base64 of paid", got)
		}
	})
	t.Run("EmptyTextIsOneStep", func(t *testing.T) {
		m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"t4","result_text":""}`))
		if m["state"] != "complete" {
			t.Fatalf("empty result_text: got state %v, want complete", m["state"])
		}
	})
	t.Run("Batch", func(t *testing.T) {
		a := e.post(t, "/v1/claims", "", `{"claims":[{"namespace":"echo","key":"t5","result_text":"ok"},{"namespace":"echo","key":"t6","result":"`+b64("ok")+`"}]}`)
		wantOK(t, a)
		if replay(t, "t5")["result"] != b64("ok") || replay(t, "t6")["result"] != b64("ok") {
			t.Fatal("batch: result_text and result of the same bytes stored differently")
		}
	})
	t.Run("Complete", func(t *testing.T) {
		m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"t7"}`))
		c := wantOK(t, e.post(t, "/v1/complete", "", `{"namespace":"echo","key":"t7","seq":"`+m["seq"].(string)+`","result_text":"shipped"}`))
		if c["state"] != "complete" || c["result"] != b64("shipped") {
			t.Fatalf("complete with result_text: got %v", c)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		for _, tc := range []struct{ name, path, body, detail string }{
			{"Both", "/v1/claim", `{"namespace":"echo","key":"t8","result":"","result_text":""}`, "result and result_text: give one, not both"},
			{"BothInBatch", "/v1/claims", `{"claims":[{"namespace":"echo","key":"t9"},{"namespace":"echo","key":"t10","result":"b2s=","result_text":"ok"}]}`, "claims[1].result and claims[1].result_text: give one, not both"},
			{"BothOnComplete", "/v1/complete", `{"namespace":"echo","key":"t11","result":"b2s=","result_text":"ok"}`, "result and result_text: give one, not both"},
			{"InvalidUTF8", "/v1/claim", "{\"namespace\":\"echo\",\"key\":\"t12\",\"result_text\":\"\xff\"}", "result_text: invalid UTF-8"},
			{"LoneSurrogate", "/v1/claim", `{"namespace":"echo","key":"t13","result_text":"\ud800"}`, "result_text:"},
			{"NotAString", "/v1/complete", `{"namespace":"echo","key":"t14","result_text":5}`, "result_text:"},
			{"CompleteNeedsOne", "/v1/complete", `{"namespace":"echo","key":"t15"}`, "result: required (or result_text)"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := wantProblem(t, e.post(t, tc.path, "", tc.body), 400, spent.EInvalid)
				if d, _ := p["detail"].(string); !strings.Contains(d, tc.detail) {
					t.Fatalf("detail: got %q, want it to contain %q", d, tc.detail)
				}
			})
		}
		// None of the refused claims was stored.
		for _, k := range []string{"t8", "t10", "t12", "t13"} {
			wantProblem(t, e.post(t, "/v1/get", "", `{"namespace":"echo","key":"`+k+`"}`), 404, spent.ENotFound)
		}
	})
}

func TestErrorsWire(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	long := strings.Repeat("k", spent.MaxKeyLen+1)
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"BadHex", "/v1/claim", `{"namespace":"echo","key":"k","fingerprint":"` + strings.Repeat("zz", 32) + `"}`, 400, spent.EInvalid},
		{"ShortHex", "/v1/claim", `{"namespace":"echo","key":"k","fingerprint":"abcd"}`, 400, spent.EInvalid},
		{"BadBase64", "/v1/claim", `{"namespace":"echo","key":"k","result":"not base64!"}`, 400, spent.EInvalid},
		{"UnpaddedBase64", "/v1/claim", `{"namespace":"echo","key":"k","result":"YQ"}`, 400, spent.EInvalid},
		{"URLBase64", "/v1/claim", `{"namespace":"echo","key":"k","result":"-_8="}`, 400, spent.EInvalid},
		{"BadTime", "/v1/claim", `{"namespace":"echo","key":"k","expires_at":"tomorrow"}`, 400, spent.EInvalid},
		{"PastExpiry", "/v1/claim", `{"namespace":"echo","key":"k","expires_at":"2000-01-01T00:00:00Z"}`, 400, spent.EInvalid},
		{"UnknownNamespace", "/v1/claim", `{"namespace":"nope","key":"k"}`, 400, spent.EUnknownNamespace},
		{"KeyTooLong", "/v1/claim", `{"namespace":"echo","key":"` + long + `"}`, 400, spent.EKeyTooLong},
		{"EmptyKey", "/v1/claim", `{"namespace":"echo","key":""}`, 400, spent.EInvalid},
		{"PlaceTooLong", "/v1/claim", `{"namespace":"echo","key":"k","place":"` + strings.Repeat("p", spent.MaxPlaceLen+1) + `"}`, 400, spent.EInvalid},
		{"UnknownField", "/v1/claim", `{"namespace":"echo","key":"k","colour":"red"}`, 400, spent.EInvalid},
		{"FieldNameCase", "/v1/claim", `{"Namespace":"echo","key":"k"}`, 400, spent.EInvalid},
		{"DuplicateField", "/v1/claim", `{"namespace":"echo","key":"k","key":"j"}`, 400, spent.EInvalid},
		{"TrailingGarbage", "/v1/claim", `{"namespace":"echo","key":"k"} x`, 400, spent.EInvalid},
		{"TwoValues", "/v1/claim", `{"namespace":"echo","key":"k"}{"namespace":"echo","key":"k"}`, 400, spent.EInvalid},
		{"NotAnObject", "/v1/claim", `["echo","k"]`, 400, spent.EInvalid},
		{"Empty", "/v1/claim", ``, 400, spent.EInvalid},
		{"WrongType", "/v1/claim", `{"namespace":"echo","key":5}`, 400, spent.EInvalid},
		{"LoneSurrogate", "/v1/claim", `{"namespace":"echo","key":"\ud800"}`, 400, spent.EInvalid},
		{"InvalidUTF8", "/v1/claim", "{\"namespace\":\"echo\",\"key\":\"\xff\"}", 400, spent.EInvalid},
		{"ControlChar", "/v1/claim", "{\"namespace\":\"echo\",\"key\":\"a\x01\"}", 400, spent.EInvalid},
		{"BadSeq", "/v1/release", `{"namespace":"echo","key":"k","seq":"seven"}`, 400, spent.EInvalid},
		{"BadHash", "/v1/release", `{"namespace":"echo","hash":"abc"}`, 400, spent.EInvalid},
		{"ForceNotBool", "/v1/release", `{"namespace":"echo","key":"k","force":"yes"}`, 400, spent.EInvalid},
		{"NegativeLimit", "/v1/unknown", `{"limit":-1}`, 400, spent.EInvalid},
		{"FractionalLimit", "/v1/unknown", `{"limit":1.5}`, 400, spent.EInvalid},
		{"GetUnknownNamespace", "/v1/get", `{"namespace":"nope","key":"k"}`, 400, spent.EUnknownNamespace},
		{"ReleaseNotFound", "/v1/release", `{"namespace":"echo","key":"never"}`, 404, spent.ENotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, e.post(t, tc.path, "", tc.body), tc.status, tc.code)
		})
	}

	t.Run("ContentType", func(t *testing.T) {
		a := request(t, http.MethodPost, e.url+"/v1/claim", strings.NewReader(`{"namespace":"echo","key":"k"}`), "Content-Type", "text/plain")
		wantProblem(t, a, 400, spent.EInvalid)
		a = request(t, http.MethodPost, e.url+"/v1/claim", strings.NewReader(`{"namespace":"echo","key":"ct"}`), "Content-Type", "Application/JSON; charset=utf-8")
		wantOK(t, a)
	})
	t.Run("MethodNotAllowed", func(t *testing.T) {
		a := request(t, http.MethodGet, e.url+"/v1/claim", nil)
		wantProblem(t, a, 405, spent.EInvalid)
		if a.header.Get("Allow") != "POST" {
			t.Fatalf("Allow: got %q, want POST", a.header.Get("Allow"))
		}
		a = request(t, http.MethodPost, e.url+"/healthz", nil)
		wantProblem(t, a, 405, spent.EInvalid)
	})
	t.Run("NoSuchEndpoint", func(t *testing.T) {
		wantProblem(t, e.post(t, "/v2/claim", "", `{}`), 404, spent.EInvalid)
	})
}

// TestStrictJSONDetails checks that a body breaking a rule of strict JSON is
// answered 400 invalid with a detail that names the member at fault, as
// docs/http-api.md promises.
func TestStrictJSONDetails(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	for _, tc := range []struct{ name, path, body, detail string }{
		{"Duplicate", "/v1/claim", `{"namespace":"echo","key":"k","key":"j"}`, "key: given twice"},
		{"DuplicateEscaped", "/v1/claim", `{"namespace":"echo","key":"k","k\u0065y":"j"}`, "key: given twice"},
		{"DuplicateNull", "/v1/claim", `{"namespace":"echo","key":"k","place":null,"place":null}`, "place: given twice"},
		{"DuplicateInBatch", "/v1/claims", `{"claims":[{"namespace":"echo","key":"a"},{"namespace":"echo","key":"b","key":"c"}]}`, "claims[1].key: given twice"},
		{"DuplicateTop", "/v1/claims", `{"claims":[],"claims":[]}`, "claims: given twice"},
		{"Unknown", "/v1/claim", `{"namespace":"echo","key":"k","colour":"red"}`, `unknown field "colour"`},
		{"CaseDiffers", "/v1/claim", `{"namespace":"echo","Key":"k"}`, `unknown field "Key"`},
		{"UnknownInBatch", "/v1/claims", `{"claims":[{"namespace":"echo","key":"a","x":1}]}`, `claims[0].unknown field "x"`},
		{"InvalidUTF8", "/v1/claim", "{\"namespace\":\"echo\",\"key\":\"\xff\"}", "key: invalid UTF-8 in string"},
		{"Trailing", "/v1/claim", `{"namespace":"echo","key":"k"} x`, "malformed JSON: unexpected data after the JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := wantProblem(t, e.post(t, tc.path, "", tc.body), 400, spent.EInvalid)
			if d, _ := p["detail"].(string); !strings.HasPrefix(d, tc.detail) {
				t.Fatalf("detail: got %q, want it to start with %q", d, tc.detail)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	cfg := sphttp.DefaultConfig()
	cfg.MaxBody = 1024
	e := MustServe(t, cfg)
	big := `{"namespace":"echo","key":"k","result":"` + base64.StdEncoding.EncodeToString(make([]byte, 2048)) + `"}`
	t.Run("ContentLength", func(t *testing.T) {
		wantProblem(t, e.post(t, "/v1/claim", "", big), 413, spent.ETooLarge)
	})
	t.Run("Chunked", func(t *testing.T) {
		// A reader of unknown length makes net/http send the body chunked,
		// so the server learns the size only by reading.
		body := io.MultiReader(strings.NewReader(big))
		a := request(t, http.MethodPost, e.url+"/v1/claim", struct{ io.Reader }{body}, "Content-Type", "application/json")
		wantProblem(t, a, 413, spent.ETooLarge)
	})
	t.Run("AtLimit", func(t *testing.T) {
		body := `{"namespace":"echo","key":"k","place":"`
		body += strings.Repeat("p", 1024-len(body)-2) + `"}`
		if len(body) != 1024 {
			t.Fatalf("body of %d bytes", len(body))
		}
		// Place too long for the ledger, but the body itself is accepted.
		wantProblem(t, e.post(t, "/v1/claim", "", body), 400, spent.EInvalid)
	})
	t.Run("ResultOverLedgerLimit", func(t *testing.T) {
		cfg := sphttp.DefaultConfig()
		e := MustServe(t, cfg)
		body := `{"namespace":"echo","key":"k","result":"` + base64.StdEncoding.EncodeToString(make([]byte, spent.DefaultMaxResult+1)) + `"}`
		wantProblem(t, e.post(t, "/v1/claim", "", body), 413, spent.ETooLarge)
	})
}

func TestAuthWire(t *testing.T) {
	e := MustServe(t, authConfig())
	claim := `{"namespace":"echo","key":"k"}`

	t.Run("MissingToken", func(t *testing.T) {
		a := e.post(t, "/v1/claim", "", claim)
		wantProblem(t, a, 401, spent.EUnauthorized)
		if got := a.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
			t.Fatalf("WWW-Authenticate: got %q", got)
		}
	})
	t.Run("UnknownToken", func(t *testing.T) {
		a := e.post(t, "/v1/claim", "wrong-token-0123456789", claim)
		wantProblem(t, a, 401, spent.EUnauthorized)
		if got := a.header.Get("WWW-Authenticate"); !strings.Contains(got, "invalid_token") {
			t.Fatalf("WWW-Authenticate: got %q", got)
		}
	})
	t.Run("OtherScheme", func(t *testing.T) {
		a := request(t, http.MethodPost, e.url+"/v1/claim", strings.NewReader(claim),
			"Content-Type", "application/json", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+tokClaim)))
		wantProblem(t, a, 401, spent.EUnauthorized)
	})
	t.Run("SchemeCaseInsensitive", func(t *testing.T) {
		a := request(t, http.MethodPost, e.url+"/v1/claim", strings.NewReader(`{"namespace":"echo","key":"case"}`),
			"Content-Type", "application/json", "Authorization", "bearer "+tokClaim)
		wantOK(t, a)
	})
	t.Run("TokenPrefixIsNotTheToken", func(t *testing.T) {
		wantProblem(t, e.post(t, "/v1/claim", tokClaim[:len(tokClaim)-1], claim), 401, spent.EUnauthorized)
	})
	t.Run("UnauthorizedBeforeBody", func(t *testing.T) {
		// No token and a malformed body: the credentials are judged first.
		wantProblem(t, e.post(t, "/v1/claim", "", `{`), 401, spent.EUnauthorized)
	})
	t.Run("ClaimScope", func(t *testing.T) {
		m := wantOK(t, e.post(t, "/v1/claim", tokClaim, claim))
		wantOK(t, e.post(t, "/v1/get", tokClaim, claim))
		wantOK(t, e.post(t, "/v1/claims", tokClaim, `{"claims":[{"namespace":"refuse","key":"k"}]}`))
		wantOK(t, e.post(t, "/v1/release", tokClaim, `{"namespace":"echo","key":"k","seq":"`+m["seq"].(string)+`"}`))
	})
	t.Run("NamespaceRestricted", func(t *testing.T) {
		wantOK(t, e.post(t, "/v1/claim", tokEchoOnly, `{"namespace":"echo","key":"mine"}`))
		wantProblem(t, e.post(t, "/v1/claim", tokEchoOnly, `{"namespace":"refuse","key":"k"}`), 403, spent.EForbidden)
		wantProblem(t, e.post(t, "/v1/get", tokEchoOnly, `{"namespace":"refuse","key":"k"}`), 403, spent.EForbidden)
		wantProblem(t, e.post(t, "/v1/claims", tokEchoOnly, `{"claims":[{"namespace":"echo","key":"a"},{"namespace":"refuse","key":"b"}]}`), 403, spent.EForbidden)
		// A namespace the token does not cover is forbidden, whether or not
		// it exists: the answer does not reveal which namespaces exist.
		wantProblem(t, e.post(t, "/v1/claim", tokRefuseOnly, `{"namespace":"nope","key":"k"}`), 403, spent.EForbidden)
	})
	t.Run("ForceNeedsAdmin", func(t *testing.T) {
		wantOK(t, e.post(t, "/v1/claim", tokClaim, `{"namespace":"echo","key":"f"}`))
		e.clock.Advance(time.Minute)
		wantProblem(t, e.post(t, "/v1/complete", tokClaim, `{"namespace":"echo","key":"f","result":"","force":true}`), 403, spent.EForbidden)
		wantProblem(t, e.post(t, "/v1/release", tokClaim, `{"namespace":"echo","key":"f","force":true}`), 403, spent.EForbidden)
		wantProblem(t, e.post(t, "/v1/release", tokEchoOnly, `{"namespace":"echo","key":"f","force":true}`), 403, spent.EForbidden)
		wantProblem(t, e.post(t, "/v1/release", tokRefuseOnly, `{"namespace":"echo","key":"f","force":true}`), 403, spent.EForbidden)
		wantOK(t, e.post(t, "/v1/release", tokEchoAdmin, `{"namespace":"echo","key":"f","force":true}`))
	})
	t.Run("UnknownNeedsAdmin", func(t *testing.T) {
		wantProblem(t, e.post(t, "/v1/unknown", tokClaim, `{"namespace":"echo"}`), 403, spent.EForbidden)
		wantOK(t, e.post(t, "/v1/unknown", tokEchoAdmin, `{"namespace":"echo"}`))
		// All namespaces needs an admin token over all namespaces.
		wantProblem(t, e.post(t, "/v1/unknown", tokEchoAdmin, `{}`), 403, spent.EForbidden)
		wantOK(t, e.post(t, "/v1/unknown", tokAdmin, `{}`))
	})
	t.Run("AdminImpliesClaim", func(t *testing.T) {
		wantOK(t, e.post(t, "/v1/claim", tokAdmin, `{"namespace":"refuse","key":"adm"}`))
	})
	t.Run("ProbesOpen", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			if a := request(t, http.MethodGet, e.url+p, nil); a.status != 200 {
				t.Errorf("%s: got %d, want 200", p, a.status)
			}
		}
	})
}

func TestNewServerConfig(t *testing.T) {
	l, err := spent.NewLedger(context.Background(), inmem.New(), ledgerConfig(time.Now))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  sphttp.Config
	}{
		{"ShortToken", sphttp.Config{Tokens: []sphttp.Token{{Token: "short", Scopes: []sphttp.Scope{sphttp.ScopeClaim}}}}},
		{"SpaceInToken", sphttp.Config{Tokens: []sphttp.Token{{Token: "has a space in it 0123", Scopes: []sphttp.Scope{sphttp.ScopeClaim}}}}},
		{"NoScopes", sphttp.Config{Tokens: []sphttp.Token{{Token: tokClaim}}}},
		{"UnknownScope", sphttp.Config{Tokens: []sphttp.Token{{Token: tokClaim, Scopes: []sphttp.Scope{"root"}}}}},
		{"Duplicate", sphttp.Config{Tokens: []sphttp.Token{{Token: tokClaim, Scopes: []sphttp.Scope{sphttp.ScopeClaim}}, {Token: tokClaim, Scopes: []sphttp.Scope{sphttp.ScopeAdmin}}}}},
		{"UnknownNamespace", sphttp.Config{Tokens: []sphttp.Token{{Token: tokClaim, Namespaces: []string{"nope"}, Scopes: []sphttp.Scope{sphttp.ScopeClaim}}}}},
		{"NegativeMaxBody", sphttp.Config{MaxBody: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := sphttp.NewServer(l, tc.cfg); err == nil {
				t.Fatal("got nil error")
			}
		})
	}
	if _, err := sphttp.NewServer(nil, sphttp.DefaultConfig()); err == nil {
		t.Fatal("nil ledger: got nil error")
	}
	t.Run("ZeroConfig", func(t *testing.T) {
		if _, err := sphttp.NewServer(l, sphttp.Config{}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFailClosed(t *testing.T) {
	errDisk := errors.New("disk on fire")
	t.Run("WriteFails", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		e.store.SetFaults(inmem.Faults{Before: func(op string) error {
			if op == "claim" || op == "claim_batch" {
				return errDisk
			}
			return nil
		}})
		for range 5 {
			p := wantProblem(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`), 503, spent.EUnavailable)
			if strings.Contains(p["detail"].(string), "fire") {
				t.Fatalf("detail leaks the store's error: %v", p["detail"])
			}
		}
		wantProblem(t, e.post(t, "/v1/claims", "", `{"claims":[{"namespace":"echo","key":"k"}]}`), 503, spent.EUnavailable)
		if n := e.store.Len(); n != 0 {
			t.Fatalf("store holds %d records after failed writes", n)
		}
		e.store.SetFaults(inmem.Faults{})
		if m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`)); m["outcome"] != "fresh" {
			t.Fatalf("after recovery: got %v, want fresh", m["outcome"])
		}
	})
	t.Run("AmbiguousWriteUnreadable", func(t *testing.T) {
		// The write lands, its acknowledgement is lost and the read-back
		// fails too: the answer must be an error, and the record is there.
		e := MustServe(t, sphttp.DefaultConfig())
		e.store.SetFaults(inmem.Faults{
			After: func(op string) error {
				if op == "claim" {
					return errDisk
				}
				return nil
			},
			Before: func(op string) error {
				if op == "get" {
					return errDisk
				}
				return nil
			},
		})
		wantProblem(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`), 503, spent.EUnavailable)
		e.store.SetFaults(inmem.Faults{})
		if m := wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`)); m["outcome"] == "fresh" {
			t.Fatal("a key whose write landed was answered fresh twice")
		}
	})
	t.Run("ReadFails", func(t *testing.T) {
		e := MustServe(t, sphttp.DefaultConfig())
		e.store.SetFaults(inmem.Faults{Before: func(string) error { return errDisk }})
		wantProblem(t, e.post(t, "/v1/get", "", `{"namespace":"echo","key":"k"}`), 503, spent.EUnavailable)
		wantProblem(t, e.post(t, "/v1/release", "", `{"namespace":"echo","key":"k"}`), 503, spent.EUnavailable)
		wantProblem(t, e.post(t, "/v1/complete", "", `{"namespace":"echo","key":"k","result":""}`), 503, spent.EUnavailable)
		wantProblem(t, e.post(t, "/v1/unknown", "", `{}`), 503, spent.EUnavailable)
		wantProblem(t, request(t, http.MethodGet, e.url+"/readyz", nil), 503, spent.EUnavailable)
		if a := request(t, http.MethodGet, e.url+"/healthz", nil); a.status != 200 {
			t.Fatalf("healthz with a broken store: got %d, want 200", a.status)
		}
	})
}

// shortStore answers batches with one result too few, a bug the ledger
// reports as internal.
type shortStore struct{ *inmem.Store }

func (s shortStore) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	res, err := s.Store.ClaimBatch(ctx, ops)
	if len(res) > 0 {
		res = res[:len(res)-1]
	}
	return res, err
}

// panicStore panics on Get.
type panicStore struct{ *inmem.Store }

func (panicStore) Get(context.Context, spent.Hash, time.Time) (spent.Record, error) {
	panic("boom")
}

func TestInternalError(t *testing.T) {
	t.Run("LedgerBug", func(t *testing.T) {
		e := MustServeStore(t, sphttp.DefaultConfig(), shortStore{inmem.New()})
		p := wantProblem(t, e.post(t, "/v1/claims", "", `{"claims":[{"namespace":"echo","key":"k"}]}`), 500, spent.EInternal)
		if p["detail"] != "internal error" {
			t.Fatalf("detail: got %v, want a bland message", p["detail"])
		}
	})
	t.Run("Panic", func(t *testing.T) {
		e := MustServeStore(t, sphttp.DefaultConfig(), panicStore{inmem.New()})
		wantProblem(t, e.post(t, "/v1/get", "", `{"namespace":"echo","key":"k"}`), 500, spent.EInternal)
		// The server lives on.
		wantOK(t, e.post(t, "/v1/claim", "", `{"namespace":"echo","key":"k"}`))
	})
}

func TestProbes(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	if m := wantOK(t, request(t, http.MethodGet, e.url+"/healthz", nil)); m["status"] != "ok" {
		t.Fatalf("healthz: got %v", m)
	}
	if m := wantOK(t, request(t, http.MethodGet, e.url+"/readyz", nil)); m["status"] != "ready" {
		t.Fatalf("readyz: got %v", m)
	}
	if a := request(t, http.MethodHead, e.url+"/healthz", nil); a.status != 200 || len(a.body) != 0 {
		t.Fatalf("HEAD healthz: got %d %q", a.status, a.body)
	}
	t.Run("CustomReady", func(t *testing.T) {
		cfg := sphttp.DefaultConfig()
		cfg.Ready = func(context.Context) error { return errors.New("replica lagging") }
		e := MustServe(t, cfg)
		wantProblem(t, request(t, http.MethodGet, e.url+"/readyz", nil), 503, spent.EUnavailable)
	})
}
