package opentelemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// OtherRoute is the route of a request to a path the route function does
// not know.
const OtherRoute = "other"

// propagator carries span contexts in W3C traceparent and tracestate
// headers.
var propagator = propagation.TraceContext{}

type serverKey struct{}

// serverSpan returns the server span [Handler] started for the request of
// ctx, or a span that records nothing.
func serverSpan(ctx context.Context) trace.Span {
	if s, ok := ctx.Value(serverKey{}).(trace.Span); ok {
		return s
	}
	return trace.SpanFromContext(context.Background()) // records nothing
}

// Handler returns h wrapped in a server span per request, whose parent is
// the span of the request's traceparent header, if any. The span is named
// "<METHOD> <route>" and carries the route as http.route, with route(r)
// one of the server's fixed paths and [OtherRoute] for any other (so that
// a client cannot make up span names); the ledger's [Observer] adds the
// namespace and the outcome. OpenTelemetry's HTTP attributes come with it
// (method, status code, peer address, user agent, path); no header and no
// body is recorded.
func Handler(h http.Handler, tp trace.TracerProvider, route func(*http.Request) string) http.Handler {
	name := func(r *http.Request) string {
		rt := route(r)
		if rt == "" {
			rt = OtherRoute
		}
		return rt
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		span := trace.SpanFromContext(r.Context())
		span.SetAttributes(attribute.String("http.route", name(r)))
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverKey{}, span)))
	})
	return otelhttp.NewHandler(inner, "spent",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()), // metrics are Prometheus's
		otelhttp.WithPropagators(propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + name(r) }),
	)
}

// Transport returns base (http.DefaultTransport when nil) wrapped so that
// each request starts a client span, recorded by tp, under the span of its
// context and carries it in a traceparent header to the server.
func Transport(base http.RoundTripper, tp trace.TracerProvider) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return otelhttp.NewTransport(base,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithPropagators(propagator),
	)
}
