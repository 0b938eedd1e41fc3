package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/internal/etcdtest"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/internal/redistest"
)

// copySecret gives the data directory to the secret of the data directory
// from, as an operator does for a second server on a shared store.
func copySecret(t *testing.T, from, to string) {
	t.Helper()
	secret, err := os.ReadFile(filepath.Join(from, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(to, "secret"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
}

// assertMissingFenceRefused fails unless r is a refusal that says the fence
// is missing, why that matters, and the way out.
func assertMissingFenceRefused(t *testing.T, r Result, data string) {
	t.Helper()
	for _, want := range []string{filepath.Join(data, "fence") + " is missing", "rolled back", "--new-fence"} {
		if r.Code == 0 || !strings.Contains(r.Stderr, want) {
			t.Fatalf("serve without its fence beside a store that holds records: exit %d, stderr %q; want a refusal saying %q", r.Code, r.Stderr, want)
		}
	}
}

func TestMissingFence(t *testing.T) {
	t.Run("EmbeddedStoreRefused", func(t *testing.T) {
		data := t.TempDir()
		cfg := WriteConfig(t, twoNamespaces)
		s := MustServe(t, data, nil, nil, "--config", cfg)
		ClaimBoth(t, s.Addr)
		s.Stop()
		if err := os.Remove(filepath.Join(data, "fence")); err != nil {
			t.Fatal(err)
		}
		s, r := TryServe(t, data, nil, nil, "--config", cfg)
		if s != nil {
			t.Fatal("serve without its fence beside the embedded store: started, want a refusal")
		}
		assertMissingFenceRefused(t, r, data)
		if _, err := os.Stat(filepath.Join(data, "fence")); err == nil {
			t.Fatal("the refused start wrote a fence")
		}

		// The deliberate start with --new-fence.
		s = MustServe(t, data, nil, nil, "--config", cfg, "--new-fence")
		AssertRepeats(t, s.Addr)
		s.Stop()
		// Once the fence exists the flag is refused: left in a unit file,
		// it would let a later loss of the fence go unnoticed.
		if s, r := TryServe(t, data, nil, nil, "--config", cfg, "--new-fence"); s != nil || r.Code != 2 || !strings.Contains(r.Stderr, "remove --new-fence") {
			t.Fatalf("serve --new-fence with a fence: exit %d, stderr %q; want a refusal", r.Code, r.Stderr)
		}
		s = MustServe(t, data, nil, nil, "--config", cfg)
		AssertRepeats(t, s.Addr)
	})

	t.Run("NewFenceOnAnEmptyStore", func(t *testing.T) {
		data := t.TempDir()
		s := MustServe(t, data, nil, nil, "--new-fence")
		s.Stop()
		MustServe(t, data, nil, nil).Stop()
	})

	t.Run("SharedStoreRefused", func(t *testing.T) {
		url := redistest.Start(t).URL()
		dataA, dataB := t.TempDir(), t.TempDir()
		a := MustServe(t, dataA, nil, nil, "--store", url, "--config", WriteConfig(t, twoNamespaces))
		ClaimBoth(t, a.Addr)
		copySecret(t, dataA, dataB)
		cfgB := WriteConfig(t, "node = 2\n"+twoNamespaces)
		s, r := TryServe(t, dataB, nil, nil, "--store", url, "--config", cfgB)
		if s != nil {
			t.Fatalf("a second server without a fence on a shared store that holds records: started, want a refusal; stderr:\n%s", s.Stderr)
		}
		assertMissingFenceRefused(t, r, dataB)
		b := MustServe(t, dataB, nil, nil, "--store", url, "--config", cfgB, "--new-fence")
		AssertRepeats(t, b.Addr)
	})
}

// sharedEngines are the shared stores the node lease is tried on, each
// started for the test.
var sharedEngines = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"redis", func(t *testing.T) string { return redistest.Start(t).URL() }},
	{"postgres", func(t *testing.T) string {
		dsn := pgtest.DSN(t)
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "schema=" + fmt.Sprintf("node_lease_%d_%d", os.Getpid(), time.Now().UnixNano())
	}},
	{"etcd", func(t *testing.T) string {
		return "etcd://" + strings.Join(stripScheme(etcdtest.Start(t, 1).Endpoints()), ",") + "/node-lease-test"
	}},
}

// TestNodeInUse starts two servers with one node on one shared store: the
// second is refused at start, and starts once the first has stopped. The
// first renews its lease at every advance without a warning.
func TestNodeInUse(t *testing.T) {
	for _, eng := range sharedEngines {
		t.Run(eng.name, func(t *testing.T) {
			url := eng.url(t)
			dataA, dataB := t.TempDir(), t.TempDir()
			cfg := WriteConfig(t, twoNamespaces)
			a := MustServe(t, dataA, nil, nil, "--store", url, "--config", cfg)
			ClaimBoth(t, a.Addr)
			// Past the first canaries, so that the fence's canaries do not
			// collide by chance, and the lease was renewed.
			WaitFence(t, dataA, 3)
			copySecret(t, dataA, dataB)

			b, r := TryServe(t, dataB, nil, nil, "--store", url, "--config", cfg, "--new-fence")
			if b != nil {
				t.Fatal("a second server with node 1 on the store: started, want a refusal")
			}
			for _, want := range []string{"node 1 is in use", "lease runs out", "its own node", "pid " + strconv.Itoa(os.Getpid())} {
				if !strings.Contains(r.Stderr, want) {
					t.Fatalf("second server with node 1: exit %d, stderr %q; want %q", r.Code, r.Stderr, want)
				}
			}
			if code := a.Stop(); code != 0 {
				t.Fatalf("first server exit: got %d, want 0; stderr:\n%s", code, a.Stderr)
			}
			if n := countLines(a.Stderr.String(), "level=WARN", `msg="fence:`); n != 0 {
				t.Fatalf("first server: %d fence warnings, want none:\n%s", n, a.Stderr)
			}
			b = MustServe(t, dataB, nil, nil, "--store", url, "--config", cfg, "--new-fence")
			AssertRepeats(t, b.Addr)
			// Long enough for its fence to pass the canaries the first
			// server left.
			WaitFence(t, dataB, 5)
			if code := b.Stop(); code != 0 {
				t.Fatalf("second server exit: got %d, want 0; stderr:\n%s", code, b.Stderr)
			}
			if n := countLines(b.Stderr.String(), "level=WARN", `msg="fence:`); n != 0 {
				t.Fatalf("second server: %d fence warnings, want none:\n%s", n, b.Stderr)
			}
			// The second has stopped gracefully: the first starts again, on
			// its own fence.
			MustServe(t, dataA, nil, nil, "--store", url, "--config", cfg).Stop()
		})
	}
}

// TestDataDirInUse starts a second process on the data directory of a
// running server: it is refused with the first process's pid, and so is
// epoch retire.
func TestDataDirInUse(t *testing.T) {
	data := t.TempDir()
	p := StartBinary(t, nil, "--data", data)
	want := fmt.Sprintf("data directory %s is in use by process %d (%s)", data, p.Pid(), filepath.Join(data, "lock"))

	s, r := TryServe(t, data, nil, nil)
	if s != nil {
		t.Fatal("a second server on the data directory: started, want a refusal")
	}
	if !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "its own --data") {
		t.Fatalf("second server: exit %d, stderr %q; want %q and the way out", r.Code, r.Stderr, want)
	}
	r = Run(t, nil, "epoch", "retire", "--yes", "--data", data)
	if r.Code == 0 || !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "stop the server first") {
		t.Fatalf("epoch retire on a data directory in use: exit %d, stderr %q; want %q", r.Code, r.Stderr, want)
	}
	p.Stop()
	MustServe(t, data, nil, nil).Stop()
}
