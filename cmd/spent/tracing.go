package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/node"
	"github.com/spentledger/spent/opentelemetry"
)

// tracingFlushTimeout bounds the sending of the last spans at shutdown.
const tracingFlushTimeout = 5 * time.Second

// tracing is serve's OpenTelemetry tracing, off (nil provider) unless the
// OTEL_ variables ask for it (see docs/operations.md, "Traces").
type tracing struct {
	tp  *sdktrace.TracerProvider
	log *slog.Logger
}

// startTracing returns the tracing the OTEL_ variables of m's environment
// ask for.
func (m *Main) startTracing(ctx context.Context, log *slog.Logger) (tracing, error) {
	tp, err := opentelemetry.Setup(ctx, m.getenv)
	if err != nil || tp == nil {
		return tracing{}, err
	}
	// The SDK's own failures (a collector that cannot be reached) go to the
	// server's log, not to the standard logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("traces: the OpenTelemetry exporter failed; check OTEL_EXPORTER_OTLP_ENDPOINT and the collector", "err", err)
	}))
	exporter := m.getenv("OTEL_TRACES_EXPORTER")
	if exporter == "" {
		exporter = "otlp"
	}
	log.Info("traces on", "exporter", exporter)
	return tracing{tp: tp, log: log}, nil
}

// node makes nc's ledger and store traced: an observer beside any other,
// and a store whose calls start spans.
func (t tracing) node(nc *node.Config) {
	if t.tp == nil {
		return
	}
	nc.Ledger.Observer = spent.Observers(nc.Ledger.Observer, opentelemetry.NewObserver(t.tp))
	open := nc.OpenStore
	nc.OpenStore = func(ctx context.Context) (node.Opened, error) {
		opened, err := open(ctx)
		if err == nil {
			opened.Store = opentelemetry.NewStore(opened.Store, t.tp, opened.Kind)
		}
		return opened, err
	}
}

// handler returns h in a server span per request, named after its route
// as route gives it (the route the metrics count it under).
func (t tracing) handler(h http.Handler, route func(*http.Request) string) http.Handler {
	if t.tp == nil {
		return h
	}
	return opentelemetry.Handler(h, t.tp, route)
}

// flush sends the spans still buffered, within tracingFlushTimeout, and
// stops the exporter.
func (t tracing) flush() {
	if t.tp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		t.log.Warn("traces: the last spans could not be sent", "err", err)
	}
}
