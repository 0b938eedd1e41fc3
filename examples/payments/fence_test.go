package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spentledger/spent/node"
)

// copyDir copies the directory from to a new directory to, as a snapshot of
// a stopped store.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// payOnce runs the service on dir until one payment under key is sent, then
// stops it.
func payOnce(t *testing.T, dir, key string) {
	t.Helper()
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", dir}); err != nil {
		t.Fatal(err)
	}
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	st, _, b := post(t, "http://"+m.Addr()+"/payments", key, `{"amount":100,"destination":"00000001"}`)
	cancel()
	<-done
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if st != 201 {
		t.Fatalf("payment %s: got %d %s, want 201", key, st, b)
	}
}

// TestRolledBackLedgerRefused: the service started on a ledger put back to
// an earlier copy (which has forgotten the payments since, and would send
// their retries' money again) is refused by the node's rollback fence.
func TestRolledBackLedgerRefused(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	payOnce(t, dir, `"payment-before-the-copy"`)
	snap := filepath.Join(t.TempDir(), "snapshot")
	copyDir(t, ledger, snap)
	payOnce(t, dir, `"payment-after-the-copy"`)
	if err := os.RemoveAll(ledger); err != nil {
		t.Fatal(err)
	}
	copyDir(t, snap, ledger)

	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", dir}); err != nil {
		t.Fatal(err)
	}
	err := m.Open()
	if err == nil {
		m.Close()
		t.Fatal("open on the earlier copy: got a service, want a refusal")
	}
	if !errors.Is(err, node.ErrStoreWentBack) || !strings.Contains(err.Error(), "the store went backwards") {
		t.Fatalf("open on the earlier copy: got %v, want the fence's refusal", err)
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--data", dir}, io.Discard, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "the store went backwards") {
		t.Fatalf("payments on the earlier copy: exit %d, stderr %q; want 1 and the fence's refusal", code, stderr.String())
	}
}
