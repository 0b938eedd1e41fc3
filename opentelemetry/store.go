package opentelemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/spentledger/spent"
)

// Store is a [spent.Store] whose calls each start a span named
// "spent.store.<method>" (claim, claim_batch, complete, ...): a round trip
// to the store, as a child of the span in the call's context. A call
// whose context holds no span (the sweeper's, the fence's) starts none.
// The spans carry the engine's name and, for a batch, the number of ops;
// never a key, a record or a result.
//
// Store implements [spent.Store] only; the optional capabilities of the
// store it wraps are found through [Store.Unwrap] with [spent.StoreAs],
// and are not traced.
type Store struct {
	store  spent.Store
	tracer trace.Tracer
	kind   attribute.KeyValue
}

var _ spent.Store = (*Store)(nil)

// NewStore returns s traced by tp; kind names the engine ("pebble",
// "redis", ...) in the spans.
func NewStore(s spent.Store, tp trace.TracerProvider, kind string) *Store {
	return &Store{store: s, tracer: tp.Tracer(ScopeName), kind: attribute.String(AttrStore, kind)}
}

// Unwrap returns the store under s. Through it [spent.StoreAs] finds the
// optional capabilities of that store ([spent.SeqLister],
// [spent.EndWatcher], ...), which s does not implement itself: every such
// capability must be looked up with spent.StoreAs, never with a type
// assertion on s, which would find none (a waiting claim would then never
// learn of another server's ends).
func (s *Store) Unwrap() spent.Store { return s.store }

// start starts the span of method under ctx's span, if any.
func (s *Store) start(ctx context.Context, method string, kvs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return s.tracer.Start(ctx, "spent.store."+method,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(append(kvs, s.kind)...))
}

// end ends span with err's code as its status.
func end(span trace.Span, err error) {
	if err != nil {
		code := spent.ErrorCode(err)
		span.SetAttributes(attribute.String(AttrErrorCode, code))
		span.SetStatus(codes.Error, code)
	}
	span.End()
}

// Claim implements [spent.Store].
func (s *Store) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	ctx, span := s.start(ctx, "claim")
	a, err := s.store.Claim(ctx, op)
	end(span, err)
	return a, err
}

// ClaimBatch implements [spent.Store].
func (s *Store) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	ctx, span := s.start(ctx, "claim_batch", attribute.Int(AttrClaims, len(ops)))
	a, err := s.store.ClaimBatch(ctx, ops)
	end(span, err)
	return a, err
}

// Complete implements [spent.Store].
func (s *Store) Complete(ctx context.Context, key spent.Hash, seq spent.Seq, result []byte, now time.Time) (spent.Record, error) {
	ctx, span := s.start(ctx, "complete")
	r, err := s.store.Complete(ctx, key, seq, result, now)
	end(span, err)
	return r, err
}

// Release implements [spent.Store].
func (s *Store) Release(ctx context.Context, key spent.Hash, seq spent.Seq, now time.Time) error {
	ctx, span := s.start(ctx, "release")
	err := s.store.Release(ctx, key, seq, now)
	end(span, err)
	return err
}

// Get implements [spent.Store].
func (s *Store) Get(ctx context.Context, key spent.Hash, now time.Time) (spent.Record, error) {
	ctx, span := s.start(ctx, "get")
	r, err := s.store.Get(ctx, key, now)
	end(span, err)
	return r, err
}

// ListPending implements [spent.Store].
func (s *Store) ListPending(ctx context.Context, namespace string, leaseBefore time.Time, limit int) ([]spent.Record, error) {
	ctx, span := s.start(ctx, "list_pending")
	r, err := s.store.ListPending(ctx, namespace, leaseBefore, limit)
	end(span, err)
	return r, err
}

// DeleteExpired implements [spent.Store].
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	ctx, span := s.start(ctx, "delete_expired")
	n, err := s.store.DeleteExpired(ctx, now, limit)
	end(span, err)
	return n, err
}

// Purge implements [spent.Store].
func (s *Store) Purge(ctx context.Context, namespace string, limit int) (int, error) {
	ctx, span := s.start(ctx, "purge")
	n, err := s.store.Purge(ctx, namespace, limit)
	end(span, err)
	return n, err
}

// ReserveSeq implements [spent.Store].
func (s *Store) ReserveSeq(ctx context.Context, node uint32, n uint64) (uint64, error) {
	ctx, span := s.start(ctx, "reserve_seq")
	first, err := s.store.ReserveSeq(ctx, node, n)
	end(span, err)
	return first, err
}

// Count implements [spent.Store].
func (s *Store) Count(ctx context.Context, op spent.CountOp) (spent.CountAnswer, error) {
	ctx, span := s.start(ctx, "count")
	a, err := s.store.Count(ctx, op)
	end(span, err)
	return a, err
}

// Close implements [spent.Store]; it starts no span.
func (s *Store) Close() error { return s.store.Close() }
