package doortest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spentledger/spent/internal/syncbuf"
)

// PeakLimit is the most memory (VmHWM, the peak resident set) the server
// may take under any attack of the suite, with its default limits: the
// figure of issue 31. A server that passes it is killed at once.
const PeakLimit = 512 << 20

// startTimeout is how long a server may take to announce its door.
const startTimeout = 60 * time.Second

// server is a spent serve the suite runs as a process of its own, on a
// data directory that outlives the process (so that a restart finds what
// the last one wrote). A guard reads the process's peak resident set
// every few milliseconds and kills it as soon as it reaches [PeakLimit],
// so that a server without its bounds cannot take the machine down.
type server struct {
	tb     testing.TB
	bin    string
	door   Door
	dir    string // the data directory
	config string // the configuration file
	// Addr is the door's address.
	Addr string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stderr  *syncbuf.Buffer
	logs    []string // the logs of the processes before this one
	guard   chan struct{}
	guarded chan struct{}
	over    atomic.Bool
	peak    atomic.Int64 // the highest VmHWM read, over every process
}

// startServer writes the configuration file (the top-level keys top, the
// suite's tables, then the door's) and starts the server.
func startServer(tb testing.TB, bin string, d Door, top string) *server {
	tb.Helper()
	dir := tb.TempDir()
	cfg := top + "\n" + baseTables + "\n" + d.Config() + "\n"
	path := filepath.Join(dir, "spent.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	s := &server{tb: tb, bin: bin, door: d, dir: filepath.Join(dir, "data"), config: path}
	tb.Cleanup(s.kill)
	s.start()
	return s
}

// start starts the process and waits for the line that announces the
// door's address.
func (s *server) start() {
	s.tb.Helper()
	args := append([]string{"serve", "--config", s.config, "--data", s.dir, "--listen", "127.0.0.1:0"}, s.door.Args()...)
	cmd := exec.Command(s.bin, args...)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.stderr = cmd, exited, stderr
	s.mu.Unlock()
	s.startGuard()

	found := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		var lines []string
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				lines = append(lines, strings.TrimSpace(line))
				if addr, ok := s.door.Addr(strings.TrimSpace(line)); ok {
					found <- addr
					io.Copy(io.Discard, r)
					return
				}
			}
			if err != nil {
				found <- "\x00" + strings.Join(lines, "\n")
				return
			}
		}
	}()
	select {
	case addr := <-found:
		if rest, failed := strings.CutPrefix(addr, "\x00"); failed {
			<-exited
			s.tb.Fatalf("spent serve did not announce the %s door; stdout:\n%s\nstderr:\n%s", s.door.Name(), rest, stderr)
		}
		s.Addr = addr
	case <-time.After(startTimeout):
		s.tb.Fatalf("spent serve did not announce the %s door in %v; stderr:\n%s", s.door.Name(), startTimeout, stderr)
	}
}

// Pid returns the process id of the running server.
func (s *server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// Kill9 kills the server with SIGKILL and waits for it to die.
func (s *server) Kill9() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	s.stopGuard()
}

// kill is Kill9 at the test's end, and keeps the log for the record.
func (s *server) kill() {
	s.mu.Lock()
	started := s.cmd != nil
	s.mu.Unlock()
	if started {
		s.Kill9()
	}
}

// Restart kills the server with SIGKILL (when it still runs) and starts it
// again on the same data directory and configuration. Addr is then the new
// process's address.
func (s *server) Restart() {
	s.tb.Helper()
	s.Kill9()
	s.mu.Lock()
	s.logs = append(s.logs, s.stderr.String())
	s.mu.Unlock()
	s.start()
}

// Log returns what the server wrote on its standard error, every process
// since the first.
func (s *server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(append(s.logs[:len(s.logs):len(s.logs)], s.stderr.String()), "")
}

// Exited reports whether the current process has ended.
func (s *server) Exited() bool {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	select {
	case <-exited:
		return true
	default:
		return false
	}
}

// Peak returns the highest peak resident set (VmHWM) of the server's
// processes so far, in bytes, and whether the guard killed one for
// reaching PeakLimit.
func (s *server) Peak() (peak int64, killed bool) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if v, err := vmHWM(cmd.Process.Pid); err == nil {
		s.notePeak(v)
	}
	return s.peak.Load(), s.over.Load()
}

// CheckPeak fails the test when the server's peak resident set reached
// PeakLimit, and logs it otherwise, naming the attack.
func (s *server) CheckPeak(t testing.TB, attack string) {
	t.Helper()
	peak, killed := s.Peak()
	if killed || peak >= PeakLimit {
		t.Fatalf("%s: the server's peak RSS reached %d MiB, want under %d MiB (killed by the guard: %v); log:\n%s",
			attack, peak>>20, PeakLimit>>20, killed, tail(s.Log(), 40))
	}
	t.Logf("%s: peak RSS %d MiB (VmHWM of pid %d; limit %d MiB)", attack, peak>>20, s.Pid(), PeakLimit>>20)
}

// mustLive fails the test when the guard killed the server, or when it
// exited on its own, during attack.
func (s *server) mustLive(t testing.TB, attack string) {
	t.Helper()
	if peak, killed := s.Peak(); killed {
		t.Fatalf("%s: the server's peak RSS reached %d MiB, and the guard killed it (limit %d MiB); log:\n%s", attack, peak>>20, PeakLimit>>20, tail(s.Log(), 40))
	}
	if s.Exited() {
		t.Fatalf("%s: the server exited; log:\n%s", attack, tail(s.Log(), 40))
	}
}

func (s *server) notePeak(v int64) {
	for {
		old := s.peak.Load()
		if v <= old || s.peak.CompareAndSwap(old, v) {
			return
		}
	}
}

// startGuard starts the sampler of the current process's peak.
func (s *server) startGuard() {
	s.mu.Lock()
	pid, exited := s.cmd.Process.Pid, s.exited
	stop, done := make(chan struct{}), make(chan struct{})
	s.guard, s.guarded = stop, done
	s.mu.Unlock()
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, err := vmHWM(pid); err == nil {
				s.notePeak(v)
				if v >= PeakLimit {
					s.over.Store(true)
					syscall.Kill(pid, syscall.SIGKILL)
					return
				}
			}
			select {
			case <-stop:
				return
			case <-exited:
				return
			case <-tick.C:
			}
		}
	}()
}

func (s *server) stopGuard() {
	s.mu.Lock()
	stop, done := s.guard, s.guarded
	s.guard = nil
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// vmHWM returns the peak resident set of process pid, in bytes, from
// /proc/PID/status.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("doortest: no VmHWM in /proc/%d/status", pid)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
