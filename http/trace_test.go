package http_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
)

// TestClientTraceparent checks that the client passes the caller's span on
// to the server, and sends no trace header without one.
func TestClientTraceparent(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	var mu sync.Mutex
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		mu.Unlock()
		e.server.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	c := sphttp.NewClient(ts.URL, sphttp.ClientConfig{})

	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "caller")
	defer span.End()
	if _, err := c.Claim(ctx, spent.Claim{Namespace: "default", Key: "k1", Result: []byte{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(context.Background(), spent.Claim{Namespace: "default", Key: "k2", Result: []byte{}}); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if len(got) != 2 || got[0] != want || got[1] != "" {
		t.Errorf("traceparent headers: got %q, want [%q \"\"]", got, want)
	}
}
