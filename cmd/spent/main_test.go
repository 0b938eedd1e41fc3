package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	spentcmd "github.com/spentledger/spent/cmd/spent"
	"github.com/spentledger/spent/internal/syncbuf"
)

// env is a fake environment for Main.Getenv.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// Server is a "spent serve" running in the test's process, on port 0.
type Server struct {
	tb     testing.TB
	Addr   string // http://127.0.0.1:PORT
	Dir    string
	Stderr *syncbuf.Buffer
	cancel context.CancelFunc
	done   chan int
	once   sync.Once
	code   int
}

// MustServe starts "spent serve" on 127.0.0.1:0 over the data directory dir
// with the extra arguments, waits for the line that gives its address, and
// stops it at cleanup. Set m's fields through setup, if given.
func MustServe(tb testing.TB, dir string, e env, setup func(*spentcmd.Main), args ...string) *Server {
	tb.Helper()
	s, r := TryServe(tb, dir, e, setup, args...)
	if s == nil {
		tb.Fatalf("serve did not start (exit %d); stdout %q; stderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	return s
}

// Stop cancels the server's context, as SIGTERM does, and returns its exit
// status once it has shut down.
func (s *Server) Stop() int {
	s.once.Do(func() {
		s.cancel()
		select {
		case s.code = <-s.done:
		case <-time.After(60 * time.Second):
			s.tb.Errorf("serve did not stop in 60s; stderr:\n%s", s.Stderr)
			s.code = -1
		}
	})
	return s.code
}

// Result is what one run of the program printed and returned.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs the program with args, as a user would from a shell, and returns
// its output and exit status.
func Run(tb testing.TB, e env, args ...string) Result {
	tb.Helper()
	return RunStdin(tb, e, "", args...)
}

// RunStdin is Run with the given standard input.
func RunStdin(tb testing.TB, e env, stdin string, args ...string) Result {
	tb.Helper()
	var out, errb syncbuf.Buffer
	m := spentcmd.NewMain()
	m.Stdin = strings.NewReader(stdin)
	m.Stdout = &out
	m.Stderr = &errb
	m.Getenv = e.get
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := m.Execute(ctx, args)
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// MustRun is Run that fails the test unless the exit status is 0.
func MustRun(tb testing.TB, e env, args ...string) string {
	tb.Helper()
	r := Run(tb, e, args...)
	if r.Code != 0 {
		tb.Fatalf("spent %s: exit %d, want 0; stderr: %s", strings.Join(args, " "), r.Code, r.Stderr)
	}
	return r.Stdout
}

// WriteConfig writes a config file into a new temporary directory and
// returns its path.
func WriteConfig(tb testing.TB, text string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "spent.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Tokens of serveWithTokens: one with the claim scope, one with admin.
const (
	testClaimToken = "claim-token-0123456789"
	testAdminToken = "admin-token-0123456789"
)

// serveWithTokens starts a server on the embedded store with the config
// text conf plus two tokens, testClaimToken (claim) and testAdminToken
// (admin), and returns it with the client environments of each token.
func serveWithTokens(t *testing.T, conf string) (s *Server, claim, admin env) {
	t.Helper()
	cfg := WriteConfig(t, conf+`

[[tokens]]
token = "`+testClaimToken+`"
scopes = ["claim"]

[[tokens]]
token = "`+testAdminToken+`"
scopes = ["admin"]
`)
	s = MustServe(t, t.TempDir(), nil, nil, "--config", cfg)
	return s, env{"SPENT_ADDR": s.Addr, "SPENT_TOKEN": testClaimToken}, env{"SPENT_ADDR": s.Addr, "SPENT_TOKEN": testAdminToken}
}
