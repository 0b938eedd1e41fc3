package opentelemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/spentledger/spent"
)

// ScopeName is the instrumentation scope of the spans this package starts.
const ScopeName = "github.com/spentledger/spent/opentelemetry"

// Attributes of the spans, besides OpenTelemetry's HTTP ones.
const (
	// AttrNamespace is the namespace of a ledger operation, on its span
	// and on the server span; "mixed" for a batch over several.
	AttrNamespace = "spent.namespace"
	// AttrOutcome is the outcome of a claim ("fresh", "replayed", ...), on
	// the ledger span and on the server span; "mixed" for a batch whose
	// claims had several.
	AttrOutcome = "spent.outcome"
	// AttrClaims is the number of claims of a batch, on the ledger span,
	// and of ops of a batch, on the store span.
	AttrClaims = "spent.claims"
	// AttrErrorCode is the error code of a failed operation (see
	// [spent.ErrorCode]), on the span that failed and on the server span.
	AttrErrorCode = "spent.error_code"
	// AttrStore names the store engine ("pebble", "redis", ...) on store
	// spans.
	AttrStore = "spent.store"
)

// mixed stands for several namespaces or outcomes in one batch.
const mixed = "mixed"

// Observer is a [spent.Observer] that starts a span named
// "spent.ledger.<op>" for each ledger operation, as a child of the span in
// the context (the server span under [Handler]). It records the namespace,
// the outcome of claims and the error code, on its span and on the server
// span.
type Observer struct {
	tracer trace.Tracer
}

var _ spent.Observer = (*Observer)(nil)

// NewObserver returns an Observer whose spans tp records.
func NewObserver(tp trace.TracerProvider) *Observer {
	return &Observer{tracer: tp.Tracer(ScopeName)}
}

// op is the state of one observed operation, kept in its context.
type op struct {
	span, server     trace.Span
	namespace        string
	outcome          spent.Outcome
	answered         int
	mixedNS, mixedOC bool
}

type opKey struct{}

// Start implements [spent.Observer]: it starts the operation's span.
func (o *Observer) Start(ctx context.Context, name, namespace string) (context.Context, func(error)) {
	ctx, span := o.tracer.Start(ctx, "spent.ledger."+name, trace.WithSpanKind(trace.SpanKindInternal))
	st := &op{span: span, server: serverSpan(ctx), namespace: namespace}
	if namespace != "" {
		kv := attribute.String(AttrNamespace, namespace)
		span.SetAttributes(kv)
		st.server.SetAttributes(kv)
	}
	return context.WithValue(ctx, opKey{}, st), st.end
}

// Answered implements [spent.Observer]: it records the claim's outcome.
func (o *Observer) Answered(ctx context.Context, namespace string, outcome spent.Outcome) {
	st, ok := ctx.Value(opKey{}).(*op)
	if !ok {
		return
	}
	if st.answered > 0 {
		st.mixedNS = st.mixedNS || namespace != st.namespace
		st.mixedOC = st.mixedOC || outcome != st.outcome
	}
	st.namespace, st.outcome = namespace, outcome
	st.answered++
}

// end ends the operation's span, with what it was told.
func (st *op) end(err error) {
	var kvs []attribute.KeyValue
	if st.answered > 0 {
		ns, oc := st.namespace, string(st.outcome)
		if st.mixedNS {
			ns = mixed
		}
		if st.mixedOC {
			oc = mixed
		}
		kvs = append(kvs, attribute.String(AttrNamespace, ns), attribute.String(AttrOutcome, oc))
	}
	if err != nil {
		code := spent.ErrorCode(err)
		kvs = append(kvs, attribute.String(AttrErrorCode, code))
		st.span.SetStatus(codes.Error, code)
	}
	st.server.SetAttributes(kvs...)
	if st.answered > 1 {
		kvs = append(kvs, attribute.Int(AttrClaims, st.answered))
	}
	st.span.SetAttributes(kvs...)
	st.span.End()
}
