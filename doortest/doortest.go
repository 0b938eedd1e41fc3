package doortest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Run runs the whole suite against door d of the spent binary at bin
// (built without the race detector: the suite measures its memory). Each
// test starts a server of its own, in a temporary directory, with the
// suite's configuration. A test that needs a capability d lacks (a
// Claimer, a Wire, a Rollbacker) is not run: Run logs it, naming the
// capability, so that the run shows what the door was not attacked with
// and no test is reported as skipped. The tests run one after another:
// several attack the machine's file descriptors or memory, and would
// disturb each other.
func Run(t *testing.T, bin string, d Door) {
	if bin == "" || d == nil {
		t.Fatal("doortest: Run needs the spent binary and a door")
	}
	_, isClaimer := d.(Claimer)
	_, isWire := d.(Wire)
	_, isRollbacker := d.(Rollbacker)
	const claims, raw, rollback = "doortest.Claimer", "doortest.Wire", "doortest.Rollbacker"
	has := map[string]bool{claims: isClaimer, raw: isWire, rollback: isRollbacker}
	ran := 0
	for _, st := range []struct {
		name  string
		run   func(*testing.T, string, Door)
		needs []string
	}{
		{"BigReplies", testBigReplies, []string{claims, raw}},
		{"PreAuthFrames", testPreAuthFrames, []string{claims, raw}},
		{"IdleFlood", testIdleFlood, []string{claims}},
		{"HalfFlood", testHalfFlood, []string{claims, raw}},
		{"RollbackFlood", testRollbackFlood, []string{claims, rollback}},
		{"SlowClient", testSlowClient, []string{raw}},
		{"AuthThrottle", testAuthThrottle, nil},
		{"ExpiryOverflow", testExpiryOverflow, []string{claims}},
		{"ControlCharacters", testControlCharacters, []string{claims}},
		{"Kill9", testKill9, []string{raw}},
	} {
		var lacks []string
		for _, n := range st.needs {
			if !has[n] {
				lacks = append(lacks, n)
			}
		}
		if len(lacks) > 0 {
			t.Logf("%s: not run: door %s is no %s", st.name, d.Name(), strings.Join(lacks, " and no "))
			continue
		}
		ran++
		t.Run(st.name, func(t *testing.T) { st.run(t, bin, d) })
	}
	if ran == 0 {
		t.Fatalf("door %s: no test of the suite applies to it", d.Name())
	}
}

// claimer returns d as a Claimer; Run runs a test that calls it only for
// a door that is one.
func claimer(t *testing.T, d Door) Claimer {
	t.Helper()
	c, ok := d.(Claimer)
	if !ok {
		t.Fatalf("door %s does not claim (it is no doortest.Claimer)", d.Name())
	}
	return c
}

// wire returns d as a Wire; Run runs a test that calls it only for a
// door that is one.
func wire(t *testing.T, d Door) Wire {
	t.Helper()
	w, ok := d.(Wire)
	if !ok {
		t.Fatalf("door %s has no raw requests for the attacks (it is no doortest.Wire)", d.Name())
	}
	return w
}

// opTimeout bounds one request of a client or one answer read off a raw
// connection: far beyond what any of them takes, so that a server that
// never answers fails the test instead of hanging it.
const opTimeout = 30 * time.Second

// opCtx returns a context of opTimeout.
func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// dial returns a client of c signed in with token, closed at the test's
// end.
func dial(t testing.TB, c Claimer, addr, token string) Client {
	t.Helper()
	ctx, cancel := opCtx()
	defer cancel()
	cl, err := c.Dial(ctx, addr, token)
	if err != nil {
		t.Fatalf("%s: a client signing in with a token: %v", c.Name(), err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// claimFresh claims c through cl and fails unless it is fresh.
func claimFresh(t testing.TB, cl Client, c Claim) {
	t.Helper()
	ctx, cancel := opCtx()
	defer cancel()
	r, err := cl.Claim(ctx, c)
	if err != nil {
		t.Fatalf("claim of %s/%s: %v", c.Namespace, c.Key, err)
	}
	if r.Outcome != "fresh" {
		t.Fatalf("claim of %s/%s: got %s, want fresh", c.Namespace, c.Key, show(r))
	}
}

// stillServes checks that a new client signs in and claims a new key.
func stillServes(t testing.TB, c Claimer, addr, key string) {
	t.Helper()
	cl := dial(t, c, addr, ClaimToken)
	claimFresh(t, cl, Claim{Namespace: NSClaims, Key: key, Value: []byte("after the attack")})
	cl.Close()
}

// rawConn is a connection written to as bytes and read with a door's
// ReadReply.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

// dialRaw opens a connection to addr, closed at the test's end.
func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, opTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{Conn: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

// hello signs c in through w with token when the door's connections sign
// in (and reads the answer, which must be a success).
func hello(t testing.TB, w Wire, c *rawConn, token string) {
	t.Helper()
	b := w.Hello(token)
	if b == nil {
		return
	}
	c.SetDeadline(time.Now().Add(opTimeout))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(b); err != nil {
		t.Fatalf("signing a connection in: %v", err)
	}
	r, err := w.ReadReply(c.r)
	if err != nil || r.Code != "" {
		t.Fatalf("signing a connection in: got %s, %v; want it signed in", show(r), err)
	}
}

// reply reads one answer within opTimeout.
func (c *rawConn) reply(w Wire) (Reply, error) {
	c.SetReadDeadline(time.Now().Add(opTimeout))
	defer c.SetReadDeadline(time.Time{})
	return w.ReadReply(c.r)
}

// closedErr reports whether err is what reading a connection the peer
// closed returns.
func closedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// peerClosed reports, without waiting, whether the peer closed c: whether
// a read would return end of file (or a reset) rather than block.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var buf [1]byte
	rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil || err == syscall.ECONNRESET
		return true
	})
	return closed
}

// show describes a reply for a failure message.
func show(r Reply) string {
	switch {
	case r.Code != "":
		s := fmt.Sprintf("refusal %s %q", r.Code, clip(r.Text, 200))
		if r.Close {
			s += " (closing)"
		}
		return s
	case r.Outcome != "":
		return r.Outcome
	case r.Value != nil:
		return fmt.Sprintf("a value of %d bytes", len(r.Value))
	}
	return "a success"
}

// showWant describes an expected answer.
func showWant(w Want) string {
	if w.IsZero() {
		return "no answer"
	}
	s := fmt.Sprintf("refusal %s", w.Code)
	if w.Text != "" {
		s += fmt.Sprintf(" with %q", w.Text)
	}
	if w.Close {
		s += " announcing the close"
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// pattern returns n bytes that start with tag and repeat it, so that the
// value of each key is its own.
func pattern(tag string, n int) []byte {
	unit := []byte(tag + "|")
	return bytes.Repeat(unit, n/len(unit)+1)[:n]
}

// mib formats bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// firstErrors collects at most a few failures of many concurrent workers.
type firstErrors struct {
	ch chan string // the first ten
}

func newFirstErrors() *firstErrors {
	return &firstErrors{ch: make(chan string, 10)}
}

func (f *firstErrors) add(format string, args ...any) {
	select {
	case f.ch <- fmt.Sprintf(format, args...):
	default:
	}
}

// report fails t with the failures collected, if any. When the server
// died meanwhile, that is the failure: what its clients saw follows from
// it.
func (f *firstErrors) report(t testing.TB, s *server, what string) {
	t.Helper()
	if len(f.ch) > 0 {
		s.mustLive(t, what)
	}
	var msgs []string
	for {
		select {
		case m := <-f.ch:
			msgs = append(msgs, m)
			continue
		default:
		}
		break
	}
	if len(msgs) > 0 {
		t.Fatalf("%s:\n%s", what, strings.Join(msgs, "\n"))
	}
}
