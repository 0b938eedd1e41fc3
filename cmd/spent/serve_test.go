package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
	spentcmd "github.com/spentledger/spent/cmd/spent"
	sphttp "github.com/spentledger/spent/http"
)

func TestServe(t *testing.T) {
	t.Run("ClaimFreshThenReplayed", func(t *testing.T) {
		s := MustServe(t, t.TempDir(), nil, nil)
		c := sphttp.NewClient(s.Addr, sphttp.ClientConfig{})
		ctx := context.Background()
		claim := spent.Claim{Namespace: "default", Key: "order-1", Result: []byte(`{"status":"paid"}`)}
		r, err := c.Claim(ctx, claim)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != spent.Fresh {
			t.Fatalf("first claim: got %s, want fresh", r.Outcome)
		}
		claim.Result = []byte("another result, ignored on replay")
		r, err = c.Claim(ctx, claim)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != spent.Replayed || string(r.Record.Result) != `{"status":"paid"}` {
			t.Fatalf("second claim: got %s with %q, want replayed with the first result", r.Outcome, r.Record.Result)
		}
		if code := s.Stop(); code != 0 {
			t.Fatalf("serve exit: got %d, want 0; stderr:\n%s", code, s.Stderr)
		}
	})

	t.Run("LogsThatAuthIsOff", func(t *testing.T) {
		s := MustServe(t, t.TempDir(), nil, nil)
		s.Stop()
		if got := s.Stderr.String(); !strings.Contains(got, "auth is off") || !strings.Contains(got, "loopback-only") {
			t.Fatalf("stderr does not say that auth is off and the server is loopback-only:\n%s", got)
		}
	})

	t.Run("MetricsIncludeGoAndProcessCollectors", func(t *testing.T) {
		s := MustServe(t, t.TempDir(), nil, nil)
		MustRun(t, nil, "claim", "--addr", s.Addr, "k", "--result", "r")
		resp, err := http.Get(s.Addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, name := range []string{"go_goroutines", "process_", sphttp.MetricClaims, "spent_sweep_last_success_timestamp_seconds",
			// The claim, the store's secret check and the fence's canary.
			"spent_store_records 3", "spent_store_held_total 0"} {
			if !bytes.Contains(b, []byte(name)) {
				t.Errorf("/metrics lacks %s", name)
			}
		}
	})
}

func TestSecret(t *testing.T) {
	t.Run("CreatedPrivateAndReusedOnRestart", func(t *testing.T) {
		dir := t.TempDir()
		s := MustServe(t, dir, nil, nil)
		first := MustRun(t, nil, "claim", "--addr", s.Addr, "--json", "ticket-1", "--result", "ok")
		if !strings.Contains(first, `"outcome":"fresh"`) {
			t.Fatalf("first claim: got %s, want fresh", first)
		}
		s.Stop()

		path := filepath.Join(dir, "secret")
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Fatalf("secret mode: got %04o, want 0600", got)
		}
		if fi.Size() != spent.MinSecretLen {
			t.Fatalf("secret size: got %d, want %d", fi.Size(), spent.MinSecretLen)
		}
		secret, _ := os.ReadFile(path)

		s = MustServe(t, dir, nil, nil)
		again := MustRun(t, nil, "claim", "--addr", s.Addr, "--json", "ticket-1", "--result", "ok")
		if !strings.Contains(again, `"outcome":"replayed"`) {
			t.Fatalf("claim after restart: got %s, want replayed (same secret, same hash)", again)
		}
		if hashOf(t, first) != hashOf(t, again) {
			t.Fatalf("hash after restart: got %s, want %s", hashOf(t, again), hashOf(t, first))
		}
		s.Stop()
		if after, _ := os.ReadFile(path); !bytes.Equal(after, secret) {
			t.Fatal("the secret changed on restart")
		}
		if strings.Contains(s.Stderr.String(), "generated a new secret") {
			t.Fatalf("restart says it generated a new secret:\n%s", s.Stderr)
		}
	})

	t.Run("RefusesLooseMode", func(t *testing.T) {
		dir := t.TempDir()
		MustServe(t, dir, nil, nil).Stop()
		if err := os.Chmod(filepath.Join(dir, "secret"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", dir)
		if r.Code == 0 || !strings.Contains(r.Stderr, "mode 0644") {
			t.Fatalf("serve with a 0644 secret: exit %d, stderr %q; want a refusal naming the mode", r.Code, r.Stderr)
		}
	})

	t.Run("RefusesWrongSize", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("short"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", dir)
		if r.Code == 0 || !strings.Contains(r.Stderr, "holds 5 bytes, want 32") {
			t.Fatalf("serve with a 5-byte secret: exit %d, stderr %q; want a refusal naming the size", r.Code, r.Stderr)
		}
	})

	t.Run("RefusesNewSecretBesideStore", func(t *testing.T) {
		dir := t.TempDir()
		MustServe(t, dir, nil, nil).Stop()
		if err := os.Remove(filepath.Join(dir, "secret")); err != nil {
			t.Fatal(err)
		}
		r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", dir)
		if r.Code == 0 || !strings.Contains(r.Stderr, "would forget every record") {
			t.Fatalf("serve without its secret: exit %d, stderr %q; want a refusal", r.Code, r.Stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "secret")); err == nil {
			t.Fatal("a new secret was written beside the old store")
		}
	})
}

// hashOf returns the "hash" member of a --json line.
func hashOf(t *testing.T, line string) string {
	t.Helper()
	var v struct{ Hash string }
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return v.Hash
}

func TestListen(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:7070", "example.com:7070"} {
		t.Run(addr, func(t *testing.T) {
			r := Run(t, nil, "serve", "--listen", addr, "--data", t.TempDir())
			if r.Code != spentcmd.ExitUsage || !strings.Contains(r.Stderr, "no tokens are configured") {
				t.Fatalf("serve --listen %s without tokens: exit %d, stderr %q; want exit %d and a refusal",
					addr, r.Code, r.Stderr, spentcmd.ExitUsage)
			}
		})
	}
	t.Run("NotHostPortSaysWhatToWrite", func(t *testing.T) {
		for addr, example := range map[string]string{
			"7084":        "127.0.0.1:7084",
			"localhost":   "localhost:7070",
			"[::1]:":      "127.0.0.1:7070",
			"127.0.0.1:x": "127.0.0.1:7070",
		} {
			dir := t.TempDir()
			r := Run(t, nil, "serve", "--listen", addr, "--data", dir)
			want := "spent: listen " + strconv.Quote(addr) + ": want host:port with a numeric port, e.g. " + example + "\n"
			if r.Code != spentcmd.ExitUsage || r.Stderr != want {
				t.Errorf("serve --listen %s: exit %d, stderr %q; want exit %d and %q", addr, r.Code, r.Stderr, spentcmd.ExitUsage, want)
			}
		}
	})
	t.Run("NotHostPortWithTokens", func(t *testing.T) {
		cfg := WriteConfig(t, "[[tokens]]\ntoken = \"0123456789abcdefXYZ\"\nscopes = [\"claim\"]\n")
		r := Run(t, nil, "serve", "--config", cfg, "--listen", "7084", "--data", t.TempDir())
		if r.Code != spentcmd.ExitUsage || !strings.Contains(r.Stderr, "e.g. 127.0.0.1:7084") {
			t.Fatalf("serve --listen 7084 with tokens: exit %d, stderr %q; want a usage error with an example", r.Code, r.Stderr)
		}
	})
	t.Run("LocalhostAllowed", func(t *testing.T) {
		s := MustServe(t, t.TempDir(), nil, nil, "--listen", "localhost:0")
		if code := s.Stop(); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, s.Stderr)
		}
	})
}

// gatedBody holds a request body back until open is closed, so that the
// request is in flight (headers sent, body not) for as long as the test
// wants.
type gatedBody struct {
	io.ReadCloser
	open <-chan struct{}
	once sync.Once
}

func (g *gatedBody) Read(p []byte) (int, error) {
	g.once.Do(func() { <-g.open })
	return g.ReadCloser.Read(p)
}

type gatedTransport struct{ open <-chan struct{} }

func (t gatedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body = &gatedBody{ReadCloser: r.Body, open: t.open}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	active := make(chan struct{})
	var once sync.Once
	s := MustServe(t, dir, nil, func(m *spentcmd.Main) {
		// The signal is the request reaching the handler, not its
		// connection turning active: net/http drops a request read just
		// as the shutdown begins, before its handler runs.
		m.WrapHandler = func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/claim" {
					once.Do(func() { close(active) })
				}
				h.ServeHTTP(w, r)
			})
		}
	})

	open := make(chan struct{})
	c := sphttp.NewClient(s.Addr, sphttp.ClientConfig{HTTPClient: &http.Client{Transport: gatedTransport{open}}})
	type answer struct {
		res spent.Answer
		err error
	}
	answers := make(chan answer, 1)
	go func() {
		r, err := c.Claim(context.Background(), spent.Claim{Namespace: "default", Key: "in-flight", Result: []byte("done")})
		answers <- answer{r, err}
	}()
	select {
	case <-active:
	case <-time.After(30 * time.Second):
		t.Fatal("the claim's request never reached the server")
	}

	stopped := make(chan int, 1)
	go func() { stopped <- s.Stop() }()
	// The shutdown has begun once the listener refuses new connections.
	host := strings.TrimPrefix(s.Addr, "http://")
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", host, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts connections 30s after cancel")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case code := <-stopped:
		t.Fatalf("serve stopped (exit %d) with a claim in flight; stderr:\n%s", code, s.Stderr)
	default:
	}

	close(open)
	a := <-answers
	if a.err != nil {
		t.Fatalf("in-flight claim: %v; want it to finish during shutdown", a.err)
	}
	if a.res.Outcome != spent.Fresh {
		t.Fatalf("in-flight claim: got %s, want fresh", a.res.Outcome)
	}
	if code := <-stopped; code != 0 {
		t.Fatalf("serve exit: got %d, want 0; stderr:\n%s", code, s.Stderr)
	}

	// The answer the client got is one the store remembers.
	s = MustServe(t, dir, nil, nil)
	out := MustRun(t, nil, "claim", "--addr", s.Addr, "--json", "in-flight", "--result", "done")
	if !strings.Contains(out, `"outcome":"replayed"`) {
		t.Fatalf("claim after restart: got %s, want replayed", out)
	}
}

func TestStoreFlag(t *testing.T) {
	t.Run("PebbleDSNNamesTheDirectory", func(t *testing.T) {
		dir, storeDir := t.TempDir(), filepath.Join(t.TempDir(), "ledger")
		s := MustServe(t, dir, nil, nil, "--store", "pebble://"+storeDir)
		MustRun(t, nil, "claim", "--addr", s.Addr, "ticket-1", "--result", "ok")
		s.Stop()
		if ents, err := os.ReadDir(storeDir); err != nil || len(ents) == 0 {
			t.Fatalf("pebble store at %s: %d entries, %v", storeDir, len(ents), err)
		}
		if _, err := os.Stat(filepath.Join(dir, "pebble")); err == nil {
			t.Fatal("a store was also made in the data directory")
		}
		s = MustServe(t, dir, nil, nil, "--store", "pebble://"+storeDir)
		if out := MustRun(t, nil, "claim", "--addr", s.Addr, "--json", "ticket-1", "--result", "ok"); !strings.Contains(out, `"outcome":"replayed"`) {
			t.Fatalf("claim after restart on the same store: got %s, want replayed", out)
		}
	})

	t.Run("UnreachableStoreLeavesNoSecret", func(t *testing.T) {
		// Nothing listens on port 1: the first start of this data
		// directory fails, and leaves no secret that a start on the right
		// store would then have to use.
		dir := filepath.Join(t.TempDir(), "data")
		r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", dir, "--store", "redis://127.0.0.1:1")
		if r.Code == 0 {
			t.Fatalf("serve on a store nobody serves: exit 0; stderr %q", r.Stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "secret")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a refused first start left DATA/secret: %v; stderr %q", err, r.Stderr)
		}
	})

	t.Run("AnotherSecretIsRefused", func(t *testing.T) {
		storeDir := filepath.Join(t.TempDir(), "ledger")
		MustServe(t, t.TempDir(), nil, nil, "--store", "pebble://"+storeDir).Stop()
		// A second data directory means a second secret over the same store.
		r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--store", "pebble://"+storeDir)
		if r.Code == 0 || !strings.Contains(r.Stderr, "set up with another secret") {
			t.Fatalf("serve with another secret: exit %d, stderr %q; want a refusal", r.Code, r.Stderr)
		}
	})

	t.Run("BadDSNs", func(t *testing.T) {
		cases := []struct{ dsn, want string }{
			{"mysql://localhost/x", `unknown scheme "mysql"`},
			{"just-a-path", "want a URL"},
			{"pebble://host/path", "no host or query"},
			{"mysql://root:hunter2@localhost/x", "unknown scheme"},
		}
		for _, tc := range cases {
			r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--store", tc.dsn)
			if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
				t.Fatalf("serve --store %q: exit %d, stderr %q; want exit 2 and %q", tc.dsn, r.Code, r.Stderr, tc.want)
			}
			if strings.Contains(r.Stderr, "hunter2") {
				t.Fatalf("serve --store %q: the password is in the message: %q", tc.dsn, r.Stderr)
			}
		}
	})
}
