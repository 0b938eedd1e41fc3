package main_test

import (
	"net"
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

// TestTokenRedeemConsumesTokenFile redeems from a token file again and
// again: each redeem presents the next token, a token refused as spent is
// removed too, one that got no answer stays, and an empty file says so.
func TestTokenRedeemConsumesTokenFile(t *testing.T) {
	const attester = "attester-token-0123456789abcdef"
	cfg := WriteConfig(t, `
[privacypass]
issuer_name = "issuer.example"
origin_info = ["origin.example"]
token_types = [1]
quota_per_epoch = 10
attester_tokens = ["`+attester+`"]
`)
	e := env{"SPENT_KEK": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}
	s := MustServe(t, t.TempDir(), e, nil, "--config", cfg)
	origin := s.Addr + "/v1/redeem"
	toks := strings.Fields(MustRun(t, nil, "token", "fetch", "--issuer", s.Addr, "--origin", origin, "--attester-token", attester, "--count", "3"))
	if len(toks) != 3 {
		t.Fatalf("token fetch --count 3: got %d tokens", len(toks))
	}
	// The first token is spent before it goes into the file.
	MustRun(t, nil, "token", "redeem", "--origin", origin, "--token", toks[0])
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(strings.Join(toks, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	readFile := func() []string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(b))
	}
	redeem := func(origin string) Result {
		t.Helper()
		return Run(t, nil, "token", "redeem", "--origin", origin, "--token-file", file)
	}

	t.Run("NoAnswerKeepsTheToken", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		down := "http://" + ln.Addr().String() + "/v1/redeem"
		ln.Close()
		r := redeem(down)
		if r.Code != 13 || !strings.Contains(r.Stderr, "stays first in "+file) {
			t.Fatalf("redeem at an origin that is down: exit %d, stderr %q; want 13 and the token kept", r.Code, r.Stderr)
		}
		if got := readFile(); len(got) != 3 || got[0] != toks[0] {
			t.Fatalf("token file after no answer: got %d tokens, want the 3 unchanged", len(got))
		}
	})

	t.Run("SpentTokenIsRemoved", func(t *testing.T) {
		r := redeem(origin)
		if r.Code != 11 || !strings.Contains(r.Stderr, "double_spend") || !strings.Contains(r.Stderr, "refused as already spent: removed from "+file+", 2 left") {
			t.Fatalf("redeem of a spent token: exit %d, stderr %q; want 11, double_spend and the token removed", r.Code, r.Stderr)
		}
		if got := readFile(); len(got) != 2 || got[0] != toks[1] || got[1] != toks[2] {
			t.Fatalf("token file: got %q, want the two unspent tokens", got)
		}
	})

	t.Run("EachRedeemPresentsTheNext", func(t *testing.T) {
		for i, left := range []string{"1 left", "0 left"} {
			r := redeem(origin)
			if r.Code != 0 || !strings.Contains(r.Stderr, "accepted: removed from "+file+", "+left) {
				t.Fatalf("redeem %d: exit %d, stdout %q, stderr %q; want success and %s", i+1, r.Code, r.Stdout, r.Stderr, left)
			}
		}
		if got := readFile(); len(got) != 0 {
			t.Fatalf("token file after spending all: got %q, want empty", got)
		}
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("token file mode: %v, %v; want 0600 kept", fi.Mode(), err)
		}
		for _, tok := range toks[1:] {
			if r := Run(t, nil, "token", "redeem", "--origin", origin, "--token", tok); r.Code == 0 {
				t.Fatalf("a token redeemed from the file: redeemed again; want it spent")
			}
		}
	})

	t.Run("EmptyFileSaysHowToGetMore", func(t *testing.T) {
		r := redeem(origin)
		if r.Code != 2 || !strings.Contains(r.Stderr, "no token left") || !strings.Contains(r.Stderr, "spent token fetch") {
			t.Fatalf("redeem from an empty file: exit %d, stderr %q; want a usage error that says how to get more", r.Code, r.Stderr)
		}
	})
}
