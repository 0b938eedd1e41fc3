package node_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/node"
)

// sharedStore is one store opened by several nodes in a test, as servers
// share a Redis: closing it through one node leaves it open for the others.
type sharedStore struct{ spent.Store }

func (sharedStore) Close() error { return nil }

// TestLeaseLost has a second data directory take the node of a first on a
// shared store once the first's lease has run out, as when the first
// process was stopped for longer than its lease, and checks that the first
// finds out at its next fence advance: Lost is closed, LostErr names the
// cause and the way out, and Ready fails, while the second node serves on.
//
// Each node has a clock of its own, which the test moves: the first's stays
// still while it is "stopped" (so it renews nothing), the second's starts an
// hour later, and the first's then jumps there too, as a resumed process's
// clock does.
func TestLeaseLost(t *testing.T) {
	store := sharedStore{inmem.New()}
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var clockA, clockB atomic.Int64
	clockA.Store(start.UnixNano())
	clockB.Store(start.Add(time.Hour).UnixNano())
	cfgFor := func(dir string, clock *atomic.Int64) node.Config {
		now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
		cfg := node.DefaultConfig()
		cfg.Dir = dir
		cfg.Shared = true
		cfg.Now = now
		cfg.Ledger.Now = now
		cfg.FenceInterval = 50 * time.Millisecond
		cfg.Ledger.Namespaces = map[string]spent.Policy{"orders": spent.DefaultPolicy()}
		cfg.Logger = slog.New(slog.DiscardHandler)
		cfg.OpenStore = func(context.Context) (node.Opened, error) {
			return node.Opened{Store: store, Kind: "shared test store", Where: "memory"}, nil
		}
		return cfg
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	a := MustOpen(t, cfgFor(dirA, &clockA))
	if Claim(t, a, "before") != spent.Fresh {
		t.Fatal("first claim: not fresh")
	}
	select {
	case <-a.Lost():
		t.Fatal("the lease is lost before anyone else took the node")
	case <-time.After(200 * time.Millisecond): // a few advances
	}

	// An hour later by B's clock, B, on a data directory with the same
	// secret, takes node 1: A's lease has run out.
	secret, err := os.ReadFile(filepath.Join(dirA, node.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, node.SecretFile), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	cfgB := cfgFor(dirB, &clockB)
	cfgB.NewFence = true
	b := MustOpen(t, cfgB)
	// A resumes: its clock is B's now.
	clockA.Store(clockB.Load() + int64(10*time.Millisecond))

	select {
	case <-a.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the first node did not find its lease lost within 10 s")
	}
	lerr := a.LostErr()
	if lerr == nil || !errors.Is(lerr, node.ErrNodeInUse) {
		t.Fatalf("LostErr: %v, want an error wrapping ErrNodeInUse", lerr)
	}
	for _, want := range []string{"node 1 lost its lease", "must stop", "its own node", dirB} {
		if !strings.Contains(lerr.Error(), want) {
			t.Errorf("LostErr %q: want %q", lerr, want)
		}
	}
	if err := a.Ready(context.Background()); !errors.Is(err, node.ErrNodeInUse) {
		t.Errorf("Ready of the node that lost its lease: %v, want ErrNodeInUse", err)
	}
	select {
	case <-b.Lost():
		t.Error("the node that took the lease lost it too")
	default:
	}
	if err := b.Ready(context.Background()); err != nil {
		t.Errorf("Ready of the node that took the lease: %v", err)
	}
	if Claim(t, b, "after") != spent.Fresh {
		t.Error("a claim on the node that took the lease: not fresh")
	}
}
