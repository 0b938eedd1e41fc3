package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEcashSection serves the value-token issuer from a config file and
// drives it with the wallet commands: issue, balance, spend with change,
// and a resume with nothing in flight.
func TestEcashSection(t *testing.T) {
	if testing.Short() {
		t.Skip("generates RSA keys; skipped with -short")
	}
	cfg := WriteConfig(t, `
[ecash]
issuer_name = "bank.example"
denominations = [1, 2, 5, 10, 20, 50, 100]
difficulty = 8
issue_value = 100
`)
	e := env{"SPENT_KEK": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}
	s := MustServe(t, t.TempDir(), e, nil, "--config", cfg)
	w := filepath.Join(t.TempDir(), "wallet.json")

	// The issuer given as host:port, as claim --addr takes it.
	MustRun(t, nil, "wallet", "init", "--wallet", w, "--issuer", strings.TrimPrefix(s.Addr, "http://"))
	MustRun(t, nil, "wallet", "issue", "--wallet", w, "--count", "2")
	// Tokens just issued are too young at the default --min-age: the error
	// says so and when, with one prefix.
	young := Run(t, nil, "wallet", "spend", "--wallet", w, "30")
	if young.Code != 1 || !strings.HasPrefix(young.Stderr, "spent: wallet spend: no token worth 30 is old enough yet: the oldest of them can be spent in ") {
		t.Fatalf("spend of young tokens: exit %d, stderr %q; want 1 and when a token will be old enough", young.Code, young.Stderr)
	}
	if out := MustRun(t, nil, "wallet", "balance", "--wallet", w); !strings.Contains(out, "200") {
		t.Fatalf("balance after two issuances of 100: got %q, want 200", out)
	}
	spend := Run(t, nil, "wallet", "spend", "--wallet", w, "--min-age", "0s", "30")
	if spend.Code != 0 {
		t.Fatalf("spend 30: exit %d, stdout %q, stderr %q", spend.Code, spend.Stdout, spend.Stderr)
	}
	if out := MustRun(t, nil, "wallet", "balance", "--wallet", w); !strings.Contains(out, "170") {
		t.Fatalf("balance after spending 30 of 200: got %q, want 170", out)
	}
	MustRun(t, nil, "wallet", "resume", "--wallet", w)
	if out := MustRun(t, nil, "wallet", "balance", "--wallet", w); !strings.Contains(out, "170") {
		t.Fatalf("balance after an idle resume: got %q, want 170", out)
	}
	// Spending more than the wallet holds is refused, and loses nothing.
	// It is not a usage error (exit 2): the command line was fine.
	if r := Run(t, nil, "wallet", "spend", "--wallet", w, "--min-age", "0s", "1000"); r.Code != 1 ||
		!strings.HasPrefix(r.Stderr, "spent: wallet spend: no token worth 1000: the largest spendable token is worth 100") {
		t.Fatalf("spend 1000 of 170: exit %d, stdout %q, stderr %q; want 1, a refusal naming the largest token", r.Code, r.Stdout, r.Stderr)
	}
	if r := Run(t, nil, "wallet", "spend", "--wallet", w, "not-a-number"); r.Code != 2 {
		t.Fatalf("spend not-a-number: exit %d, want 2 (usage)", r.Code)
	}
	if out := MustRun(t, nil, "wallet", "balance", "--wallet", w); !strings.Contains(out, "170") {
		t.Fatalf("balance after a refused spend: got %q, want 170", out)
	}
}

// TestWalletMissingFile checks that a wallet command on a file that does
// not exist says how to make one, and leaves no file behind.
func TestWalletMissingFile(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "wallet.json")
	for _, args := range [][]string{{"balance"}, {"spend", "3"}, {"resume"}, {"issue"}} {
		r := Run(t, nil, append([]string{"wallet"}, append(args, "--wallet", w)...)...)
		want := "spent: wallet " + args[0] + ": no wallet file at " + w + ": create one with: spent wallet init --issuer URL --wallet " + w
		if r.Code != 1 || strings.TrimSpace(r.Stderr) != want {
			t.Fatalf("wallet %s without a wallet: exit %d, stderr %q; want 1 and %q", args[0], r.Code, r.Stderr, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("commands on a missing wallet left %d files, want none", len(ents))
	}
}
