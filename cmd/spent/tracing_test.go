package main_test

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
)

// receivedSpan is a span as an OTLP receiver got it.
type receivedSpan struct {
	name, service             string
	traceID, spanID, parentID string
}

// OTLPReceiver is an OTLP/HTTP trace receiver (what a collector listens
// with) that keeps the spans it is sent.
type OTLPReceiver struct {
	URL string

	mu    sync.Mutex
	spans []receivedSpan
}

// MustReceiveOTLP starts an OTLPReceiver and stops it when the test ends.
func MustReceiveOTLP(tb testing.TB) *OTLPReceiver {
	tb.Helper()
	rc := &OTLPReceiver{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil && r.URL.Path == "/v1/traces" {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil || r.URL.Path != "/v1/traces" {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, kv := range rs.Resource.GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					rc.spans = append(rc.spans, receivedSpan{name: s.Name, service: service,
						traceID: hex.EncodeToString(s.TraceId), spanID: hex.EncodeToString(s.SpanId), parentID: hex.EncodeToString(s.ParentSpanId)})
				}
			}
		}
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ = proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	tb.Cleanup(ts.Close)
	rc.URL = ts.URL
	return rc
}

// Spans returns the spans received so far, by name.
func (rc *OTLPReceiver) Spans() map[string]receivedSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m := map[string]receivedSpan{}
	for _, s := range rc.spans {
		m[s.name] = s
	}
	return m
}

// TestTracingServe runs serve with OTEL_EXPORTER_OTLP_ENDPOINT set and
// checks that a claim made under the caller's span reaches the collector,
// at shutdown at the latest, as a server span under the caller's with the
// ledger and store spans below it.
func TestTracingServe(t *testing.T) {
	rc := MustReceiveOTLP(t)
	// The exporter reads the process environment; serve decides from its own.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL)
	t.Setenv("OTEL_SERVICE_NAME", "")
	s := MustServe(t, t.TempDir(), env{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL}, nil)

	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	if _, err := sphttp.NewClient(s.Addr, sphttp.ClientConfig{}).Claim(ctx, spent.Claim{Namespace: "default", Key: "order-1", Result: []byte{}}); err != nil {
		t.Fatal(err)
	}
	caller.End()
	if code := s.Stop(); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.Stderr)
	}
	if !strings.Contains(s.Stderr.String(), "traces on") {
		t.Errorf("serve did not log that traces are on; stderr:\n%s", s.Stderr)
	}
	spans := rc.Spans()
	server, ledger, store := spans["POST /v1/claim"], spans["spent.ledger.claim"], spans["spent.store.claim"]
	for _, c := range []struct {
		child               receivedSpan
		name, parent, trace string
	}{
		{server, "POST /v1/claim", caller.SpanContext().SpanID().String(), caller.SpanContext().TraceID().String()},
		{ledger, "spent.ledger.claim", server.spanID, server.traceID},
		{store, "spent.store.claim", ledger.spanID, ledger.traceID},
	} {
		if c.child.name != c.name {
			t.Errorf("no span named %q received; got %v", c.name, spans)
			continue
		}
		if c.child.parentID != c.parent || c.child.traceID != c.trace {
			t.Errorf("span %q: got parent %s in trace %s, want %s in trace %s", c.name, c.child.parentID, c.child.traceID, c.parent, c.trace)
		}
		if c.child.service != "spent" {
			t.Errorf("span %q: got service.name %q, want spent", c.name, c.child.service)
		}
	}
}

// TestTracingOffServe checks that serve installs no tracing when its
// environment has no OTEL_ variable, even if the process has them.
func TestTracingOffServe(t *testing.T) {
	rc := MustReceiveOTLP(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL)
	s := MustServe(t, t.TempDir(), env{}, nil)
	if _, err := sphttp.NewClient(s.Addr, sphttp.ClientConfig{}).Claim(context.Background(), spent.Claim{Namespace: "default", Key: "order-1", Result: []byte{}}); err != nil {
		t.Fatal(err)
	}
	if code := s.Stop(); code != 0 {
		t.Fatalf("serve exited %d; stderr:\n%s", code, s.Stderr)
	}
	if spans := rc.Spans(); len(spans) != 0 {
		t.Errorf("tracing off: the collector got spans %v, want none", spans)
	}
	if strings.Contains(s.Stderr.String(), "traces on") {
		t.Errorf("tracing off: serve logged that traces are on; stderr:\n%s", s.Stderr)
	}
}
