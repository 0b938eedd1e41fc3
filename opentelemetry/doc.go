// Package opentelemetry traces a spent server with OpenTelemetry: one server
// span per HTTP request, a child span for each ledger decision and, under it,
// one for each round trip to the store.
//
// In the common case call [Setup], which reads the standard OTEL_ variables
// and returns nil when they do not ask for traces; with a provider, set
// [NewObserver] as the ledger's [spent.Config].Observer, wrap the store with
// [NewStore] and the handler with [Handler], and call the provider's
// Shutdown when the server stops, to send the last spans. A client passes
// its span on with [Transport] (the Go client of package http does so on
// its own).
//
// # Guarantees
//
// Spans carry the route (never the raw path as the span name), the
// namespace, the outcome and the error code. They never carry a key, a
// hash, a result, a token, a credential or an error message (which may
// quote input): only the codes and names listed in docs/operations.md.
//
// Tracing off costs nothing: [Setup] returns a nil provider, and the caller
// installs no observer, no store wrapper and no middleware.
//
// # Caveats
//
// The store wrapper starts a span only under a span already in the
// context, so background work (the sweeper, the fence) is not traced.
// It traces the methods of [spent.Store] only: the optional capabilities of
// the store it wraps (the index by seq, the notifications of ends) are
// found through it with [spent.StoreAs] and their calls are not traced.
// When one request makes several ledger calls, the server span keeps the
// namespace and outcome of the last.
package opentelemetry
