package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrivacypassSection serves the issuer and /v1/redeem from a config file,
// gets a token with the CLI, spends it, and checks that a second
// presentation and a restart behave.
func TestPrivacypassSection(t *testing.T) {
	if testing.Short() {
		t.Skip("generates RSA keys; skipped with -short")
	}
	const attester = "attester-token-0123456789abcdef"
	cfg := WriteConfig(t, `
[privacypass]
issuer_name = "issuer.example"
origin_info = ["origin.example"]
token_types = [2, 1]
epoch = "24h"
grace = "6h"
quota_per_epoch = 3
attester_tokens = ["`+attester+`"]
`)
	dir := t.TempDir()
	e := env{"SPENT_KEK": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}
	s := MustServe(t, dir, e, nil, "--config", cfg)

	dirOut := MustRun(t, nil, "token", "directory", "--issuer", s.Addr)
	if !strings.Contains(dirOut, "2") {
		t.Fatalf("token directory: got %q, want the keys listed", dirOut)
	}
	// A token, spent once at /v1/redeem.
	fetched := MustRun(t, nil, "token", "fetch", "--issuer", s.Addr, "--origin", s.Addr+"/v1/redeem", "--attester-token", attester)
	tok := strings.TrimSpace(fetched)
	if tok == "" || strings.Contains(tok, "\n") {
		t.Fatalf("token fetch: got %q, want one token", fetched)
	}
	first := Run(t, nil, "token", "redeem", "--origin", s.Addr+"/v1/redeem", "--token", tok)
	if first.Code != 0 {
		t.Fatalf("first redeem: exit %d, stdout %q, stderr %q; want success", first.Code, first.Stdout, first.Stderr)
	}
	second := Run(t, nil, "token", "redeem", "--origin", s.Addr+"/v1/redeem", "--token", tok)
	// The refusal names the origin's problem code, read from its problem document.
	if second.Code == 0 || second.Code == 2 || !strings.Contains(second.Stderr, "double_spend") {
		t.Fatalf("second redeem of the same token: exit %d, stdout %q, stderr %q; want a refusal (not a usage error)", second.Code, second.Stdout, second.Stderr)
	}
	t.Logf("second redeem: exit %d: %s", second.Code, strings.TrimSpace(second.Stderr))
	// The quota: 3 per epoch; one is used.
	for i := range 2 {
		if r := Run(t, nil, "token", "fetch", "--issuer", s.Addr, "--origin", s.Addr+"/v1/redeem", "--attester-token", attester); r.Code != 0 {
			t.Fatalf("fetch %d within the quota: exit %d, stderr %q", i+2, r.Code, r.Stderr)
		}
	}
	if r := Run(t, nil, "token", "fetch", "--issuer", s.Addr, "--origin", s.Addr+"/v1/redeem", "--attester-token", attester); r.Code == 0 || !strings.Contains(r.Stderr+r.Stdout, "quota") {
		t.Fatalf("fetch over the quota: exit %d, stdout %q, stderr %q; want a quota refusal", r.Code, r.Stdout, r.Stderr)
	}
	s.Stop()

	// A restart keeps the keys and the ledger: the spent token stays spent.
	keys, err := os.ReadDir(filepath.Join(dir, "privacypass-keys"))
	if err != nil || len(keys) == 0 {
		t.Fatalf("key directory: %d entries, %v", len(keys), err)
	}
	s = MustServe(t, dir, e, nil, "--config", cfg)
	after := MustRun(t, nil, "token", "directory", "--issuer", s.Addr)
	if after != dirOut {
		t.Fatalf("directory after restart:\n%s\nwant the same keys as before:\n%s", after, dirOut)
	}
	if r := Run(t, nil, "token", "redeem", "--origin", s.Addr+"/v1/redeem", "--token", tok); r.Code == 0 {
		t.Fatalf("redeem after restart: exit 0; want the token still spent")
	}
}
