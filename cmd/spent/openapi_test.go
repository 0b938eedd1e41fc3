package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/spentledger/spent"
	spentcmd "github.com/spentledger/spent/cmd/spent"
	"github.com/spentledger/spent/console"
	"github.com/spentledger/spent/ecash"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/privacypass"
	"github.com/spentledger/spent/wallet"
)

// The OpenAPI tests check http/openapi.json, as the server answers it at
// /v1/openapi.json, with kin-openapi (openapi3 to load and validate the
// document, openapi3filter to validate each request and answer against
// it). kin-openapi validates OpenAPI 3.1 documents with a JSON Schema
// 2020-12 validator (santhosh-tekuri/jsonschema), which covers what the
// document uses: type arrays with null, const, not, anyOf,
// contentMediaType and unevaluatedProperties.

// loadOpenAPI fetches the document from the server at addr, loads and
// validates it, and returns it with a router over it.
func loadOpenAPI(t *testing.T, addr string) (*openapi3.T, routers.Router) {
	t.Helper()
	resp, err := http.Get(addr + sphttp.OpenAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", sphttp.OpenAPIPath, resp.StatusCode, err)
	}
	if !bytes.Equal(b, sphttp.OpenAPI) {
		t.Fatalf("GET %s: the answer is not http/openapi.json", sphttp.OpenAPIPath)
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("loading the document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: addr}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, r
}

// TestOpenAPIDocument validates the document itself, and checks that its
// schemas say what the wire says where the server is strict.
func TestOpenAPIDocument(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(sphttp.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("http/openapi.json is not valid OpenAPI: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q: want 3.1", doc.OpenAPI)
	}
	schema := func(name string) *openapi3.Schema {
		s := doc.Components.Schemas[name]
		if s == nil {
			t.Fatalf("no schema %s", name)
		}
		return s.Value
	}
	for _, c := range []struct {
		schema, json string
		ok           bool
	}{
		{"ClaimRequest", `{"namespace":"payments","key":"k"}`, true},
		{"ClaimRequest", `{"namespace":"payments","key":"k","place":null,"result":null,"expires_at":null}`, true},
		{"ClaimRequest", `{"namespace":"payments","key":"k","result":"cGFpZA=="}`, true},
		{"ClaimRequest", `{"namespace":"payments","key":"k","result_text":"paid"}`, true},
		{"ClaimRequest", `{"namespace":"payments","key":"k","result":"cGFpZA==","result_text":"paid"}`, false},
		{"ClaimRequest", `{"namespace":"payments","key":"k","result":null,"result_text":"paid"}`, true},
		{"ClaimRequest", `{"namespace":"payments","key":"k","result":"pa!d"}`, false},
		{"ClaimRequest", `{"namespace":"payments","key":"k","colour":"red"}`, false},
		{"ClaimRequest", `{"namespace":"payments"}`, false},
		{"ClaimRequest", `{"namespace":"payments","key":""}`, false},
		{"ClaimRequest", `{"namespace":"payments","key":"k","fingerprint":"abc"}`, false},
		{"ClaimRequest", `{"namespace":"payments","key":"k","expires_at":"tomorrow"}`, false},
		{"CompleteRequest", `{"namespace":"payments","key":"k","seq":"1:3","result":""}`, true},
		{"CompleteRequest", `{"namespace":"payments","hash":"0123456789abcdef0123456789ABCDEF","result_text":"paid"}`, true},
		{"CompleteRequest", `{"namespace":"payments","key":"k","result":"","result_text":""}`, false},
		{"CompleteRequest", `{"namespace":"payments","key":"k"}`, false},
		{"CompleteRequest", `{"namespace":"payments","key":"k","result":"","seq":"13"}`, false},
		{"CompleteRequest", `{"namespace":"payments","key":"k","result":"","hash":"0123"}`, false},
		{"Record", `{"namespace":"p","hash":"0123456789abcdef0123456789abcdef","state":"complete","first_seen":"2025-03-01T12:00:00.5Z","place":"","expires_at":"2025-03-02T12:00:00Z","seq":"1:3"}`, true},
		{"Record", `{"namespace":"p","hash":"0123456789abcdef0123456789abcdef","state":"complete","first_seen":"2025-03-01T12:00:00+01:00","place":"","expires_at":"2025-03-02T12:00:00Z","seq":"1:3"}`, false},
	} {
		var v any
		if err := json.Unmarshal([]byte(c.json), &v); err != nil {
			t.Fatal(err)
		}
		err := schema(c.schema).VisitJSON(v, openapi3.EnableJSONSchema2020())
		if (err == nil) != c.ok {
			t.Errorf("%s %s: valid %v, want %v (%v)", c.schema, c.json, err == nil, c.ok, err)
		}
	}
}

// exchange is one request and its answer, as the checker saw them.
type exchange struct {
	method, path string
	status       int
	code         string // the problem code, if any
	outcome      string // the claim outcome, if any
	reqErr       error  // the request against the document
	reqBody      []byte
	header       http.Header
	body         []byte
}

// checker is an http.RoundTripper that validates every request and answer
// against the document. Answers must always be valid; requests are
// expected valid unless the test says otherwise (it sends invalid ones on
// purpose, and then the document must refuse them as the server does).
type checker struct {
	t      *testing.T
	doc    *openapi3.T
	router routers.Router

	mu   sync.Mutex
	seen []exchange
}

func newChecker(t *testing.T, addr string) *checker {
	doc, r := loadOpenAPI(t, addr)
	// The issuer directory is JSON under a media type of its own.
	openapi3filter.RegisterBodyDecoder(privacypass.DirectoryMediaType, openapi3filter.JSONBodyDecoder)
	// The document leaves answers open (later versions may add members);
	// the test closes them, so that a member the server sends and the
	// document lacks fails here.
	for path, p := range doc.Paths.Map() {
		if path == sphttp.OpenAPIPath {
			continue // an OpenAPI document, described by its own schema
		}
		for _, op := range p.Operations() {
			for _, rr := range op.Responses.Map() {
				if rr.Value == nil {
					continue
				}
				for ct, mt := range rr.Value.Content {
					if strings.HasSuffix(ct, "json") && mt.Schema != nil && mt.Schema.Value != nil && mt.Schema.Value.Type.Is("object") || ct == "application/json" {
						closed := &openapi3.Schema{AllOf: openapi3.SchemaRefs{mt.Schema}}
						closed.UnevaluatedProperties = openapi3.BoolSchema{Has: new(false)}
						mt.Schema = openapi3.NewSchemaRef("", closed)
					}
				}
			}
		}
	}
	return &checker{t: t, doc: doc, router: r}
}

func (c *checker) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.roundTrip(req, true)
}

// client returns an http.Client whose requests the checker validates.
func (c *checker) client() *http.Client { return &http.Client{Transport: c} }

// roundTrip sends req, validates it and its answer, and records both.
func (c *checker) roundTrip(req *http.Request, wantValid bool) (*http.Response, error) {
	c.t.Helper()
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	ctx := context.Background()
	route, params, findErr := c.router.FindRoute(req)
	var in *openapi3filter.RequestValidationInput
	reqErr := findErr
	if findErr == nil {
		in = &openapi3filter.RequestValidationInput{Request: req.Clone(ctx), PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
		in.Request.Body = io.NopCloser(bytes.NewReader(body))
		reqErr = openapi3filter.ValidateRequest(ctx, in)
	}
	if wantValid && reqErr != nil {
		c.t.Errorf("%s %s %.80q: the document refuses a request the test meant valid: %v", req.Method, req.URL.Path, body, reqErr)
	} else if !wantValid && reqErr == nil {
		c.t.Errorf("%s %s %.80q: the document accepts a request the test meant invalid", req.Method, req.URL.Path, body)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	x := exchange{method: req.Method, path: req.URL.Path, status: resp.StatusCode, reqErr: reqErr, reqBody: body, header: resp.Header, body: rb}
	var v struct{ Code, Outcome string }
	if json.Unmarshal(rb, &v) == nil {
		x.code, x.outcome = v.Code, v.Outcome
	}
	if findErr == nil {
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
			Body: io.NopCloser(bytes.NewReader(rb)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			c.t.Errorf("%s %s: answer %d %.200q does not match the document: %v", req.Method, req.URL.Path, resp.StatusCode, rb, err)
		}
	} else {
		c.checkUnrouted(req, resp, rb)
	}
	c.mu.Lock()
	c.seen = append(c.seen, x)
	c.mu.Unlock()
	return resp, nil
}

// checkUnrouted validates the answer to a request the document has no
// operation for against the component the document names for it.
func (c *checker) checkUnrouted(req *http.Request, resp *http.Response, body []byte) {
	c.t.Helper()
	name := "NotAnEndpoint"
	if resp.StatusCode == http.StatusMethodNotAllowed {
		name = "MethodNotAllowed"
		if req.URL.Path == privacypass.RedeemPath || strings.HasPrefix(req.URL.Path, "/token-request") || strings.HasPrefix(req.URL.Path, "/.well-known/") {
			name = "PrivacyPassMethodNotAllowed"
		}
		if strings.HasPrefix(req.URL.Path, "/v1/ecash/") {
			name = "EcashMethodNotAllowed"
		}
	}
	rr := c.doc.Components.Responses[name].Value
	mt := rr.Content.Get(resp.Header.Get("Content-Type"))
	if mt == nil {
		c.t.Errorf("%s %s: answer %d of type %q; the document's %s has no such content", req.Method, req.URL.Path, resp.StatusCode, resp.Header.Get("Content-Type"), name)
		return
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		c.t.Errorf("%s %s: answer %q: %v", req.Method, req.URL.Path, body, err)
		return
	}
	if err := mt.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		c.t.Errorf("%s %s: answer %d %q does not match the document's %s: %v", req.Method, req.URL.Path, resp.StatusCode, body, name, err)
	}
	for h := range rr.Headers {
		if resp.Header.Get(h) == "" {
			c.t.Errorf("%s %s: answer %d lacks the %s header of %s", req.Method, req.URL.Path, resp.StatusCode, h, name)
		}
	}
}

// call sends one request and returns its answer; wantValid says whether
// the document must accept the request.
func (c *checker) call(method, url, ctype, auth string, body []byte, wantValid bool, header ...string) *http.Response {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := c.roundTrip(req, wantValid)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp
}

// want fails unless the last answer has the status and, if given, the
// problem code or outcome.
func (c *checker) want(status int, codeOrOutcome string) exchange {
	c.t.Helper()
	c.mu.Lock()
	x := c.seen[len(c.seen)-1]
	c.mu.Unlock()
	if x.status != status || codeOrOutcome != "" && x.code != codeOrOutcome && x.outcome != codeOrOutcome {
		c.t.Fatalf("%s %s: got %d %s, want %d %s", x.method, x.path, x.status, x.body, status, codeOrOutcome)
	}
	return x
}

// jsonOf decodes the last answer's body.
func jsonOf(t *testing.T, x exchange) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(x.body, &m); err != nil {
		t.Fatalf("%s: %v", x.body, err)
	}
	return m
}

const (
	adminToken = "admin-token-0123456789abcdef"
	claimToken = "claim-token-0123456789abcdef"
	attester   = "attester-token-0123456789abcdef"
	testKEK    = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
)

// openAPIConfig serves the ledger with tokens, the Privacy Pass issuer and
// the e-cash issuer; a body budget of one body, so that one chunked
// request fills it; leases of a second.
const openAPIConfig = `fence_interval = "1s"
max_body = 1048576
max_bodies = 1048576

[namespaces.payments]
mode = "echo"
lease = "1s"
on_lease_expiry = "hold"

[namespaces.tickets]
mode = "refuse"
lease = "1s"
on_lease_expiry = "retake"

[[tokens]]
token = "` + adminToken + `"
scopes = ["admin"]

[[tokens]]
token = "` + claimToken + `"
namespaces = ["payments"]
scopes = ["claim"]

[privacypass]
issuer_name = "issuer.example"
origin_info = ["origin.example"]
token_types = [2]
epoch = "24h"
grace = "6h"
quota_per_epoch = 2
challenge_ttl = "2s"
attester_tokens = ["` + attester + `"]

[ecash]
issuer_name = "bank.example"
denominations = [1, 2, 5, 10]
difficulty = 4
issue_value = 20
`

// Codes the exchanges test cannot provoke: a bug (internal). Their answers
// have the same shape as every other problem.
var unprovoked = map[string]bool{
	"LedgerProblem internal":      true,
	"PrivacyPassProblem internal": true,
	"EcashProblem internal":       true,
	// Every store of spent serve keeps the index by seq; package http's
	// tests provoke it with a store that keeps none.
	"LedgerProblem no_seq_index": true,
}

// TestOpenAPIExchanges sends requests of every kind to running servers
// (every route, every claim outcome, every error code that a healthy
// server can give) and validates each request and answer against the
// served document.
func TestOpenAPIExchanges(t *testing.T) {
	if testing.Short() {
		t.Skip("generates RSA keys; skipped with -short")
	}
	s := MustServe(t, t.TempDir(), env{"SPENT_KEK": testKEK}, nil, "--config", WriteConfig(t, openAPIConfig))
	c := newChecker(t, s.Addr)
	ledgerExchanges(t, c, s.Addr)
	privacypassExchanges(t, c, s.Addr)
	ecashExchanges(t, c, s.Addr)

	// Without tokens, the loopback guard answers other Host names.
	open := MustServe(t, t.TempDir(), nil, nil)
	oc := newChecker(t, open.Addr)
	oc.call("POST", open.Addr+"/v1/claim", "application/json", "", []byte(`{"namespace":"default","key":"k"}`), true, "Host", "evil.example")
	oc.want(421, "host_not_allowed")
	oc.call("GET", open.Addr+"/healthz", "", "", nil, true, "Host", "evil.example:80")
	oc.want(421, "host_not_allowed")

	// A store that fails behind the Privacy Pass and e-cash surfaces.
	fc := failingStoreExchanges(t)

	// Every code of every surface was seen, bar those listed above.
	seen := map[string]bool{}
	for _, x := range slices.Concat(c.seen, oc.seen, fc.seen) {
		if x.code == "" {
			continue
		}
		switch {
		case strings.Contains(string(x.body), "docs/http-api.md"):
			seen["LedgerProblem "+x.code] = true
		case strings.Contains(string(x.body), "docs/privacypass.md"):
			seen["PrivacyPassProblem "+x.code] = true
		case strings.Contains(string(x.body), "docs/ecash.md"):
			seen["EcashProblem "+x.code] = true
		}
	}
	for _, surface := range []string{"LedgerProblem", "PrivacyPassProblem", "EcashProblem"} {
		for _, code := range c.doc.Components.Schemas[surface].Value.AllOf[1].Value.Properties["code"].Value.Enum {
			k := surface + " " + code.(string)
			if !seen[k] && !unprovoked[k] {
				t.Errorf("%s: no exchange gave this code", k)
			}
		}
	}
	// Every operation of the document was exercised.
	done := map[string]bool{}
	for _, x := range append(c.seen, oc.seen...) {
		if x.reqErr == nil || !errors.Is(x.reqErr, routers.ErrPathNotFound) && !errors.Is(x.reqErr, routers.ErrMethodNotAllowed) {
			done[x.method+" "+x.path] = true
		}
	}
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			if !done[method+" "+path] {
				t.Errorf("%s %s: no exchange", method, path)
			}
		}
	}
	t.Logf("%d exchanges validated", len(c.seen)+len(oc.seen))
}

func ledgerExchanges(t *testing.T, c *checker, addr string) {
	admin, claim := "Bearer "+adminToken, "Bearer "+claimToken
	post := func(path, auth, body string, valid bool) exchange {
		t.Helper()
		c.call("POST", addr+path, "application/json", auth, []byte(body), valid)
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.seen[len(c.seen)-1]
	}
	fp1, fp2 := strings.Repeat("ab", 32), strings.Repeat("cd", 32)

	// The outcomes.
	post("/v1/claim", claim, `{"namespace":"payments","key":"order-1","fingerprint":"`+fp1+`","place":"api-1"}`, true)
	seq1 := jsonOf(t, c.want(200, "fresh"))["seq"].(string)
	post("/v1/claim", claim, `{"namespace":"payments","key":"order-1","fingerprint":"`+fp1+`"}`, true)
	if x := c.want(200, "in_progress"); x.header.Get("Retry-After") == "" {
		t.Fatalf("in_progress without Retry-After: %v", x.header)
	}
	post("/v1/complete", claim, `{"namespace":"payments","key":"order-1","seq":"`+seq1+`","result":"eyJpZCI6ImNoXzEifQ=="}`, true)
	c.want(200, "")
	post("/v1/claim", claim, `{"namespace":"payments","key":"order-1","fingerprint":"`+fp1+`"}`, true)
	if x := c.want(200, "replayed"); x.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed without Idempotent-Replayed: %v", x.header)
	}
	post("/v1/claim", claim, `{"namespace":"payments","key":"order-1","fingerprint":"`+fp2+`"}`, true)
	c.want(200, "mismatch")
	post("/v1/claim", admin, `{"namespace":"tickets","key":"ticket-1","place":"gate-3","result":"","expires_at":null}`, true)
	c.want(200, "fresh")
	post("/v1/claim", admin, `{"namespace":"tickets","key":"ticket-1","place":"gate-4","result":""}`, true)
	c.want(200, "refused")
	post("/v1/claims", admin, `{"claims":[{"namespace":"tickets","key":"ticket-2","result":""},{"namespace":"tickets","key":"ticket-1","result":""},{"namespace":"payments","key":"order-1","fingerprint":"`+fp1+`"}]}`, true)
	c.want(200, "")
	post("/v1/get", claim, `{"namespace":"payments","key":"order-1"}`, true)
	c.want(200, "")

	// Results as text (result_text), alone and in a batch, and the two
	// members together, which the document and the server both refuse.
	post("/v1/claim", admin, `{"namespace":"tickets","key":"ticket-text","result_text":"admitted"}`, true)
	c.want(200, "fresh")
	post("/v1/claims", admin, `{"claims":[{"namespace":"tickets","key":"ticket-text-2","result_text":"é"}]}`, true)
	c.want(200, "")
	post("/v1/claim", claim, `{"namespace":"payments","key":"order-text"}`, true)
	seqText := jsonOf(t, c.want(200, "fresh"))["seq"].(string)
	post("/v1/complete", claim, `{"namespace":"payments","key":"order-text","seq":"`+seqText+`","result_text":"paid"}`, true)
	c.want(200, "")
	post("/v1/claim", admin, `{"namespace":"tickets","key":"ticket-both","result":"","result_text":""}`, false)
	c.want(400, "invalid")

	// Complete and release, and their conflicts.
	post("/v1/complete", claim, `{"namespace":"payments","key":"order-1","seq":"`+seq1+`","result":""}`, true)
	c.want(409, "not_pending")
	post("/v1/claim", claim, `{"namespace":"payments","key":"order-2"}`, true)
	seq2 := jsonOf(t, c.want(200, "fresh"))["seq"].(string)
	post("/v1/complete", claim, `{"namespace":"payments","key":"order-2","seq":"1:999999999","result":""}`, true)
	c.want(409, "seq_mismatch")
	post("/v1/release", claim, `{"namespace":"payments","key":"order-2","seq":"`+seq2+`"}`, true)
	c.want(200, "")
	post("/v1/claim", claim, `{"namespace":"payments","key":"order-3","expires_at":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`, true)
	c.want(200, "fresh")
	time.Sleep(1100 * time.Millisecond)
	post("/v1/complete", claim, `{"namespace":"payments","key":"order-3","result":""}`, true)
	c.want(409, "lease_expired")
	post("/v1/claim", claim, `{"namespace":"payments","key":"order-3"}`, true)
	if m := jsonOf(t, c.want(200, "in_progress")); m["unknown"] != true {
		t.Fatalf("claim after the lease ran out under hold: %v, want unknown", m)
	}
	post("/v1/unknown", admin, `{"namespace":"payments","limit":10}`, true)
	recs := jsonOf(t, c.want(200, ""))["records"].([]any)
	if len(recs) != 1 {
		t.Fatalf("unknown outcomes: %v, want order-3", recs)
	}
	hash := recs[0].(map[string]any)["hash"].(string)
	post("/v1/release", admin, `{"namespace":"payments","hash":"`+hash+`","force":true}`, true)
	c.want(200, "")
	post("/v1/unknown", admin, `{}`, true)
	c.want(200, "")

	// Introspection by seq.
	post("/v1/seq", admin, `{"node":1,"last":3}`, true)
	if recs := jsonOf(t, c.want(200, ""))["records"].([]any); len(recs) != 3 {
		t.Fatalf("seq, last 3: %v, want 3 records", recs)
	}
	post("/v1/seq", admin, `{"node":1,"around":2,"limit":4}`, true)
	c.want(200, "")
	post("/v1/seq", admin, `{"node":1,"from":1,"to":2}`, true)
	c.want(200, "")
	post("/v1/seq", admin, `{"node":1,"last":3,"around":2}`, true)
	c.want(400, "invalid")
	post("/v1/seq", admin, `{"node":1,"last":10001}`, false)
	c.want(400, "invalid")
	post("/v1/seq", claim, `{"node":1,"last":3}`, true)
	c.want(403, "forbidden")

	// Errors of the ledger.
	post("/v1/get", claim, `{"namespace":"payments","key":"never"}`, true)
	c.want(404, "not_found")
	post("/v1/complete", claim, `{"namespace":"payments","key":"never","result":""}`, true)
	c.want(404, "not_found")
	post("/v1/release", claim, `{"namespace":"payments","key":"never"}`, true)
	c.want(404, "not_found")
	post("/v1/claim", admin, `{"namespace":"nowhere","key":"k"}`, true)
	c.want(400, "unknown_namespace")
	post("/v1/claim", admin, `{"namespace":"payments","key":"`+strings.Repeat("é", 300)+`"}`, true)
	c.want(400, "key_too_long")
	post("/v1/claim", admin, `{"namespace":"payments","key":"k","result":"","expires_at":"2999-01-01T00:00:00Z"}`, true)
	c.want(400, "expiry_too_long")
	for _, bad := range []string{
		`{"namespace":"payments","key":"k","colour":"red"}`,
		`{"namespace":"payments","key":"k","key":"j"}`,
		`{"namespace":"payments","key":""}`,
		`{"namespace":"payments","key":"k","fingerprint":"abc"}`,
		`{"namespace":"payments","key":"k","result":"pa!d"}`,
		`{"namespace":"payments","key":"k","expires_at":"tomorrow"}`,
		`{"namespace":"payments","key":7}`,
	} {
		post("/v1/claim", admin, bad, strings.Contains(bad, `"key":"j"`))
		c.want(400, "invalid")
	}
	post("/v1/complete", admin, `{"namespace":"payments","key":"k","seq":"13","result":""}`, false)
	c.want(400, "invalid")
	post("/v1/complete", admin, `{"namespace":"payments","key":"k"}`, false)
	c.want(400, "invalid")
	post("/v1/unknown", admin, `{"limit":10001}`, false)
	c.want(400, "invalid")
	c.call("POST", addr+"/v1/claim", "text/plain", admin, []byte(`{"namespace":"payments","key":"k"}`), false)
	c.want(400, "invalid")
	post("/v1/claim", "", `{"namespace":"payments","key":"k"}`, true)
	if x := c.want(401, "unauthorized"); x.header.Get("WWW-Authenticate") != `Bearer realm="spent"` {
		t.Fatalf("401 without a token: WWW-Authenticate %q", x.header.Get("WWW-Authenticate"))
	}
	post("/v1/claim", "Bearer not-a-configured-token-at-all", `{"namespace":"payments","key":"k"}`, true)
	c.want(401, "unauthorized")
	post("/v1/claim", claim, `{"namespace":"tickets","key":"k"}`, true)
	c.want(403, "forbidden")
	post("/v1/release", claim, `{"namespace":"payments","key":"order-1","force":true}`, true)
	c.want(403, "forbidden")
	post("/v1/unknown", claim, `{"namespace":"payments"}`, true)
	c.want(403, "forbidden")
	var batch strings.Builder
	batch.WriteString(`{"claims":[`)
	for i := range 10001 {
		if i > 0 {
			batch.WriteByte(',')
		}
		fmt.Fprintf(&batch, `{"namespace":"tickets","key":"b%d"}`, i)
	}
	batch.WriteString(`]}`)
	post("/v1/claims", admin, batch.String(), false)
	c.want(413, "too_large")
	c.call("POST", addr+"/v1/claim", "application/json", admin, bytes.Repeat([]byte(" "), 1<<20+1), false)
	c.want(413, "too_large")

	// The budget of bodies in flight: a chunked request that has not
	// ended holds all of it, and the next request with a body is 503.
	pr, pw := io.Pipe()
	held := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("POST", addr+"/v1/claim", pr)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", admin)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	pw.Write([]byte(`{"namespace":"tickets",`))
	for i := 0; ; i++ {
		time.Sleep(50 * time.Millisecond)
		post("/v1/claim", admin, `{"namespace":"tickets","key":"budget-`+fmt.Sprint(i)+`","result":""}`, true)
		c.mu.Lock()
		x := c.seen[len(c.seen)-1]
		c.mu.Unlock()
		if x.status == 503 {
			c.want(503, "unavailable")
			break
		}
		if i == 100 {
			t.Fatalf("the budget never filled: last answer %d %s", x.status, x.body)
		}
	}
	pw.Write([]byte(`"key":"held","result":""}`))
	pw.Close()
	if err := <-held; err != nil {
		t.Fatalf("the request that held the budget: %v", err)
	}

	// Methods and paths the server does not answer.
	c.call("GET", addr+"/v1/claim", "", admin, nil, false)
	c.want(405, "invalid")
	c.call("POST", addr+"/healthz", "application/json", "", []byte(`{}`), false)
	c.want(405, "invalid")
	c.call("DELETE", addr+sphttp.OpenAPIPath, "", "", nil, false)
	c.want(405, "invalid")
	c.call("POST", addr+"/v1/nothing-here", "application/json", admin, []byte(`{}`), false)
	c.want(404, "invalid")

	// Probes, metrics and the document.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", sphttp.OpenAPIPath} {
		for _, m := range []string{"GET", "HEAD"} {
			c.call(m, addr+p, "", "", nil, true)
			c.want(200, "")
		}
	}
	c.call("GET", addr+"/metrics", "", "", nil, true, "Accept", "application/openmetrics-text; version=1.0.0")
	c.want(200, "")
}

func privacypassExchanges(t *testing.T, c *checker, addr string) {
	ctx := context.Background()
	pc := &privacypass.Client{HTTPClient: c.client(), AttesterToken: attester}
	dir, err := pc.Directory(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	c.call("HEAD", addr+privacypass.DirectoryPath, "", "", nil, true)
	etag := c.want(200, "").header.Get("ETag")
	c.call("GET", addr+privacypass.DirectoryPath, "", "", nil, true, "If-None-Match", etag)
	c.want(304, "")

	// A challenge from a refused redemption, a token for it, one spend.
	c.call("POST", addr+privacypass.RedeemPath, "", "", nil, true)
	x := c.want(401, "token_required")
	chs, err := privacypass.ParseChallenges(x.header)
	if err != nil || len(chs) == 0 {
		t.Fatalf("challenges of a 401: %v, %v", chs, err)
	}
	tok, err := pc.Issue(ctx, addr, &chs[0])
	if err != nil {
		t.Fatal(err)
	}
	c.call("POST", addr+privacypass.RedeemPath, "", privacypass.AuthorizationValue(tok), nil, true)
	c.want(200, "")
	c.call("POST", addr+privacypass.RedeemPath, "", privacypass.AuthorizationValue(tok), nil, true)
	c.want(401, "double_spend")

	// Forged tokens, refused before the ledger.
	parsed, err := privacypass.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	forge := func(edit func(*privacypass.Token)) string {
		f := parsed
		f.Authenticator = slices.Clone(parsed.Authenticator)
		edit(&f)
		b, err := f.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return privacypass.AuthorizationValue(b)
	}
	c.call("POST", addr+privacypass.RedeemPath, "", forge(func(f *privacypass.Token) { f.Authenticator[0] ^= 1; f.Nonce[0] ^= 1 }), nil, true)
	c.want(401, "proof_invalid")
	c.call("POST", addr+privacypass.RedeemPath, "", forge(func(f *privacypass.Token) { f.ChallengeDigest[0] ^= 1 }), nil, true)
	c.want(401, "challenge_mismatch")
	c.call("POST", addr+privacypass.RedeemPath, "", forge(func(f *privacypass.Token) { f.KeyID[0] ^= 1 }), nil, true)
	c.want(401, "unknown_key")
	var next [privacypass.KeyIDSize]byte
	for _, k := range dir.TokenKeys {
		if k.NotBefore.After(time.Now()) {
			next = k.ID()
		}
	}
	c.call("POST", addr+privacypass.RedeemPath, "", forge(func(f *privacypass.Token) { f.KeyID = next }), nil, true)
	c.want(401, "key_expired")
	other := append([]byte{0, 3}, tok[2:]...)
	c.call("POST", addr+privacypass.RedeemPath, "", privacypass.AuthorizationValue(other), nil, true)
	c.want(401, "unsupported_token_type")
	c.call("POST", addr+privacypass.RedeemPath, "", `PrivateToken token="***"`, nil, true)
	c.want(401, "bad_request")
	c.call("GET", addr+privacypass.RedeemPath, "", "", nil, false)
	c.want(405, "bad_request")

	// A token whose challenge expires before it is presented.
	tok2, err := pc.Issue(ctx, addr, &chs[0])
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond)
	c.call("POST", addr+privacypass.RedeemPath, "", privacypass.AuthorizationValue(tok2), nil, true)
	c.want(401, "challenge_gone")

	// Token requests the issuer refuses.
	req := func(body []byte, ctype, auth string, valid bool) {
		t.Helper()
		c.call("POST", addr+"/token-request", ctype, auth, body, valid)
	}
	bearer := "Bearer " + attester
	used := map[byte]bool{}
	for _, k := range dir.TokenKeys {
		id := k.ID()
		used[id[len(id)-1]] = true
	}
	var free byte
	for used[free] {
		free++
	}
	blinded := append([]byte{0, 2, free}, bytes.Repeat([]byte{1}, 256)...)
	req(blinded, privacypass.RequestMediaType, "", true)
	c.want(401, "unauthorized")
	req(blinded, "text/plain", bearer, false)
	c.want(415, "bad_request")
	req(append([]byte{0, 3}, blinded[2:]...), privacypass.RequestMediaType, bearer, true)
	c.want(422, "unsupported_token_type")
	req(blinded[:20], privacypass.RequestMediaType, bearer, true)
	c.want(422, "wrong_size")
	req(blinded, privacypass.RequestMediaType, bearer, true)
	c.want(422, "unknown_key")
	req(bytes.Repeat([]byte{0}, 5000), privacypass.RequestMediaType, bearer, true)
	c.want(413, "bad_request")
	if _, err := pc.Issue(ctx, addr, &chs[0]); err == nil {
		t.Fatal("a third token in an epoch with a quota of 2 was issued")
	}
	c.want(429, "quota_exceeded")
}

func ecashExchanges(t *testing.T, c *checker, addr string) {
	ctx := context.Background()
	w := issuedWallet(t, c, addr)
	issued := lastBody(t, c, ecash.IssuePath)
	time.Sleep(time.Millisecond)
	if _, _, err := w.Spend(ctx, 3); err != nil {
		t.Fatal(err)
	}
	spent := lastBody(t, c, ecash.SpendPath)
	send := func(p string, body []byte, ctype string, valid bool) {
		t.Helper()
		c.call("POST", addr+p, ctype, "", body, valid)
	}
	bin := ecash.RequestMediaType
	send(ecash.IssuePath, issued, bin, true)
	if m := jsonOf(t, c.want(200, "")); m["replayed"] != true {
		t.Fatalf("the same issuance again: %v, want replayed", m)
	}
	edited := slices.Clone(issued)
	edited[len(edited)-1] ^= 1
	send(ecash.IssuePath, edited, bin, true)
	c.want(409, "challenge_mismatch")
	edited = slices.Clone(spent)
	edited[len(edited)-1] ^= 1
	send(ecash.SpendPath, edited, bin, true)
	c.want(409, "double_spend")
	send(ecash.SpendPath, []byte{9, 9, 9}, bin, true)
	c.want(400, "bad_request")
	send(ecash.SpendPath, spent, "text/plain", false)
	c.want(400, "bad_request")

	cl := &ecash.Client{URL: addr, HTTPClient: c.client()}
	ch, err := cl.Challenge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sol uint64
	for ecash.Work(ch.Raw, sol) >= int(ch.Difficulty) {
		sol++
	}
	body, err := (&ecash.Issue{Challenge: ch.Raw, Solution: sol}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	send(ecash.IssuePath, body, bin, true)
	c.want(403, "proof_invalid")
	forged := slices.Clone(ch.Raw)
	forged[len(forged)-1] ^= 1
	body, _ = (&ecash.Issue{Challenge: forged, Solution: sol}).MarshalBinary()
	send(ecash.IssuePath, body, bin, true)
	c.want(410, "challenge_gone")
	c.call("HEAD", addr+ecash.KeysPath, "", "", nil, true)
	c.want(200, "")
	c.call("POST", addr+ecash.KeysPath, bin, "", []byte{}, false)
	c.want(405, "bad_request")
	c.call("GET", addr+ecash.SpendPath, "", "", nil, false)
	c.want(405, "bad_request")
}

// failingStoreExchanges starts a server whose store fails one claim of a
// redemption and one of a spend when armed, and checks that the Privacy
// Pass and e-cash surfaces answer them 503 unavailable, as documented.
func failingStoreExchanges(t *testing.T) *checker {
	pp := &FaultyStore{Method: "Claim", Namespace: privacypass.DefaultNamespace}
	ec := &FaultyStore{Method: "Claim", Namespace: ecash.DefaultSpendNamespace}
	s := MustServe(t, t.TempDir(), env{"SPENT_KEK": testKEK}, func(m *spentcmd.Main) {
		m.WrapStore = func(st spent.Store) spent.Store { pp.Store = st; ec.Store = pp; return ec }
	}, "--config", WriteConfig(t, openAPIConfig))
	c := newChecker(t, s.Addr)
	ctx := context.Background()

	pc := &privacypass.Client{HTTPClient: c.client(), AttesterToken: attester}
	c.call("POST", s.Addr+privacypass.RedeemPath, "", "", nil, true)
	chs, err := privacypass.ParseChallenges(c.want(401, "token_required").header)
	if err != nil || len(chs) == 0 {
		t.Fatalf("challenges of a 401: %v, %v", chs, err)
	}
	tok, err := pc.Issue(ctx, s.Addr, &chs[0])
	if err != nil {
		t.Fatal(err)
	}
	pp.Arm()
	c.call("POST", s.Addr+privacypass.RedeemPath, "", privacypass.AuthorizationValue(tok), nil, true)
	c.want(503, "unavailable")

	w := issuedWallet(t, c, s.Addr)
	time.Sleep(time.Millisecond)
	ec.Arm()
	if _, _, err := w.Spend(ctx, 3); err == nil {
		t.Fatal("spend on a failing store: got success, want an error")
	}
	c.want(503, "unavailable")
	if pp.Fired() != 1 || ec.Fired() != 1 {
		t.Fatalf("injected faults: got %d and %d, want 1 and 1", pp.Fired(), ec.Fired())
	}
	return c
}

// issuedWallet returns a new wallet of the issuer at addr, talking through
// c, that has issued once; it is closed with the test.
func issuedWallet(t *testing.T, c *checker, addr string) *wallet.Wallet {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wallet.json")
	if err := wallet.Create(path, addr); err != nil {
		t.Fatal(err)
	}
	w, err := wallet.Open(path, wallet.Options{HTTPClient: c.client(), MinAge: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if _, err := w.Issue(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

// lastBody returns the body of the last request to path.
func lastBody(t *testing.T, c *checker, path string) []byte {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.seen) - 1; i >= 0; i-- {
		if c.seen[i].path == path {
			return c.seen[i].reqBody
		}
	}
	t.Fatalf("no request to %s", path)
	return nil
}

// pathLiteral matches string literals in Go source that look like a path.
var pathLiteral = regexp.MustCompile(`"(/[A-Za-z0-9._~-]+(?:/[A-Za-z0-9._~-]+)*)"`)

// TestOpenAPIRoutes fails when the server answers a route the document
// lacks, or the document has one the server does not answer. A route is
// found by probing the server: every path literal of the packages that
// serve HTTP (a route is written as one: the cases of the http package,
// the constants of privacypass and ecash) and every path of the document,
// with every method. An answer other than the API's "no such endpoint"
// means the server serves the path; an answer other than 405 too means it
// serves the method.
func TestOpenAPIRoutes(t *testing.T) {
	if testing.Short() {
		t.Skip("generates RSA keys; skipped with -short")
	}
	s := MustServe(t, t.TempDir(), env{"SPENT_KEK": testKEK}, nil, "--config", WriteConfig(t, openAPIConfig))
	doc, _ := loadOpenAPI(t, s.Addr)
	candidates := map[string]bool{}
	for p := range doc.Paths.Map() {
		candidates[p] = true
	}
	for _, dir := range []string{"../../http", "../../privacypass", "../../ecash", "../../internal/problem", "."} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range pathLiteral.FindAllStringSubmatch(string(src), -1) {
				candidates[m[1]] = true
			}
		}
	}
	served := map[string][]string{}
	for p := range candidates {
		if p == "/ui" || strings.HasPrefix(p, console.Prefix) {
			continue // the operator's HTML page (package console), not an API route; see docs/http-api.md
		}
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"} {
			req, _ := http.NewRequest(m, s.Addr+p, nil)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 404 && (m == "HEAD" || bytes.Contains(b, []byte("no such endpoint"))) {
				continue
			}
			if resp.StatusCode == 405 {
				served[p] = append(served[p], "")
				continue
			}
			served[p] = append(served[p], strings.ToLower(m))
		}
	}
	var paths []string
	for p := range served {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		item := doc.Paths.Value(p)
		if item == nil {
			t.Errorf("%s: the server answers it; the document lacks it", p)
			continue
		}
		for _, m := range served[p] {
			if m != "" && item.GetOperation(strings.ToUpper(m)) == nil {
				t.Errorf("%s %s: the server answers it; the document lacks it", strings.ToUpper(m), p)
			}
		}
	}
	for p, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			if !slices.Contains(served[p], strings.ToLower(m)) {
				t.Errorf("%s %s: in the document; the server does not answer it", m, p)
			}
		}
	}
	t.Logf("%d candidate paths probed; served: %v", len(candidates), paths)
}
