package main_test

import (
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

	MustRun(t, nil, "wallet", "init", "--wallet", w, "--issuer", s.Addr)
	MustRun(t, nil, "wallet", "issue", "--wallet", w, "--count", "2")
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
	if r := Run(t, nil, "wallet", "spend", "--wallet", w, "--min-age", "0s", "1000"); r.Code != 1 {
		t.Fatalf("spend 1000 of 170: exit %d, stdout %q, stderr %q; want 1, a refusal", r.Code, r.Stdout, r.Stderr)
	}
	if r := Run(t, nil, "wallet", "spend", "--wallet", w, "not-a-number"); r.Code != 2 {
		t.Fatalf("spend not-a-number: exit %d, want 2 (usage)", r.Code)
	}
	if out := MustRun(t, nil, "wallet", "balance", "--wallet", w); !strings.Contains(out, "170") {
		t.Fatalf("balance after a refused spend: got %q, want 170", out)
	}
}
