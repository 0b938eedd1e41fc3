package opentelemetry_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/opentelemetry"
	"github.com/spentledger/spent/pebble"
)

// secretKey is the claims' key, which no span may carry.
const secretKey = "order-7f3c-secret-key"

// traced is a spent server on the embedded store, traced into an in-memory
// exporter.
type traced struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	ledger *spent.Ledger
	client *sphttp.Client
	url    string
}

// apiRoutes are the fixed paths the test server names in its spans.
var apiRoutes = []string{"/v1/claim", "/v1/claims", "/v1/complete", "/v1/release", "/v1/get"}

func route(r *http.Request) string {
	if slices.Contains(apiRoutes, r.URL.Path) {
		return r.URL.Path
	}
	return ""
}

// MustServeTraced starts a traced server and stops it when the test ends.
func MustServeTraced(tb testing.TB) *traced {
	tb.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	st, err := pebble.Open(tb.TempDir(), pebble.DefaultOptions())
	if err != nil {
		tb.Fatal(err)
	}
	cfg := spent.DefaultConfig()
	cfg.Secret = bytes.Repeat([]byte("s"), 32)
	cfg.Observer = opentelemetry.NewObserver(tp)
	l, err := spent.NewLedger(context.Background(), opentelemetry.NewStore(st, tp, "pebble"), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	api, err := sphttp.NewServer(l, sphttp.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(opentelemetry.Handler(api, tp, route))
	tb.Cleanup(ts.Close)
	exp.Reset() // spans of the ledger's start, if any
	return &traced{spans: exp, tp: tp, ledger: l, client: sphttp.NewClient(ts.URL, sphttp.ClientConfig{}), url: ts.URL}
}

// one returns the only span named name, failing the test unless there is
// exactly one.
func one(tb testing.TB, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	tb.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		tb.Fatalf("got %d spans named %q, want 1; spans: %v", len(found), name, names(spans))
	}
	return found[0]
}

func names(spans tracetest.SpanStubs) []string {
	var ns []string
	for _, s := range spans {
		ns = append(ns, s.Name)
	}
	return ns
}

// attr returns the value of attribute k of s, "" when missing.
func attr(s tracetest.SpanStub, k string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == k {
			return kv.Value.String()
		}
	}
	return ""
}

// childOf fails the test unless child's parent is parent.
func childOf(tb testing.TB, child, parent tracetest.SpanStub) {
	tb.Helper()
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		tb.Errorf("span %q: got parent %s in trace %s, want %q (%s in trace %s)", child.Name,
			child.Parent.SpanID(), child.SpanContext.TraceID(), parent.Name, parent.SpanContext.SpanID(), parent.SpanContext.TraceID())
	}
}

// wantAttrs fails the test unless s has each attribute of want.
func wantAttrs(tb testing.TB, s tracetest.SpanStub, want map[string]string) {
	tb.Helper()
	for k, v := range want {
		if got := attr(s, k); got != v {
			tb.Errorf("span %q: attribute %s: got %q, want %q", s.Name, k, got, v)
		}
	}
}

// noSecrets fails the test if any attribute of any span holds key.
func noSecrets(tb testing.TB, spans tracetest.SpanStubs, key string) {
	tb.Helper()
	for _, s := range spans {
		kvs := append(slices.Clone(s.Attributes), s.Resource.Attributes()...)
		for _, e := range s.Events {
			kvs = append(kvs, e.Attributes...)
		}
		for _, kv := range kvs {
			if strings.Contains(kv.Value.String(), key) {
				tb.Errorf("span %q: attribute %s holds the key: %q", s.Name, kv.Key, kv.Value.String())
			}
		}
	}
}

func TestTracingClaim(t *testing.T) {
	srv := MustServeTraced(t)
	ctx, caller := srv.tp.Tracer("test").Start(context.Background(), "caller")
	a, err := srv.client.Claim(ctx, spent.Claim{Namespace: "default", Key: secretKey, Result: []byte("receipt-1")})
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome != spent.Fresh {
		t.Fatalf("got outcome %s, want fresh", a.Outcome)
	}
	spans := srv.spans.GetSpans()
	server := one(t, spans, "POST /v1/claim")
	ledger := one(t, spans, "spent.ledger.claim")
	store := one(t, spans, "spent.store.claim")
	if server.SpanKind != trace.SpanKindServer {
		t.Errorf("server span: got kind %s, want server", server.SpanKind)
	}
	t.Run("ParentsAndChildren", func(t *testing.T) {
		childOf(t, server, one(t, spans, "caller")) // the client passed its span on
		childOf(t, ledger, server)
		childOf(t, store, ledger)
	})
	t.Run("Attributes", func(t *testing.T) {
		wantAttrs(t, server, map[string]string{"http.route": "/v1/claim", opentelemetry.AttrNamespace: "default",
			opentelemetry.AttrOutcome: "fresh", "http.response.status_code": "200"})
		wantAttrs(t, ledger, map[string]string{opentelemetry.AttrNamespace: "default", opentelemetry.AttrOutcome: "fresh"})
		wantAttrs(t, store, map[string]string{opentelemetry.AttrStore: "pebble"})
	})
	t.Run("NeverTheKeyOrResult", func(t *testing.T) {
		noSecrets(t, spans, secretKey)
		noSecrets(t, spans, "receipt-1")
		noSecrets(t, spans, srv.ledger.HashKey("default", secretKey).String())
	})
}

func TestTracingBatchAndErrors(t *testing.T) {
	srv := MustServeTraced(t)
	ctx := context.Background()
	if _, err := srv.client.Claim(ctx, spent.Claim{Namespace: "default", Key: secretKey, Result: []byte{}}); err != nil {
		t.Fatal(err)
	}
	t.Run("BatchOfMixedOutcomes", func(t *testing.T) {
		srv.spans.Reset()
		_, err := srv.client.ClaimBatch(ctx, []spent.Claim{
			{Namespace: "default", Key: secretKey, Result: []byte{}}, // replayed
			{Namespace: "default", Key: secretKey + "-2", Result: []byte{}},
		})
		if err != nil {
			t.Fatal(err)
		}
		spans := srv.spans.GetSpans()
		server, ledger := one(t, spans, "POST /v1/claims"), one(t, spans, "spent.ledger.claim_batch")
		childOf(t, ledger, server)
		childOf(t, one(t, spans, "spent.store.claim_batch"), ledger)
		wantAttrs(t, ledger, map[string]string{opentelemetry.AttrNamespace: "default", opentelemetry.AttrOutcome: "mixed", opentelemetry.AttrClaims: "2"})
		wantAttrs(t, server, map[string]string{opentelemetry.AttrNamespace: "default", opentelemetry.AttrOutcome: "mixed"})
		noSecrets(t, spans, secretKey)
	})
	t.Run("ErrorCode", func(t *testing.T) {
		srv.spans.Reset()
		_, err := srv.client.Complete(ctx, spent.Completion{Namespace: "default", Key: secretKey + "-none", Result: []byte("x")})
		if spent.ErrorCode(err) != spent.ENotFound {
			t.Fatalf("got %v, want not_found", err)
		}
		spans := srv.spans.GetSpans()
		server, ledger := one(t, spans, "POST /v1/complete"), one(t, spans, "spent.ledger.complete")
		childOf(t, ledger, server)
		if ledger.Status.Code != codes.Error || ledger.Status.Description != spent.ENotFound {
			t.Errorf("ledger span: got status %v, want error %q", ledger.Status, spent.ENotFound)
		}
		wantAttrs(t, ledger, map[string]string{opentelemetry.AttrErrorCode: spent.ENotFound, opentelemetry.AttrNamespace: "default"})
		wantAttrs(t, server, map[string]string{opentelemetry.AttrErrorCode: spent.ENotFound, "http.response.status_code": "404"})
		noSecrets(t, spans, secretKey)
	})
	t.Run("UnknownPathIsOther", func(t *testing.T) {
		srv.spans.Reset()
		resp, err := http.Post(srv.url+"/v1/"+secretKey, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		s := one(t, srv.spans.GetSpans(), "POST other")
		wantAttrs(t, s, map[string]string{"http.route": opentelemetry.OtherRoute})
	})
}

func TestTracingClientTransport(t *testing.T) {
	srv := MustServeTraced(t)
	hc := &http.Client{Transport: opentelemetry.Transport(nil, srv.tp)}
	c := sphttp.NewClient(srv.url, sphttp.ClientConfig{HTTPClient: hc})
	ctx, caller := srv.tp.Tracer("test").Start(context.Background(), "caller")
	_, err := c.Claim(ctx, spent.Claim{Namespace: "default", Key: secretKey, Result: []byte{}})
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	spans := srv.spans.GetSpans()
	var client tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindClient && s.Name != "spent.store.claim" {
			client = s
		}
	}
	if !client.SpanContext.IsValid() {
		t.Fatalf("no client span; spans: %v", names(spans))
	}
	childOf(t, client, one(t, spans, "caller"))
	childOf(t, one(t, spans, "POST /v1/claim"), client)
}

func TestTracingOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"NoVariables", nil, false},
		{"OnlyServiceName", map[string]string{"OTEL_SERVICE_NAME": "gate"}, false},
		{"Endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"TracesEndpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"Exporter", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"ExporterNone", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
		{"SDKDisabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{"SDKDisabledFalse", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			if got := opentelemetry.Enabled(getenv); got != tc.want {
				t.Errorf("Enabled: got %v, want %v", got, tc.want)
			}
			if tc.want {
				return
			}
			tp, err := opentelemetry.Setup(context.Background(), getenv)
			if err != nil || tp != nil {
				t.Errorf("Setup: got %v, %v; want nil, nil", tp, err)
			}
		})
	}
}
