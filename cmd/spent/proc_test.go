package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spentledger/spent"
	spentcmd "github.com/spentledger/spent/cmd/spent"
	"github.com/spentledger/spent/internal/atomicfile"
	"github.com/spentledger/spent/internal/syncbuf"
	"github.com/spentledger/spent/pebble"
)

// spentBin is the spent command built once for the tests that run it as a
// process of its own (to kill it, or to hold a data directory from another
// process).
var spentBin struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

func TestMain(m *testing.M) {
	code := m.Run()
	if spentBin.dir != "" {
		os.RemoveAll(spentBin.dir)
	}
	os.Exit(code)
}

// SpentBinary builds the spent command (without -race) once per test binary
// and returns its path.
func SpentBinary(tb testing.TB) string {
	tb.Helper()
	spentBin.once.Do(func() {
		spentBin.dir, spentBin.err = os.MkdirTemp("", "spent-bin-")
		if spentBin.err != nil {
			return
		}
		spentBin.path = filepath.Join(spentBin.dir, "spent")
		cmd := exec.Command("go", "build", "-o", spentBin.path, ".")
		spentBin.out, spentBin.err = cmd.CombinedOutput()
	})
	if spentBin.err != nil {
		tb.Fatalf("building spent: %v\n%s", spentBin.err, spentBin.out)
	}
	return spentBin.path
}

// ProcResult is what one run of the spent binary printed, and how it ended.
type ProcResult struct {
	Stdout, Stderr string
	Status         syscall.WaitStatus
	Err            error
}

// Killed reports whether the process died of SIGKILL.
func (r ProcResult) Killed() bool { return r.Status.Signaled() && r.Status.Signal() == syscall.SIGKILL }

// RunBinary runs the spent binary with args and the extra environment
// variables (NAME=VALUE), waits for it (at most two minutes) and returns what
// it did.
func RunBinary(tb testing.TB, extraEnv []string, args ...string) ProcResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, SpentBinary(tb), args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	var out, errb syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := ProcResult{Stdout: out.String(), Stderr: errb.String(), Err: err}
	if cmd.ProcessState != nil {
		r.Status = cmd.ProcessState.Sys().(syscall.WaitStatus)
	}
	return r
}

// Proc is a "spent serve" running as a process of its own.
type Proc struct {
	tb     testing.TB
	cmd    *exec.Cmd
	Addr   string
	Stderr *syncbuf.Buffer
	done   chan struct{}
	once   sync.Once
}

// StartBinary starts "spent serve" as a process with args, waits for the
// line that gives its address, and stops it (SIGTERM) at cleanup.
func StartBinary(tb testing.TB, extraEnv []string, args ...string) *Proc {
	tb.Helper()
	return StartBinaryIn(tb, "", extraEnv, args...)
}

// StartBinaryIn is StartBinary in the working directory dir ("": the
// test's).
func StartBinaryIn(tb testing.TB, dir string, extraEnv []string, args ...string) *Proc {
	tb.Helper()
	cmd := exec.Command(SpentBinary(tb), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extraEnv...)
	p := &Proc{tb: tb, cmd: cmd, Stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		lines <- line
		io.Copy(io.Discard, r)
		cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(p.Stop)
	select {
	case line := <-lines:
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "spent listening on ")
		if !ok {
			<-p.done
			tb.Fatalf("spent serve (pid %d) did not start: stdout %q; stderr:\n%s", cmd.Process.Pid, line, p.Stderr)
		}
		p.Addr = addr
	case <-time.After(60 * time.Second):
		tb.Fatalf("spent serve did not print its address in 60s; stderr:\n%s", p.Stderr)
	}
	return p
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits for the process to exit.
func (p *Proc) Stop() {
	p.once.Do(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(60 * time.Second):
			p.tb.Errorf("spent serve (pid %d) did not stop in 60s after SIGTERM; killing it", p.Pid())
			p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// TryServe is MustServe for a start that may be refused: it returns the
// running server, or nil and the refused run's result.
func TryServe(tb testing.TB, dir string, e env, setup func(*spentcmd.Main), args ...string) (*Server, Result) {
	tb.Helper()
	pr, pw := io.Pipe()
	s := &Server{tb: tb, Dir: dir, Stderr: &syncbuf.Buffer{}, done: make(chan int, 1)}
	m := spentcmd.NewMain()
	m.Stdin = strings.NewReader("")
	m.Stdout = pw
	m.Stderr = s.Stderr
	m.Getenv = e.get
	if setup != nil {
		setup(m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		code := m.Execute(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--data", dir}, args...))
		pw.Close()
		s.done <- code
	}()
	tb.Cleanup(func() { s.Stop() })
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(pr)
		line, _ := r.ReadString('\n')
		lines <- line
		io.Copy(io.Discard, r)
	}()
	select {
	case line := <-lines:
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "spent listening on ")
		if !ok {
			code := s.Stop()
			return nil, Result{Stdout: line, Stderr: s.Stderr.String(), Code: code}
		}
		s.Addr = addr
		return s, Result{}
	case <-time.After(60 * time.Second):
		tb.Fatalf("serve neither started nor stopped in 60s; stderr:\n%s", s.Stderr)
	}
	return nil, Result{}
}

// ClaimOutcome claims key in namespace ns through the server at addr and
// returns the outcome.
func ClaimOutcome(tb testing.TB, addr, ns, key string) string {
	tb.Helper()
	out := MustRun(tb, nil, "claim", "--addr", addr, "--json", "-n", ns, key, "--result", "first result of "+key)
	var v struct{ Outcome string }
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		tb.Fatalf("claim %s: %q: %v", key, out, err)
	}
	return v.Outcome
}

// twoNamespaces is a configuration with an echo and a refuse namespace and a
// fence that advances every second.
const twoNamespaces = `fence_interval = "1s"

[namespaces.default]
mode = "echo"

[namespaces.tickets]
mode = "refuse"
`

// ClaimBoth claims one key in the echo namespace and one in the refuse
// namespace of twoNamespaces and fails unless both are fresh.
func ClaimBoth(tb testing.TB, addr string) {
	tb.Helper()
	for _, nk := range [][2]string{{"default", "order-1"}, {"tickets", "ticket-1"}} {
		if got := ClaimOutcome(tb, addr, nk[0], nk[1]); got != "fresh" {
			tb.Fatalf("first claim of %s/%s: got %s, want fresh", nk[0], nk[1], got)
		}
	}
}

// AssertRepeats claims the keys of ClaimBoth again and fails unless each is
// answered as a repeat: replayed in echo, refused in refuse.
func AssertRepeats(tb testing.TB, addr string) {
	tb.Helper()
	for _, c := range []struct{ ns, key, want string }{{"default", "order-1", "replayed"}, {"tickets", "ticket-1", "refused"}} {
		if got := ClaimOutcome(tb, addr, c.ns, c.key); got != c.want {
			tb.Fatalf("claim of %s/%s claimed before: got %s, want %s", c.ns, c.key, got, c.want)
		}
	}
}

// FenceCanary returns the generation and canary number the fence file of
// the data directory names.
func FenceCanary(tb testing.TB, data string) (gen, canary uint64) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(data, "fence"))
	if err != nil {
		tb.Fatal(err)
	}
	var v struct{ Generation, Canary uint64 }
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatalf("fence %s: %v", b, err)
	}
	return v.Generation, v.Canary
}

// WaitFence waits (at most 30 s) until the fence file names a canary above
// canary, and returns the one it names.
func WaitFence(tb testing.TB, data string, canary uint64) uint64 {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, c := FenceCanary(tb, data)
		if c > canary {
			return c
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the fence in %s stayed at canary %d for 30s, want it to advance", data, c)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// LiveCanaries counts the canaries in the stopped pebble store at dir.
func LiveCanaries(tb testing.TB, dir string) int {
	tb.Helper()
	st, err := pebble.Open(dir, pebble.DefaultOptions())
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	recs, err := st.ListPending(context.Background(), spent.ReservedPrefix+"fence", time.Now().Add(75*365*24*time.Hour), 100)
	if err != nil {
		tb.Fatal(err)
	}
	return len(recs)
}

// AssertNoTempFiles fails unless the data directory is free of the
// temporary files of an interrupted atomic write.
func AssertNoTempFiles(tb testing.TB, data string) {
	tb.Helper()
	m, _ := filepath.Glob(filepath.Join(data, ".*.tmp-*"))
	if len(m) > 0 {
		tb.Fatalf("temporary files left in %s: %q", data, m)
	}
}

// errInjected is the failure the fault-injecting wrappers return.
var errInjected = errors.New("injected fault")

// FaultyStore wraps a real store and fails one chosen call, once, after
// Arm: Method is "ReserveSeq", "Release", "Purge", "Claim" (fails before the
// store is called) or "ClaimAfter" (the store writes, then the call fails:
// an ambiguous write). Namespace, when set, limits Claim and ClaimAfter to
// records of that namespace.
type FaultyStore struct {
	spent.Store
	Method    string
	Namespace string

	mu    sync.Mutex
	armed bool
	fired int
}

// Unwrap returns the store beneath, so that the ledger finds its optional
// capabilities (spent.StoreAs) as it would without the fault.
func (s *FaultyStore) Unwrap() spent.Store { return s.Store }

// Arm makes the next matching call fail.
func (s *FaultyStore) Arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

// Fired returns how many calls failed.
func (s *FaultyStore) Fired() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}

func (s *FaultyStore) fire(method string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed || s.Method != method {
		return false
	}
	s.armed = false
	s.fired++
	return true
}

func (s *FaultyStore) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	if s.Namespace == "" || op.Record.Namespace == s.Namespace {
		if s.fire("Claim") {
			return spent.ClaimAnswer{}, errInjected
		}
		res, err := s.Store.Claim(ctx, op)
		if err == nil && s.fire("ClaimAfter") {
			return spent.ClaimAnswer{}, errInjected
		}
		return res, err
	}
	return s.Store.Claim(ctx, op)
}

func (s *FaultyStore) ReserveSeq(ctx context.Context, node uint32, n uint64) (uint64, error) {
	if s.fire("ReserveSeq") {
		return 0, errInjected
	}
	return s.Store.ReserveSeq(ctx, node, n)
}

func (s *FaultyStore) Release(ctx context.Context, key spent.Hash, seq spent.Seq, now time.Time) error {
	if s.fire("Release") {
		return errInjected
	}
	return s.Store.Release(ctx, key, seq, now)
}

func (s *FaultyStore) Purge(ctx context.Context, namespace string, limit int) (int, error) {
	if s.fire("Purge") {
		return 0, errInjected
	}
	return s.Store.Purge(ctx, namespace, limit)
}

// FaultyWrite fails the next atomic write of the file named Base, once,
// after Arm; every other write goes to the real one.
type FaultyWrite struct {
	Base  string
	mu    sync.Mutex
	armed bool
	fired int
}

// Arm makes the next write of Base fail.
func (w *FaultyWrite) Arm() {
	w.mu.Lock()
	w.armed = true
	w.mu.Unlock()
}

// Fired returns how many writes failed.
func (w *FaultyWrite) Fired() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

// WriteFile is the hook for Main.WriteFile.
func (w *FaultyWrite) WriteFile(path string, data []byte, perm os.FileMode) error {
	w.mu.Lock()
	fail := w.armed && filepath.Base(path) == w.Base
	if fail {
		w.armed = false
		w.fired++
	}
	w.mu.Unlock()
	if fail {
		return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
	}
	return atomicfileWrite(path, data, perm)
}

// countLines counts the lines of log that hold every one of words.
func countLines(log string, words ...string) int {
	n := 0
	for line := range strings.SplitSeq(log, "\n") {
		all := true
		for _, w := range words {
			if !strings.Contains(line, w) {
				all = false
				break
			}
		}
		if all && line != "" {
			n++
		}
	}
	return n
}

// atomicfileWrite is the real atomic write.
var atomicfileWrite = atomicfile.WriteFile
