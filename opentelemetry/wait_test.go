package opentelemetry_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/redistest"
	"github.com/spentledger/spent/internal/waittest"
	"github.com/spentledger/spent/opentelemetry"
	"github.com/spentledger/spent/redis"
)

// openTracedRedis opens a store on the Redis server at addr, in the keyspace
// of dir, traced by tp, as spent serve opens a shared store with tracing on;
// the store is closed when the test ends.
func openTracedRedis(tb testing.TB, addr, dir string, tp *sdktrace.TracerProvider) spent.Store {
	tb.Helper()
	o := redis.DefaultOptions()
	o.Addrs = []string{addr}
	sum := sha256.Sum256([]byte(dir))
	o.Prefix = "spent-test:" + hex.EncodeToString(sum[:8]) + ":"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := redis.Open(ctx, o)
	if err != nil {
		tb.Fatalf("redis.Open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return opentelemetry.NewStore(s, tp, "redis")
}

// storeClaims returns how many store claims (spans "spent.store.claim") exp
// holds.
func storeClaims(exp *tracetest.InMemoryExporter) int {
	n := 0
	for _, s := range exp.GetSpans() {
		if s.Name == "spent.store.claim" {
			n++
		}
	}
	return n
}

// TestTracedSharedStoreWakesWaiter: two servers share a Redis store, each
// through the tracing store. Server B claims a key in two steps; server A's
// claim of the same key waits, and B's completion answers it (replayed with
// B's result): A learns of the end from the store's notifications, which it
// must find through the tracing store. A waiter left unwoken would answer
// in_progress when its request's context ends.
func TestTracedSharedStoreWakesWaiter(t *testing.T) {
	srv := redistest.Start(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	dir := t.TempDir()
	sa, sb := openTracedRedis(t, srv.Addr, dir, tp), openTracedRedis(t, srv.Addr, dir, tp)
	la, lb := waittest.Ledgers(t, sa, sb)
	ctx := context.Background()
	const ns, key = waittest.NSRetake, "traced-shared-key"

	first, err := lb.Claim(ctx, spent.Claim{Namespace: ns, Key: key})
	if err != nil || first.Outcome != spent.Fresh {
		t.Fatalf("B's claim: got %v, %v; want fresh", first.Outcome, err)
	}

	// A's claim runs under a span, so that its store claims are recorded:
	// the first one, answered while B's record is pending, shows that A
	// looked before B completes and must be woken to learn of the end. Its
	// request gives up after reqTimeout (the wait itself is longer), and
	// answers in_progress then, as a waiter nobody woke does.
	const reqTimeout = 15 * time.Second
	exp.Reset()
	type answer struct {
		a   spent.Answer
		err error
	}
	done := make(chan answer, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, reqTimeout)
		defer cancel()
		rctx, span := tp.Tracer("test").Start(rctx, "request")
		defer span.End()
		a, err := la.Claim(rctx, spent.Claim{Namespace: ns, Key: key, Wait: time.Minute})
		done <- answer{a, err}
	}()
	for deadline := time.Now().Add(reqTimeout); la.Waiting() == 0 || storeClaims(exp) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("A's claim never looked at the key while waiting (waiting %d, store claims %d)", la.Waiting(), storeClaims(exp))
		}
		time.Sleep(time.Millisecond)
	}

	result := []byte("B's result")
	if _, err := lb.Complete(ctx, spent.Completion{Namespace: ns, Key: key, Seq: first.Record.Seq, Result: result}); err != nil {
		t.Fatalf("B's complete: %v", err)
	}
	got := <-done
	if got.err != nil || got.a.Outcome != spent.Replayed || string(got.a.Record.Result) != string(result) || got.a.Record.Seq != first.Record.Seq {
		t.Fatalf("A's waiting claim: got %v %q seq %v, %v; want replayed %q seq %v (in_progress: B's end never woke it)",
			got.a.Outcome, got.a.Record.Result, got.a.Record.Seq, got.err, result, first.Record.Seq)
	}
}
