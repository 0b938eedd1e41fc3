package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
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

// peakLimit is the most memory (VmHWM, the peak resident set) the server
// may take in TestBoundedMemory: the figure issue 16 sets.
const peakLimit = 512 << 20

// TestBoundedMemory runs the real binary, built without the race detector,
// and attacks it as an authorised client can: one /v1/claims batch that
// replays a key holding a 1 MiB result 2,000 times, while 40 connections
// each hold a 30 MiB body (all sent but its last byte). The server's peak
// resident set must stay under 512 MiB, and it must answer /healthz
// afterwards. A sampler kills the server as soon as its peak passes the
// limit, so that a server without the bounds does not take the machine
// with it.
func TestBoundedMemory(t *testing.T) {
	bin := buildSpent(t)
	srv := startSpent(t, bin, t.TempDir())

	// The key to replay: a one-step claim with a 1 MiB result.
	result := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	body := fmt.Sprintf(`{"namespace":"default","key":"big","result":%q}`, base64.StdEncoding.EncodeToString(result))
	if status, b := post(t, srv.url+"/v1/claim", strings.NewReader(body)); status != http.StatusOK || !strings.Contains(string(b), `"fresh"`) {
		t.Fatalf("claim of the big key: got %d %.200s, want 200 fresh", status, b)
	}

	var over atomic.Bool
	stopSampling := srv.sample(t, &over)

	// Forty connections, each sending a 30 MiB body but its last byte.
	const conns, bodyLen = 40, 30 << 20
	var refused, held atomic.Int32
	var wg sync.WaitGroup
	open := make([]net.Conn, conns)
	for i := range conns {
		c, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		open[i] = c
		wg.Go(func() {
			if holdBody(c, srv.addr, bodyLen) {
				held.Add(1)
			} else {
				refused.Add(1)
			}
		})
	}
	waitGroup(t, &wg, 2*time.Minute, "the 40 slow bodies")

	// With the bodies held, one batch that replays the big key 2,000 times.
	const repeats = 2000
	var batch strings.Builder
	batch.WriteString(`{"claims":[`)
	for i := range repeats {
		if i > 0 {
			batch.WriteByte(',')
		}
		batch.WriteString(`{"namespace":"default","key":"big"}`)
	}
	batch.WriteString(`]}`)
	status, answer := post(t, srv.url+"/v1/claims", strings.NewReader(batch.String()))
	peak := stopSampling()
	t.Logf("peak RSS %d MiB; bodies held %d, refused %d; batch answer %d bytes", peak>>20, held.Load(), refused.Load(), len(answer))
	if over.Load() || peak >= peakLimit {
		t.Fatalf("peak RSS of the server: got %d MiB, want under %d MiB", peak>>20, peakLimit>>20)
	}
	if status != http.StatusOK {
		t.Fatalf("batch: got status %d %.300s, want 200", status, answer)
	}
	var got struct {
		Results []struct {
			Outcome       string `json:"outcome"`
			Result        []byte `json:"result"`
			ResultOmitted bool   `json:"result_omitted"`
		} `json:"results"`
	}
	if err := json.Unmarshal(answer, &got); err != nil {
		t.Fatalf("batch answer: %v", err)
	}
	if len(got.Results) != repeats {
		t.Fatalf("batch: got %d results, want %d", len(got.Results), repeats)
	}
	carried := 0
	for i, r := range got.Results {
		switch {
		case r.Outcome != "replayed":
			t.Fatalf("results[%d]: got %s, want replayed", i, r.Outcome)
		case r.ResultOmitted == (r.Result != nil):
			t.Fatalf("results[%d]: result of %d bytes with result_omitted %v, want exactly one of them", i, len(r.Result), r.ResultOmitted)
		case r.Result != nil && !bytes.Equal(r.Result, result):
			t.Fatalf("results[%d]: got %d other bytes, want the stored result", i, len(r.Result))
		case r.Result != nil:
			carried++
		}
	}
	if carried == 0 || carried*len(result) > 16<<20 {
		t.Fatalf("batch: %d results carried (%d bytes), want at least one and at most 16 MiB", carried, carried*len(result))
	}
	if refused.Load() == 0 {
		t.Fatalf("slow bodies: got none refused, want the budget to refuse some")
	}

	for _, c := range open {
		c.Close()
	}
	if status, b := get(t, srv.url+"/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz after the attack: got %d %s, want 200", status, b)
	}
	srv.stop(t)
}

// buildSpent builds the spent binary, without the race detector, into a
// temporary directory.
func buildSpent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "spent")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// spentProcess is a running `spent serve`.
type spentProcess struct {
	cmd    *exec.Cmd
	addr   string
	url    string
	stderr *syncbuf.Buffer
	exited chan struct{}
}

func startSpent(t *testing.T, bin, dir string, args ...string) *spentProcess {
	t.Helper()
	p, _ := launchSpent(t, bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data", dir}, args...), 0)
	return p
}

// launchSpent runs `spent ARGS` (a serve command), killed at the test's
// end, and reads the line that gives its HTTP address, then extra more lines
// of its standard output, which it returns; the rest is discarded.
func launchSpent(t *testing.T, bin string, args []string, extra int) (*spentProcess, []string) {
	t.Helper()
	p := &spentProcess{stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "spent listening on http://")
	if err != nil || !ok {
		t.Fatalf("spent serve did not start: %q, %v; stderr:\n%s", line, err, p.stderr)
	}
	lines := make([]string, extra)
	for i := range lines {
		if lines[i], err = r.ReadString('\n'); err != nil {
			t.Fatalf("spent serve: reading line %d of its output: %v; stderr:\n%s", i+2, err, p.stderr)
		}
		lines[i] = strings.TrimSpace(lines[i])
	}
	go io.Copy(io.Discard, r)
	p.addr, p.url = addr, "http://"+addr
	return p, lines
}

// peak returns the process's peak resident set (VmHWM) in bytes.
func (p *spentProcess) peak() (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.cmd.Process.Pid)
}

// sample reads the peak every few milliseconds and kills the server once it
// passes peakLimit, setting over. The function it returns stops sampling
// and returns the last peak read.
func (p *spentProcess) sample(t *testing.T, over *atomic.Bool) func() int64 {
	t.Helper()
	var last atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if v, err := p.peak(); err == nil {
				last.Store(v)
				if v >= peakLimit {
					over.Store(true)
					p.cmd.Process.Kill()
					return
				}
			}
			select {
			case <-done:
				return
			case <-p.exited:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		if v, err := p.peak(); err == nil {
			last.Store(v)
		}
		return last.Load()
	}
}

// stop ends the server with SIGTERM and checks that it exits.
func (p *spentProcess) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("spent serve did not stop in 60s; stderr:\n%s", p.stderr)
	}
}

// holdBody sends a claim request on c whose body is n bytes long, all but
// the last byte, and reports whether the server took it all without
// answering. A server that answers first (503, say) closes the connection,
// which ends the sending with an error.
func holdBody(c net.Conn, host string, n int) bool {
	fmt.Fprintf(c, "POST /v1/claim HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", host, n)
	chunk := bytes.Repeat([]byte("a"), 256<<10)
	prefix := []byte(`{"namespace":"default","key":"`)
	if _, err := c.Write(prefix); err != nil {
		return false
	}
	left := n - len(prefix) - 1
	for left > 0 {
		k := min(left, len(chunk))
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(chunk[:k]); err != nil {
			return false
		}
		left -= k
	}
	// Everything but the last byte is sent. A server that answered instead
	// of reading has its answer waiting.
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var one [1]byte
	_, err := c.Read(one[:])
	c.SetReadDeadline(time.Time{})
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not finish in %v", what, d)
	}
}

func post(t *testing.T, url string, body io.Reader) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, []byte(err.Error())
	}
	return resp.StatusCode, b
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
