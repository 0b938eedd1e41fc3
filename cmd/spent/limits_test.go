package main_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	spentcmd "github.com/spentledger/spent/cmd/spent"
)

func TestLimitsConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, config, want string }{
		{"MaxBatchResultZero", "max_batch_result = 0\n", "max_batch_result = 0: want 1 to"},
		{"MaxBatchResultHuge", "max_batch_result = 4294967296\n", "max_batch_result = 4294967296: want 1 to"},
		{"MaxBodiesZero", "max_bodies = 0\n", "max_bodies = 0: must be positive"},
		{"MaxBodiesUnderMaxBody", "max_bodies = 1048576\n", "max_bodies = 1048576: must be at least max_body (33554432)"},
		{"MaxBodiesUnderSmallerMaxBody", "max_body = 1024\nmax_bodies = 1023\n", "max_bodies = 1023: must be at least max_body (1024)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := WriteConfig(t, tc.config)
			r := Run(t, nil, "serve", "--config", path, "--listen", "127.0.0.1:0", "--data", t.TempDir())
			if r.Code != spentcmd.ExitUsage || !strings.Contains(r.Stderr, tc.want) || !strings.Contains(r.Stderr, path) {
				t.Fatalf("got exit %d, stderr %q; want %d and %q naming the file", r.Code, r.Stderr, spentcmd.ExitUsage, tc.want)
			}
		})
	}
}

// TestBodyBudgetCoversEveryRoute fills a small budget of bodies in flight
// with one held body, then sends a body to the /v1 API, to Privacy Pass
// and to e-cash: each is answered 503 with Retry-After before its handler
// runs.
func TestBodyBudgetCoversEveryRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("generates an RSA key; skipped with -short")
	}
	cfg := WriteConfig(t, `max_body = 65536
max_bodies = 65536

[privacypass]
issuer_name = "issuer.example"
token_types = [1]
attester_tokens = ["attester-token-0123456789abcdef"]

[ecash]
issuer_name = "bank.example"
denominations = [1]
`)
	s := MustServe(t, t.TempDir(), env{"SPENT_KEK": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}, nil, "--config", cfg)
	host := strings.TrimPrefix(s.Addr, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !holdBody(c, host, 65536) {
		t.Fatal("the held body was answered before it was complete, want it read")
	}
	for _, path := range []string{"/v1/claim", "/v1/claims", "/v1/redeem", "/v1/ecash/spend", "/v1/ecash/issue", "/token-request"} {
		req, err := http.NewRequest(http.MethodPost, s.Addr+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("POST %s with the budget full: got %d (Retry-After %q), want 503 with Retry-After", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if status, b := get(t, s.Addr+"/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz with the budget full: got %d %s, want 200", status, b)
	}
}

// TestClaimCommandReadsOmittedResults claims two keys at once (one batch)
// on a server whose batch budget is smaller than their results: the
// command reads the results the answer left out and prints them all.
func TestClaimCommandReadsOmittedResults(t *testing.T) {
	s := MustServe(t, t.TempDir(), nil, nil, "--config", WriteConfig(t, "max_batch_result = 16\n"))
	MustRun(t, nil, "claim", "--addr", s.Addr, "a", "--result", "result of a, 20 B.")
	MustRun(t, nil, "claim", "--addr", s.Addr, "b", "--result", "result of b, 20 B.")
	out := MustRun(t, nil, "claim", "--addr", s.Addr, "a", "b", "--result", "ignored")
	for _, want := range []string{"a: replayed", "b: replayed", `"result of a, 20 B."`, `"result of b, 20 B."`} {
		if !strings.Contains(out, want) {
			t.Fatalf("spent claim a b: got %q, want it to contain %q", out, want)
		}
	}
}
