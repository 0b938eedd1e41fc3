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

// TestRolledBackLedgerRefused: the gate started on a ledger put back to an
// earlier copy (which has forgotten the scans since) is refused by the
// node's rollback fence, before it admits anyone twice.
func TestRolledBackLedgerRefused(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	s := startService(t, dir)
	early := s.mint(t, `"order-early"`)
	if st, a := s.scan(t, early.QR, "north"); st != 200 || !a.Admitted {
		t.Fatalf("first scan: got %d %+v, want admitted", st, a)
	}
	s.stop()
	snap := filepath.Join(t.TempDir(), "snapshot")
	copyDir(t, ledger, snap)

	s = startService(t, dir)
	late := s.mint(t, `"order-late"`)
	if st, a := s.scan(t, late.QR, "north"); st != 200 || !a.Admitted {
		t.Fatalf("scan after the copy: got %d %+v, want admitted", st, a)
	}
	s.stop()
	if err := os.RemoveAll(ledger); err != nil {
		t.Fatal(err)
	}
	copyDir(t, snap, ledger)

	m := NewMain()
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", dir}); err != nil {
		t.Fatal(err)
	}
	err := m.Open()
	if err == nil {
		m.Close()
		t.Fatal("open on the earlier copy: got a gate, want a refusal (the late ticket would be admitted again)")
	}
	if !errors.Is(err, node.ErrStoreWentBack) || !strings.Contains(err.Error(), "the store went backwards") {
		t.Fatalf("open on the earlier copy: got %v, want the fence's refusal", err)
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--data", dir}, io.Discard, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "the store went backwards") {
		t.Fatalf("gate on the earlier copy: exit %d, stderr %q; want 1 and the fence's refusal", code, stderr.String())
	}
}
