package node_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/node"
	"github.com/spentledger/spent/pebble"
)

// Config returns the configuration of a node on data directory dir over
// the embedded store in storeDir.
func Config(tb testing.TB, dir, storeDir string) node.Config {
	tb.Helper()
	cfg := node.DefaultConfig()
	cfg.Dir = dir
	cfg.EmbeddedDir = storeDir
	cfg.Ledger.Namespaces = map[string]spent.Policy{"orders": spent.DefaultPolicy()}
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.OpenStore = func(context.Context) (node.Opened, error) {
		s, err := pebble.Open(storeDir, pebble.DefaultOptions())
		return node.Opened{Store: s, Kind: "pebble", Where: storeDir}, err
	}
	return cfg
}

// MustOpen opens a node of cfg and closes it at the end of the test.
func MustOpen(tb testing.TB, cfg node.Config) *node.Node {
	tb.Helper()
	n, err := node.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { n.Close() })
	return n
}

// Claim claims key in n's ledger and returns the outcome.
func Claim(tb testing.TB, n *node.Node, key string) spent.Outcome {
	tb.Helper()
	res, err := n.Ledger().Claim(context.Background(), spent.Claim{Namespace: "orders", Key: key, Result: []byte("ok")})
	if err != nil {
		tb.Fatalf("claim %s: %v", key, err)
	}
	return res.Outcome
}

// copyDir copies the directory from to a new directory to, as a snapshot of
// a stopped store.
func copyDir(tb testing.TB, from, to string) {
	tb.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		tb.Fatal(err)
	}
}

func TestOpen(t *testing.T) {
	t.Run("RefusesStoreRolledBack", func(t *testing.T) {
		dir := t.TempDir()
		storeDir := filepath.Join(dir, "pebble")
		cfg := Config(t, dir, storeDir)
		n := MustOpen(t, cfg)
		if got := Claim(t, n, "before"); got != spent.Fresh {
			t.Fatalf("claim before the copy: got %s, want fresh", got)
		}
		n.Close()
		snap := filepath.Join(t.TempDir(), "snapshot")
		copyDir(t, storeDir, snap)
		n = MustOpen(t, cfg)
		if got := Claim(t, n, "after"); got != spent.Fresh {
			t.Fatalf("claim after the copy: got %s, want fresh", got)
		}
		n.Close()
		if err := os.RemoveAll(storeDir); err != nil {
			t.Fatal(err)
		}
		copyDir(t, snap, storeDir)

		_, err := node.Open(context.Background(), cfg)
		if !errors.Is(err, node.ErrStoreWentBack) {
			t.Fatalf("open on the earlier copy: got %v, want ErrStoreWentBack", err)
		}
		for _, want := range []string{filepath.Join(dir, node.FenceFile), "spent epoch retire"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("refusal %q: want it to name %q", err, want)
			}
		}
		// The refusal left nothing open: the next Open is refused by the
		// fence again, not by the lock.
		if _, err := node.Open(context.Background(), cfg); !errors.Is(err, node.ErrStoreWentBack) {
			t.Fatalf("open again: got %v, want ErrStoreWentBack", err)
		}
	})

	t.Run("RefusesAnotherSecret", func(t *testing.T) {
		storeDir := filepath.Join(t.TempDir(), "ledger")
		MustOpen(t, Config(t, t.TempDir(), storeDir)).Close()
		// A second data directory has a second secret.
		dir := t.TempDir()
		_, err := node.Open(context.Background(), Config(t, dir, storeDir))
		if !errors.Is(err, node.ErrSecretMismatch) {
			t.Fatalf("open with another secret: got %v, want ErrSecretMismatch", err)
		}
		if want := filepath.Join(dir, node.SecretFile); !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal %q: want it to name %s", err, want)
		}
	})

	t.Run("RefusedFirstStartWritesNoSecret", func(t *testing.T) {
		noSecret := func(t *testing.T, dir string) {
			t.Helper()
			if _, err := os.Stat(filepath.Join(dir, node.SecretFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a refused first start wrote a secret: %v", err)
			}
		}
		// A store that cannot be opened.
		dir := t.TempDir()
		cfg := Config(t, dir, filepath.Join(dir, "pebble"))
		cfg.OpenStore = func(context.Context) (node.Opened, error) {
			return node.Opened{}, errors.New("store unreachable")
		}
		if _, err := node.Open(context.Background(), cfg); err == nil {
			t.Fatal("open with a store that fails: no error")
		}
		noSecret(t, dir)

		// A store set up with another secret: refused, and no secret left.
		storeDir := filepath.Join(t.TempDir(), "ledger")
		MustOpen(t, Config(t, t.TempDir(), storeDir)).Close()
		dir = t.TempDir()
		if _, err := node.Open(context.Background(), Config(t, dir, storeDir)); !errors.Is(err, node.ErrSecretMismatch) {
			t.Fatalf("open with another secret: got %v, want ErrSecretMismatch", err)
		}
		noSecret(t, dir)

		// An embedded store opened, then a refusal before the secret was
		// written (its write fails): the next start is a first start again.
		dir = t.TempDir()
		cfg = Config(t, dir, filepath.Join(dir, "pebble"))
		cfg.WriteFile = func(path string, data []byte, perm os.FileMode) error {
			if filepath.Base(path) == node.SecretFile {
				return errors.New("disk full")
			}
			return os.WriteFile(path, data, perm)
		}
		if _, err := node.Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("open with a failing secret write: got %v, want the write's error", err)
		}
		noSecret(t, dir)
		if Claim(t, MustOpen(t, Config(t, dir, filepath.Join(dir, "pebble"))), "k") != spent.Fresh {
			t.Fatal("claim after a refused first start: not fresh")
		}
	})

	t.Run("RefusesNewSecretBesideItsStore", func(t *testing.T) {
		dir := t.TempDir()
		cfg := Config(t, dir, filepath.Join(dir, "pebble"))
		MustOpen(t, cfg).Close()
		if err := os.Remove(filepath.Join(dir, node.SecretFile)); err != nil {
			t.Fatal(err)
		}
		_, err := node.Open(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "would forget every record") {
			t.Fatalf("open without the secret beside its store: got %v, want a refusal", err)
		}
		if _, err := os.Stat(filepath.Join(dir, node.SecretFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a secret was written beside the store: %v", err)
		}
	})

	t.Run("RefusesSecondOpen", func(t *testing.T) {
		dir := t.TempDir()
		cfg := Config(t, dir, filepath.Join(dir, "pebble"))
		MustOpen(t, cfg)
		_, err := node.Open(context.Background(), cfg)
		if !errors.Is(err, node.ErrDirInUse) {
			t.Fatalf("second open: got %v, want ErrDirInUse", err)
		}
		want := "is in use by process " + strconv.Itoa(os.Getpid())
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), node.DefaultInUseHint) {
			t.Fatalf("refusal %q: want %q and the way out", err, want)
		}
	})

	t.Run("CloseIsIdempotentAndReleasesTheLock", func(t *testing.T) {
		dir := t.TempDir()
		cfg := Config(t, dir, filepath.Join(dir, "pebble"))
		n := MustOpen(t, cfg)
		Claim(t, n, "k")
		for i := range 3 {
			if err := n.Close(); err != nil {
				t.Fatalf("close %d: %v", i+1, err)
			}
		}
		if err := n.Ready(context.Background()); err == nil || err.Error() != "shutting down" {
			t.Fatalf("ready after close: got %v, want shutting down", err)
		}
		n = MustOpen(t, cfg)
		if got := Claim(t, n, "k"); got != spent.Replayed {
			t.Fatalf("claim after reopening: got %s, want replayed", got)
		}
	})

	t.Run("RefusesMissingFenceUnlessNewFence", func(t *testing.T) {
		dir := t.TempDir()
		cfg := Config(t, dir, filepath.Join(dir, "pebble"))
		MustOpen(t, cfg).Close()
		if err := os.Remove(filepath.Join(dir, node.FenceFile)); err != nil {
			t.Fatal(err)
		}
		if _, err := node.Open(context.Background(), cfg); !errors.Is(err, node.ErrFenceMissing) {
			t.Fatalf("open without the fence: got %v, want ErrFenceMissing", err)
		}
		cfg.NewFence = true
		MustOpen(t, cfg).Close()
		if _, err := node.Open(context.Background(), cfg); !errors.Is(err, node.ErrNewFence) {
			t.Fatalf("open with NewFence beside a fence: got %v, want ErrNewFence", err)
		}
	})

	t.Run("DrainFailsReady", func(t *testing.T) {
		dir := t.TempDir()
		n := MustOpen(t, Config(t, dir, filepath.Join(dir, "pebble")))
		if err := n.Ready(context.Background()); err != nil {
			t.Fatalf("ready: got %v, want nil", err)
		}
		n.Drain()
		if err := n.Ready(context.Background()); err == nil {
			t.Fatal("ready after Drain: got nil, want an error")
		}
		if got := Claim(t, n, "in-flight"); got != spent.Fresh {
			t.Fatalf("claim after Drain: got %s, want fresh (the ledger serves until Close)", got)
		}
	})

	t.Run("RegistersMetrics", func(t *testing.T) {
		dir := t.TempDir()
		cfg := Config(t, dir, filepath.Join(dir, "pebble"))
		reg := prometheus.NewRegistry()
		cfg.Registerer = reg
		MustOpen(t, cfg)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, mf := range mfs {
			names = append(names, mf.GetName())
		}
		if !strings.Contains(strings.Join(names, " "), "spent_sweep_removed_records_total") {
			t.Fatalf("metrics: got %v, want the sweeper's", names)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	cases := map[string]func(*node.Config){
		"NoDir":        func(c *node.Config) { c.Dir = "" },
		"NoOpenStore":  func(c *node.Config) { c.OpenStore = nil },
		"SecretSet":    func(c *node.Config) { c.Ledger.Secret = make([]byte, 32) },
		"SharedAndDir": func(c *node.Config) { c.Shared = true },
		"ZeroFence":    func(c *node.Config) { c.FenceInterval = 0 },
		"ZeroSweep":    func(c *node.Config) { c.SweepInterval = 0 },
		"HugeBatch":    func(c *node.Config) { c.SweepBatch = spent.MaxBatch + 1 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config(t, dir, filepath.Join(dir, "pebble"))
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the base config: %v", err)
			}
			mutate(&cfg)
			if err := cfg.Validate(); err == nil {
				t.Fatal("got nil, want a refusal")
			}
			if _, err := node.Open(context.Background(), cfg); err == nil {
				t.Fatal("open: got a node, want a refusal")
			}
		})
	}
}
