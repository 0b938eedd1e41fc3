package main_test

import (
	"os"
	"strings"
	"testing"

	spentcmd "github.com/spentledger/spent/cmd/spent"
)

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		env          env
		want         string // in stderr
	}{
		{"UnknownTopLevelKey", "nod = 2\n", nil, "unknown key nod"},
		{"UnknownNamespaceKey", "[namespaces.payments]\nmode = \"echo\"\nretension = \"24h\"\n", nil, "unknown key namespaces.payments.retension"},
		{"UnknownTokenKey", "[[tokens]]\ntoken = \"0123456789abcdefXYZ\"\nscopes = [\"claim\"]\nscope = \"admin\"\n", nil, "unknown key tokens.scope"},
		{"BadMode", "[namespaces.payments]\nmode = \"ech\"\n", nil, `[namespaces.payments]: mode "ech": want echo or refuse`},
		{"BadLeaseExpiry", "[namespaces.payments]\non_lease_expiry = \"retry\"\n", nil, `on_lease_expiry "retry": want retake or hold`},
		{"LeaseLongerThanRetention", "[namespaces.payments]\nretention = \"10m\"\nlease = \"1h\"\n", nil, "[namespaces.payments]: lease 1h0m0s longer than retention 10m0s"},
		{"DurationWithoutUnit", "[namespaces.payments]\nretention = 86400\n", nil, `"86400" is not a duration`},
		{"BadDuration", "sweep_interval = \"often\"\n", nil, `"often" is not a duration`},
		{"ZeroRetention", "[namespaces.payments]\nretention = \"0s\"\n", nil, "retention 0s: must be positive"},
		{"MaxExpiryUnderRetention", "[namespaces.gate]\nretention = \"2h\"\nmax_expiry = \"1h\"\n", nil, "[namespaces.gate]: max_expiry 1h0m0s shorter than retention 2h0m0s"},
		{"RawKeyInRefuse", "[namespaces.gate]\nmode = \"refuse\"\nstore_raw_key = true\n", nil, "store_raw_key is only allowed in echo namespaces"},
		{"NodeZero", "node = 0\n", nil, "node = 0: want 1 to"},
		{"SyntaxError", "[namespaces.payments\n", nil, "toml:"},
		{"WrongType", "max_body = \"big\"\n", nil, "max_body"},
		{"ShortToken", "[[tokens]]\ntoken = \"short\"\nscopes = [\"claim\"]\n", nil, "[[tokens]] #1: token of 5 bytes: at least 16"},
		{"TokenAlphabet", "[[tokens]]\ntoken = \"0123456789abcdef 0123\"\nscopes = [\"claim\"]\n", nil, "[[tokens]] #1: token: use only letters"},
		{"TokenEnvUnset", "[[tokens]]\ntoken_env = \"SPENT_TOKEN_X\"\nscopes = [\"claim\"]\n", nil, `token_env = "SPENT_TOKEN_X": the environment variable is unset or empty`},
		{"TokenAndTokenEnv", "[[tokens]]\ntoken = \"0123456789abcdefXYZ\"\ntoken_env = \"X\"\nscopes = [\"claim\"]\n", nil, "set token or token_env, not both"},
		{"NoScopes", "[[tokens]]\ntoken = \"0123456789abcdefXYZ\"\n", nil, "scopes: none given"},
		{"BadScope", "[[tokens]]\ntoken = \"0123456789abcdefXYZ\"\nscopes = [\"root\"]\n", nil, `scope "root"`},
		{"TokenNamespaceUnknown", "[[tokens]]\ntoken = \"0123456789abcdefXYZ\"\nscopes = [\"claim\"]\nnamespaces = [\"payments\"]\n", nil, `namespace "payments" is not configured (have default)`},
		{"DuplicateToken", "[[tokens]]\ntoken = \"0123456789abcdefXYZ\"\nscopes = [\"claim\"]\n[[tokens]]\ntoken_env = \"T\"\nscopes = [\"admin\"]\n", env{"T": "0123456789abcdefXYZ"}, "[[tokens]] #2: the same token as #1"},
		{"BadListen", "listen = \"7070\"\n", nil, `listen "7070": want host:port with a numeric port, e.g. 127.0.0.1:7070`},
		{"StoreMemtableTooSmall", "[store]\nmemtable_size = 1024\n", nil, "[store]: pebble: memtable size 1024: must be at least 1 MiB"},
		{"UnknownStoreKey", "[store]\ncache = 1\n", nil, "unknown key store.cache"},
		{"BadLogLevel", "log_level = \"loud\"\n", nil, `log_level = "loud"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := WriteConfig(t, tc.config)
			r := Run(t, tc.env, "serve", "--config", path, "--listen", "127.0.0.1:0", "--data", t.TempDir())
			if r.Code != spentcmd.ExitUsage {
				t.Fatalf("exit: got %d, want %d; stderr: %s", r.Code, spentcmd.ExitUsage, r.Stderr)
			}
			if !strings.Contains(r.Stderr, tc.want) {
				t.Fatalf("stderr: got %q, want it to contain %q", r.Stderr, tc.want)
			}
			if !strings.Contains(r.Stderr, path) {
				t.Fatalf("stderr: got %q, want it to name the file %s", r.Stderr, path)
			}
		})
	}

	t.Run("MissingFile", func(t *testing.T) {
		r := Run(t, nil, "serve", "--config", "/nonexistent/spent.toml")
		if r.Code != spentcmd.ExitUsage || !strings.Contains(r.Stderr, "/nonexistent/spent.toml") {
			t.Fatalf("exit %d, stderr %q; want exit %d naming the file", r.Code, r.Stderr, spentcmd.ExitUsage)
		}
	})
}

func TestConfigServes(t *testing.T) {
	cfg := WriteConfig(t, `
node = 7
sweep_interval = "100ms"
max_result = 64
log_level = "debug"
log_format = "json"

[store]
expected_records = 100000
cache_size = 8388608
memtable_size = 4194304

[namespaces.payments]
mode = "echo"
retention = "24h"
lease = "30s"
on_lease_expiry = "hold"

[namespaces.tickets]
mode = "refuse"
retention = "1h"

[[tokens]]
token_env = "SPENT_TOKEN_CLAIM"
namespaces = ["payments", "tickets"]
scopes = ["claim"]
`)
	e := env{"SPENT_TOKEN_CLAIM": "claim-token-0123456789"}
	s := MustServe(t, t.TempDir(), e, nil, "--config", cfg)
	out := MustRun(t, nil, "claim", "--addr", s.Addr, "--token", "claim-token-0123456789", "-n", "payments", "--json", "p-1", "--result", "ok")
	for _, want := range []string{`"outcome":"fresh"`, `"seq":"7:`} {
		if !strings.Contains(out, want) {
			t.Fatalf("claim: got %s, want %s (node 7 from the file)", out, want)
		}
	}
	r := Run(t, nil, "claim", "--addr", s.Addr, "--token", "claim-token-0123456789", "-n", "payments", "p-2", "--result", strings.Repeat("x", 65))
	if r.Code != 6 || !strings.Contains(r.Stderr, "too_large") {
		t.Fatalf("claim over max_result: exit %d, stderr %q; want exit 6 (too_large)", r.Code, r.Stderr)
	}
	r = Run(t, nil, "claim", "--addr", s.Addr, "--token", "claim-token-0123456789", "p-3")
	if r.Code != 12 {
		t.Fatalf("claim outside the token's namespaces: exit %d, stderr %q; want 12 (forbidden)", r.Code, r.Stderr)
	}
	s.Stop()
	if !strings.Contains(s.Stderr.String(), `"level":"INFO"`) {
		t.Fatalf("log_format json: stderr is not JSON:\n%s", s.Stderr)
	}
}

// TestConfigurationDocExample serves the complete example of
// docs/configuration.md, so that the documentation cannot drift from what
// the server accepts.
func TestConfigurationDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## A complete example")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## A complete example"`)
	}
	_, rest, _ = strings.Cut(rest, "```toml\n")
	example, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/configuration.md: no toml block in the complete example")
	}
	e := env{
		"SPENT_TOKEN_API":   "api-token-0123456789",
		"SPENT_TOKEN_GATES": "gates-token-0123456789",
		"SPENT_TOKEN_OPS":   "ops-token-0123456789",
	}
	// The example's certificate and key, made for the test where it names
	// them.
	f := newTLSFiles(t)
	example = strings.NewReplacer("/etc/spent/tls/server.crt", f.serverCert, "/etc/spent/tls/server.key", f.serverKey).Replace(example)
	s := MustServe(t, t.TempDir(), e, nil, "--config", WriteConfig(t, example))
	out := MustRun(t, nil, "claim", "--addr", s.Addr, "--cacert", f.caFile, "--token", "gates-token-0123456789", "-n", "tickets", "t-1", "--result", "")
	contains(t, "claim with the example's gate token", out, "t-1: fresh")
	r := Run(t, nil, "claim", "--addr", s.Addr, "--cacert", f.caFile, "--token", "gates-token-0123456789", "-n", "payments", "p-1")
	if r.Code != 12 {
		t.Fatalf("gate token in payments: exit %d, want 12 (forbidden); stderr %q", r.Code, r.Stderr)
	}
	MustRun(t, nil, "unknown", "list", "--addr", s.Addr, "--cacert", f.caFile, "--token", "ops-token-0123456789")
}
