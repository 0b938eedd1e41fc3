package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/pebble"
)

// copyDir copies the directory src to dst, as a snapshot of a stopped store.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v: %s", src, dst, err, out)
	}
}

func TestFence(t *testing.T) {
	t.Run("RefusesAStoreRestoredFromASnapshot", func(t *testing.T) {
		data, root := t.TempDir(), t.TempDir()
		storeDir := filepath.Join(root, "ledger")
		s := MustServe(t, data, nil, nil, "--store", "pebble://"+storeDir)
		MustRun(t, nil, "claim", "--addr", s.Addr, "ticket-1", "--result", "ok")
		s.Stop()
		copyDir(t, storeDir, filepath.Join(root, "snapshot"))

		s = MustServe(t, data, nil, nil, "--store", "pebble://"+storeDir)
		MustRun(t, nil, "claim", "--addr", s.Addr, "ticket-2", "--result", "ok")
		s.Stop()

		// The operator restores the snapshot: ticket-2 would be fresh again.
		if err := os.RemoveAll(storeDir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(root, "snapshot"), storeDir); err != nil {
			t.Fatal(err)
		}
		r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", data, "--store", "pebble://"+storeDir)
		if r.Code == 0 || !strings.Contains(r.Stderr, "the store went backwards") || !strings.Contains(r.Stderr, "spent tokens") {
			t.Fatalf("serve on a restored store: exit %d, stderr %q; want a refusal that explains", r.Code, r.Stderr)
		}
	})

	t.Run("RefusesAnotherStore", func(t *testing.T) {
		data := t.TempDir()
		MustServe(t, data, nil, nil, "--store", "pebble://"+filepath.Join(t.TempDir(), "a")).Stop()
		r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", data, "--store", "pebble://"+filepath.Join(t.TempDir(), "b"))
		if r.Code == 0 || !strings.Contains(r.Stderr, "the store went backwards") {
			t.Fatalf("serve on an empty store with an old fence: exit %d, stderr %q; want a refusal", r.Code, r.Stderr)
		}
	})

	t.Run("RefusesADamagedFence", func(t *testing.T) {
		data := t.TempDir()
		MustServe(t, data, nil, nil).Stop()
		if err := os.WriteFile(filepath.Join(data, "fence"), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", data)
		if r.Code == 0 || !strings.Contains(r.Stderr, "is damaged") {
			t.Fatalf("serve with a damaged fence: exit %d, stderr %q; want a refusal", r.Code, r.Stderr)
		}
	})

	t.Run("AdvancesAndKeepsOneCanary", func(t *testing.T) {
		data := t.TempDir()
		cfg := WriteConfig(t, "fence_interval = \"1s\"\n")
		s := MustServe(t, data, nil, nil, "--config", cfg)
		before, err := os.ReadFile(filepath.Join(data, "fence"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)
		mid, err := os.ReadFile(filepath.Join(data, "fence"))
		if err != nil {
			t.Fatal(err)
		}
		if string(mid) == string(before) {
			t.Fatalf("the fence did not advance in 2.5s with fence_interval 1s: %s", mid)
		}
		s.Stop()
		// Restarts pass the check, and old canaries are released: one is live.
		for range 3 {
			MustServe(t, data, nil, nil, "--config", cfg).Stop()
		}
		st, err := pebble.Open(filepath.Join(data, "pebble"), pebble.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		recs, err := st.ListPending(context.Background(), "spent.fence", time.Now().Add(75*365*24*time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 {
			t.Fatalf("live canaries after restarts: got %d, want 1", len(recs))
		}
	})
}

func TestEpochRetire(t *testing.T) {
	if testing.Short() {
		t.Skip("generates RSA keys; skipped with -short")
	}
	const attester = "attester-token-0123456789abcdef"
	cfg := WriteConfig(t, `
[privacypass]
issuer_name = "issuer.example"
token_types = [2]
attester_tokens = ["`+attester+`"]

[ecash]
issuer_name = "bank.example"
denominations = [10, 100]
difficulty = 8
issue_value = 100
`)
	e := env{"SPENT_KEK": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}
	data, root := t.TempDir(), t.TempDir()
	storeDir := filepath.Join(root, "ledger")
	s := MustServe(t, data, e, nil, "--config", cfg, "--store", "pebble://"+storeDir)
	dirBefore := MustRun(t, nil, "token", "directory", "--issuer", s.Addr)
	// Records in the token namespaces (a Privacy Pass token redeemed; an
	// ecash issuance and a spend) and in an ordinary namespace.
	tok := strings.TrimSpace(MustRun(t, nil, "token", "fetch", "--issuer", s.Addr, "--origin", s.Addr+"/v1/redeem", "--attester-token", attester))
	MustRun(t, nil, "token", "redeem", "--origin", s.Addr+"/v1/redeem", "--token", tok)
	w := filepath.Join(t.TempDir(), "wallet.json")
	MustRun(t, nil, "wallet", "init", "--wallet", w, "--issuer", s.Addr)
	MustRun(t, nil, "wallet", "issue", "--wallet", w)
	MustRun(t, nil, "wallet", "spend", "--wallet", w, "--min-age", "0s", "10")
	MustRun(t, nil, "claim", "--addr", s.Addr, "ticket-0", "--result", "ok")
	s.Stop()
	copyDir(t, storeDir, filepath.Join(root, "snapshot"))
	s = MustServe(t, data, e, nil, "--config", cfg, "--store", "pebble://"+storeDir)
	MustRun(t, nil, "claim", "--addr", s.Addr, "ticket-1", "--result", "ok")
	s.Stop()
	if err := os.RemoveAll(storeDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "snapshot"), storeDir); err != nil {
		t.Fatal(err)
	}
	if r := Run(t, e, "serve", "--listen", "127.0.0.1:0", "--data", data, "--config", cfg, "--store", "pebble://"+storeDir); r.Code == 0 {
		t.Fatal("serve on the restored store: exit 0, want a refusal")
	}

	// Without --yes nothing happens.
	if r := Run(t, e, "epoch", "retire", "--data", data, "--config", cfg, "--store", "pebble://"+storeDir); r.Code != 2 {
		t.Fatalf("epoch retire without --yes: exit %d, want 2", r.Code)
	}
	out := MustRun(t, e, "epoch", "retire", "--yes", "--data", data, "--config", cfg, "--store", "pebble://"+storeDir)
	t.Logf("epoch retire:\n%s", out)
	for _, want := range []string{"retired keys", "generation 2",
		"token namespace privacypass emptied: 1 record removed",
		"token namespace ecash-spend emptied: 1 record removed",
		"token namespace ecash-issue kept"} {
		if !strings.Contains(out, want) {
			t.Fatalf("epoch retire: got %q, want %q", out, want)
		}
	}
	s = MustServe(t, data, e, nil, "--config", cfg, "--store", "pebble://"+storeDir)
	if after := MustRun(t, nil, "token", "directory", "--issuer", s.Addr); after == dirBefore {
		t.Fatalf("directory after epoch retire: the same keys as before:\n%s", after)
	}
	// The ordinary namespace keeps its record.
	if r := Run(t, nil, "claim", "--addr", s.Addr, "ticket-0", "--result", "ok"); r.Code != 0 || !strings.Contains(r.Stdout, "ticket-0: replayed") {
		t.Fatalf("claim of ticket-0 after epoch retire: exit %d, stdout %q; want it replayed from its record", r.Code, r.Stdout)
	}
	s.Stop()
	// The new generation's fence holds across a restart.
	MustServe(t, data, e, nil, "--config", cfg, "--store", "pebble://"+storeDir).Stop()

	// In the store: nothing left in the emptied token namespaces, the
	// issuance's record still in ecash-issue. (Purge counts what it
	// removes: the store is dropped after this.)
	store, err := pebble.Open(storeDir, pebble.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for ns, want := range map[string]int{"privacypass": 0, "ecash-spend": 0, "ecash-issue": 1} {
		if n, err := store.Purge(context.Background(), ns, 100); err != nil || n != want {
			t.Fatalf("records left in %s after epoch retire: got %d, %v, want %d", ns, n, err, want)
		}
	}
}
