package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	spentcmd "github.com/spentledger/spent/cmd/spent"
	"github.com/spentledger/spent/internal/crashpoint"
	"github.com/spentledger/spent/internal/syncbuf"
	"github.com/spentledger/spent/pebble"
)

// RunWith is Run with m's fields set through setup.
func RunWith(tb testing.TB, e env, setup func(*spentcmd.Main), args ...string) Result {
	tb.Helper()
	var out, errb syncbuf.Buffer
	m := spentcmd.NewMain()
	m.Stdin = strings.NewReader("")
	m.Stdout = &out
	m.Stderr = &errb
	m.Getenv = e.get
	setup(m)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := m.Execute(ctx, args)
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// retireSetup is a data directory and a store that the fence refuses (the
// store was restored from a snapshot), waiting for epoch retire: the keys
// of ClaimBoth are in the snapshot.
type retireSetup struct {
	data, store string
	tokens      string // configuration with token sections
	plain       string // configuration without them
	env         env
}

func newRetireSetup(t *testing.T) retireSetup {
	t.Helper()
	rs := retireSetup{
		data: t.TempDir(), store: filepath.Join(t.TempDir(), "ledger"),
		plain: WriteConfig(t, twoNamespaces),
		tokens: WriteConfig(t, twoNamespaces+`
[privacypass]
issuer_name = "issuer.example"
token_types = [2]
attester_tokens = ["attester-token-0123456789abcdef"]

[ecash]
issuer_name = "bank.example"
denominations = [10, 100]
difficulty = 8
issue_value = 100
`),
		env: env{"SPENT_KEK": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="},
	}
	s := MustServe(t, rs.data, rs.env, nil, "--config", rs.tokens, "--store", "pebble://"+rs.store)
	ClaimBoth(t, s.Addr)
	s.Stop()
	snap := filepath.Join(t.TempDir(), "snapshot")
	copyDir(t, rs.store, snap)
	s = MustServe(t, rs.data, rs.env, nil, "--config", rs.tokens, "--store", "pebble://"+rs.store)
	ClaimOutcome(t, s.Addr, "default", "lost-with-the-restore")
	s.Stop()
	if err := os.RemoveAll(rs.store); err != nil {
		t.Fatal(err)
	}
	copyDir(t, snap, rs.store)
	return rs
}

// copy returns a copy of the setup in new directories.
func (rs retireSetup) copy(t *testing.T) retireSetup {
	t.Helper()
	c := rs
	c.data, c.store = filepath.Join(t.TempDir(), "data"), filepath.Join(t.TempDir(), "ledger")
	copyDir(t, rs.data, c.data)
	copyDir(t, rs.store, c.store)
	return c
}

func (rs retireSetup) retireArgs() []string {
	return []string{"epoch", "retire", "--yes", "--data", rs.data, "--config", rs.tokens, "--store", "pebble://" + rs.store}
}

// assertRetired reruns epoch retire if asked, then checks that serve accepts
// the store, that the keys of echo and refuse namespaces were kept, that
// the token namespaces are empty and the keys moved aside, and that one
// canary is live.
func (rs retireSetup) assertRetired(t *testing.T, rerun bool) {
	t.Helper()
	if rerun {
		r := Run(t, rs.env, rs.retireArgs()...)
		if r.Code != 0 {
			t.Fatalf("epoch retire, run again: exit %d, want 0; stderr:\n%s", r.Code, r.Stderr)
		}
	}
	s, r := TryServe(t, rs.data, nil, nil, "--config", rs.plain, "--store", "pebble://"+rs.store)
	if s == nil {
		t.Fatalf("serve after epoch retire: exit %d, want a start; stderr:\n%s", r.Code, r.Stderr)
	}
	AssertRepeats(t, s.Addr)
	if code := s.Stop(); code != 0 {
		t.Fatalf("serve exit: got %d, want 0; stderr:\n%s", code, s.Stderr)
	}
	AssertNoTempFiles(t, rs.data)
	for _, dir := range []string{"privacypass-keys", "ecash-keys"} {
		if _, err := os.Stat(filepath.Join(rs.data, dir)); err == nil {
			t.Fatalf("%s is still in the data directory after epoch retire", dir)
		}
	}
	if n := LiveCanaries(t, rs.store); n != 1 {
		t.Fatalf("live canaries after epoch retire and a restart: got %d, want 1", n)
	}
	st, err := pebble.Open(rs.store, pebble.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, ns := range []string{"privacypass", "ecash-spend"} {
		if n, err := st.Purge(context.Background(), ns, 100); err != nil || n != 0 {
			t.Fatalf("records left in %s after epoch retire: got %d, %v, want 0", ns, n, err)
		}
	}
}

// TestEpochRetireCrash kills epoch retire at each of its steps: a plain rerun
// finishes it, and serve then accepts the store with every key of the echo
// and refuse namespaces kept.
func TestEpochRetireCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("generates RSA keys; skipped with -short")
	}
	setup := newRetireSetup(t)
	points := append([]string{
		"retire.keys-moved:privacypass-keys",
		"retire.keys-moved:ecash-keys",
		"retire.purged:privacypass",
		"retire.purged:ecash-spend",
	}, advancePoints...)
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			rs := setup.copy(t)
			env := []string{crashpoint.EnvVar + "=" + point}
			for k, v := range rs.env {
				env = append(env, k+"="+v)
			}
			r := RunBinary(t, env, rs.retireArgs()...)
			if !r.Killed() {
				t.Fatalf("epoch retire with %s=%s: got %v, want killed by SIGKILL at that point; stderr:\n%s", crashpoint.EnvVar, point, r.Err, r.Stderr)
			}
			rs.assertRetired(t, true)
		})
	}
}

// TestEpochRetireFaults fails one step of epoch retire once: either retire
// finishes anyway, or it fails with a message that says to run it again,
// and the rerun finishes it.
func TestEpochRetireFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("generates RSA keys; skipped with -short")
	}
	setup := newRetireSetup(t)
	cases := []struct {
		name  string
		store *FaultyStore // nil: the fence file write fails
	}{
		{"FenceFileWriteFails", nil},
		{"PurgeFails", &FaultyStore{Method: "Purge"}},
		{"ReserveSeqFails", &FaultyStore{Method: "ReserveSeq"}},
		{"CanaryClaimFailsAfterWriting", &FaultyStore{Method: "ClaimAfter", Namespace: spent.ReservedPrefix + "fence"}},
		{"ReleaseFails", &FaultyStore{Method: "Release"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs := setup.copy(t)
			fw := &FaultyWrite{Base: "fence"}
			r := RunWith(t, rs.env, func(m *spentcmd.Main) {
				m.WriteFile = fw.WriteFile
				if tc.store != nil {
					m.WrapStore = func(st spent.Store) spent.Store { tc.store.Store = st; tc.store.Arm(); return tc.store }
				} else {
					fw.Arm()
				}
			}, rs.retireArgs()...)
			fired := fw.Fired()
			if tc.store != nil {
				fired = tc.store.Fired()
			}
			if fired != 1 {
				t.Fatalf("injected faults: got %d, want 1; stderr:\n%s", fired, r.Stderr)
			}
			if r.Code != 0 && !strings.Contains(r.Stderr, "run spent epoch retire again") {
				t.Fatalf("epoch retire with a fault: exit %d, stderr %q; want success or a message that says to run it again", r.Code, r.Stderr)
			}
			rs.assertRetired(t, r.Code != 0)
		})
	}
}
