package node_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/metricstest"
	"github.com/spentledger/spent/node"
)

// countingObserver is a caller's observer: it counts the answers it is told
// of.
type countingObserver struct {
	mu       sync.Mutex
	answered int
}

func (o *countingObserver) Start(ctx context.Context, _, _ string) (context.Context, func(error)) {
	return ctx, func(error) {}
}

func (o *countingObserver) Answered(context.Context, string, spent.Outcome) {
	o.mu.Lock()
	o.answered++
	o.mu.Unlock()
}

func TestLedgerMetrics(t *testing.T) {
	dir := t.TempDir()
	cfg := Config(t, dir, filepath.Join(dir, "pebble"))
	cfg.Ledger.Namespaces["tickets"] = spent.Policy{Mode: spent.ModeRefuse, Retention: spent.DefaultPolicy().Retention,
		Lease: spent.DefaultPolicy().Lease, OnLeaseExpiry: spent.LeaseExpiryRetake}
	caller := &countingObserver{}
	cfg.Ledger.Observer = caller
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	n := MustOpen(t, cfg)
	ctx := context.Background()

	before := metricstest.Gathered(t, reg)
	metricstest.Want(t, before, `spent_ledger_claims_total{namespace="tickets",outcome="refused"}`, 0)
	metricstest.Want(t, before, `spent_ledger_operation_seconds_count{op="claim"}`, 0)

	Claim(t, n, "a")
	Claim(t, n, "a")
	if _, err := n.Ledger().ClaimBatch(ctx, []spent.Claim{
		{Namespace: "tickets", Key: "t", Result: []byte{}},
		{Namespace: "tickets", Key: "t", Result: []byte{}},
		{Namespace: "orders", Key: "b", Result: []byte("ok")},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Ledger().Get(ctx, "orders", "never"); spent.ErrorCode(err) != spent.ENotFound {
		t.Fatalf("get of a key never claimed: got %v, want not_found", err)
	}
	if _, err := n.Ledger().Claim(ctx, spent.Claim{Namespace: "nope", Key: "k"}); spent.ErrorCode(err) != spent.EUnknownNamespace {
		t.Fatalf("claim in an unconfigured namespace: got %v, want unknown_namespace", err)
	}

	m := metricstest.Gathered(t, reg)
	metricstest.Want(t, m, node.MetricLedgerClaims+`{namespace="orders",outcome="fresh"}`, 2)
	metricstest.Want(t, m, `spent_ledger_claims_total{namespace="orders",outcome="replayed"}`, 1)
	metricstest.Want(t, m, `spent_ledger_claims_total{namespace="tickets",outcome="fresh"}`, 1)
	metricstest.Want(t, m, `spent_ledger_claims_total{namespace="tickets",outcome="refused"}`, 1)
	metricstest.Want(t, m, `spent_ledger_operation_seconds_count{op="claim"}`, 3)
	metricstest.Want(t, m, `spent_ledger_operation_seconds_count{op="claim_batch"}`, 1)
	metricstest.Want(t, m, `spent_ledger_operation_seconds_count{op="get"}`, 1)
	metricstest.Want(t, m, `spent_ledger_errors_total{code="not_found",op="get"}`, 1)
	metricstest.Want(t, m, `spent_ledger_errors_total{code="unknown_namespace",op="claim"}`, 1)
	if strings.Contains(m, `"nope"`) {
		t.Errorf("an unconfigured namespace became a label value:\n%s", m)
	}
	// The caller's observer is kept beside the node's.
	caller.mu.Lock()
	defer caller.mu.Unlock()
	if caller.answered != 5 {
		t.Fatalf("the caller's observer was told of %d answers, want 5", caller.answered)
	}
}

func TestLedgerMetricsOffWithoutRegisterer(t *testing.T) {
	// Without a Registerer the ledger gets the caller's observer alone.
	dir := t.TempDir()
	cfg := Config(t, dir, filepath.Join(dir, "pebble"))
	caller := &countingObserver{}
	cfg.Ledger.Observer = caller
	n := MustOpen(t, cfg)
	Claim(t, n, "a")
	caller.mu.Lock()
	defer caller.mu.Unlock()
	if caller.answered != 1 {
		t.Fatalf("the caller's observer was told of %d answers, want 1", caller.answered)
	}
}

var _ spent.Observer = (*countingObserver)(nil)
