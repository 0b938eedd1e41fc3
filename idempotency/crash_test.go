package idempotency_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/pebble"
)

// The crash test runs the service in a child process (this test binary,
// entering TestCrash again with crashDirEnv set) on the embedded pebble
// store, kills it with SIGKILL at a point of a request, restarts it on the
// same directory and retries.
const (
	crashDirEnv   = "IDEMPOTENCY_CRASH_DIR"
	crashPointEnv = "IDEMPOTENCY_CRASH_AT"
	crashLease    = 1500 * time.Millisecond
)

func TestCrash(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(t, dir, os.Getenv(crashPointEnv))
		return
	}
	cases := []struct {
		name  string
		do    string // apply or noapply
		point string // where the first process dies
		// after the lease: the answer to the retry, and the effects in all
		final   want
		effects int
		unknown bool // the key is listed as an unknown outcome
	}{
		{"AfterAppliedBeforeEffect", "apply", "applied", want{status: 409, code: idempotency.CodeOutcomeUnknown}, 0, true},
		{"BetweenCaptureAndStore", "apply", "captured", want{status: 409, code: idempotency.CodeOutcomeUnknown}, 1, true},
		{"BetweenStoreAndSend", "apply", "stored", want{status: 201, replayed: true}, 1, false},
		{"BetweenCaptureAndStoreWithoutApplied", "noapply", "captured", want{status: 200}, 0, false},
		{"BetweenStoreAndSendWithoutApplied", "noapply", "stored", want{status: 200, replayed: true}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			child := startCrashChild(t, dir, c.point)
			q := req{key: "crash-key", body: `{"amount":100}`, do: c.do}
			if a := send(t, child.url, q); a.err == nil {
				t.Fatalf("request to a process that dies at %s: got %d, want a broken connection", c.point, a.status)
			}
			child.wait(t)
			child = startCrashChild(t, dir, "")
			// Retry until the key's lease runs out: until then, in progress.
			deadline := time.Now().Add(10 * crashLease)
			var a answer
			for {
				a = send(t, child.url, q)
				if a.err != nil {
					t.Fatal(a.err)
				}
				if a.code != idempotency.CodeInProgress {
					break
				}
				if a.status != 409 || a.header.Get("Retry-After") == "" {
					t.Fatalf("in progress: got %d with Retry-After %q", a.status, a.header.Get("Retry-After"))
				}
				if time.Now().After(deadline) {
					t.Fatal("still in progress long after the lease")
				}
				time.Sleep(crashLease / 5)
			}
			c.final.check(t, "retry after the crash", a)
			// A second retry replays the first retry's answer, or meets the
			// same unknown outcome.
			again := send(t, child.url, q)
			w2 := c.final
			if w2.code == "" {
				w2.replayed = true
			}
			w2.check(t, "second retry", again)
			if w2.replayed && !bytes.Equal(a.body, again.body) {
				t.Fatalf("replays differ: %q and %q", a.body, again.body)
			}
			if got := countLines(t, filepath.Join(dir, "effects"), "effect"); got != c.effects {
				t.Fatalf("effects: got %d, want %d", got, c.effects)
			}
			recs, err := sphttp.NewClient(child.url, sphttp.ClientConfig{}).Unknown(context.Background(), "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if listed := len(recs) == 1 && strings.HasSuffix(recs[0].RawKey, ":crash-key"); listed != c.unknown || len(recs) > 1 {
				t.Fatalf("unknown outcomes: got %+v, want listed %v", recs, c.unknown)
			}
		})
	}
}

type crashProc struct {
	cmd *exec.Cmd
	url string
}

func startCrashChild(t *testing.T, dir, point string) *crashProc {
	t.Helper()
	addrFile := filepath.Join(dir, "addr")
	os.Remove(addrFile)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashPointEnv+"="+point)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &crashProc{cmd: cmd}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil {
			p.url = "http://" + string(b)
			return p
		}
		if time.Now().After(deadline) {
			t.Fatal("child did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wait waits for a child that is to kill itself.
func (p *crashProc) wait(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("child did not die at its crash point")
	}
}

func countLines(t *testing.T, path, prefix string) int {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			n++
		}
	}
	return n
}

// crashChild serves the middleware over pebble in dir, dying with SIGKILL at
// point, until it is killed.
func crashChild(t *testing.T, dir, point string) {
	store, err := pebble.Open(filepath.Join(dir, "ledger"), pebble.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	o := idempotency.DefaultOptions()
	o.Scope = idempotency.FixedScope("crash")
	cfg := ledgerConfig(o, crashLease, time.Now)
	l, err := spent.NewLedger(context.Background(), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idempotency.New(l, o)
	if err != nil {
		t.Fatal(err)
	}
	if point != "" {
		idempotency.SetTestHook(func(p string) {
			if p == point {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		})
	}
	effects, err := os.OpenFile(filepath.Join(dir, "effects"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	api, err := sphttp.NewServer(l, sphttp.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Do") == "apply" {
			if err := idempotency.Applied(r); err != nil {
				return
			}
			fmt.Fprintln(effects, "effect")
			if err := effects.Sync(); err != nil {
				panic(err)
			}
			w.WriteHeader(http.StatusCreated)
		}
		var b [8]byte
		rand.Read(b[:])
		fmt.Fprintf(w, "done %s\n", hex.EncodeToString(b[:]))
	})))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "addr.tmp")
	if err := os.WriteFile(tmp, []byte(ln.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "addr")); err != nil {
		t.Fatal(err)
	}
	http.Serve(ln, mux)
}
