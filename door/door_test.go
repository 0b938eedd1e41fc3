package door_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/internal/syncbuf"
	"github.com/spentledger/spent/internal/tlstest"
)

// pipeConn returns one end of an in-memory connection that records whether
// it was closed.
type closeRecorder struct {
	net.Conn
	mu     sync.Mutex
	closed bool
}

func (c *closeRecorder) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.Conn.Close()
}

func (c *closeRecorder) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func newConn(t *testing.T) *closeRecorder {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &closeRecorder{Conn: a}
}

// TestConnsUnauthenticatedShare: past the share of unauthenticated
// connections a newcomer closes the oldest idle one; busy and signed-in
// connections are never closed to make room; when nothing can make room the
// newcomer is refused.
func TestConnsUnauthenticatedShare(t *testing.T) {
	cs := door.NewConns(5, 2)
	a, b := newConn(t), newConn(t)
	ea, err := cs.Admit(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Admit(b); err != nil {
		t.Fatal(err)
	}
	c := newConn(t)
	ec, err := cs.Admit(c)
	if err != nil {
		t.Fatalf("third unauthenticated connection: got %v, want it admitted in place of the oldest", err)
	}
	if !a.isClosed() || b.isClosed() {
		t.Fatalf("closed: a %v b %v; want the oldest (a) only", a.isClosed(), b.isClosed())
	}
	ea.Done() // its server noticed the close
	if all, un := cs.Len(); all != 2 || un != 2 {
		t.Fatalf("Len: got %d, %d; want 2, 2", all, un)
	}
	ec.SignIn()
	if !ec.SignedIn() {
		t.Fatal("SignedIn: got false after SignIn")
	}
	// Now b is the only unauthenticated one: a newcomer takes the free
	// unauthenticated slot without closing anyone.
	d := newConn(t)
	if _, err := cs.Admit(d); err != nil {
		t.Fatalf("d: %v", err)
	}
	if got := cs.Evicted(); got != 1 {
		t.Fatalf("Evicted: got %d, want 1", got)
	}
}

// TestConnsBusyAndSignedInStay: a listener full of signed-in and busy
// connections refuses a newcomer with ErrFull and closes none of them.
func TestConnsBusyAndSignedInStay(t *testing.T) {
	cs := door.NewConns(3, 3)
	var conns []*closeRecorder
	var entries []*door.Conn
	for range 3 {
		c := newConn(t)
		e, err := cs.Admit(c)
		if err != nil {
			t.Fatal(err)
		}
		conns, entries = append(conns, c), append(entries, e)
	}
	entries[0].SignIn()
	entries[1].Busy(true)
	entries[2].SignIn()
	if _, err := cs.Admit(newConn(t)); err != door.ErrFull {
		t.Fatalf("Admit into a full listener: got %v, want ErrFull", err)
	}
	for i, c := range conns {
		if c.isClosed() {
			t.Fatalf("connection %d was closed to make room; want none", i)
		}
	}
	entries[1].Busy(false)
	if _, err := cs.Admit(newConn(t)); err != nil {
		t.Fatalf("Admit once the unauthenticated one is idle: got %v, want it closed for the newcomer", err)
	}
	if !conns[1].isClosed() {
		t.Fatal("the idle unauthenticated connection was not closed")
	}
	// SignOut puts a connection back among the unauthenticated.
	entries[0].SignOut()
	if entries[0].SignedIn() {
		t.Fatal("SignedIn after SignOut: got true")
	}
	if _, un := cs.Len(); un != 2 {
		t.Fatalf("unauthenticated after SignOut: got %d, want 2", un)
	}
	// Done twice, and after an eviction, is harmless.
	entries[1].Done()
	entries[1].Done()
}

// TestThrottle: delays double per address up to MaxAuthDelay, are counted
// per address (IPv6 by /64), reset after AuthWindow, and the log has one
// line for the first failure of an address, then one a minute with the
// count.
func TestThrottle(t *testing.T) {
	var buf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	th := door.NewThrottle(log)
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	th.SetClock(func() time.Time { return now })
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i, w := range want {
		if got := th.Failed("resp", "192.0.2.1:5000", "unknown token"); got != w*time.Millisecond {
			t.Fatalf("failure %d: delay %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := th.Failed("resp", "192.0.2.2:5000", "unknown token"); got != door.FirstAuthDelay {
		t.Fatalf("another address: delay %v, want %v", got, door.FirstAuthDelay)
	}
	th.Failed("resp", "[2001:db8::1]:1", "x")
	if got := th.Failed("resp", "[2001:db8::2]:2", "x"); got != 2*door.FirstAuthDelay {
		t.Fatalf("same /64: delay %v, want %v", got, 2*door.FirstAuthDelay)
	}
	now = now.Add(door.AuthWindow + time.Second)
	if got := th.Failed("resp", "192.0.2.1:6000", "unknown token"); got != door.FirstAuthDelay {
		t.Fatalf("after the window: delay %v, want %v", got, door.FirstAuthDelay)
	}
	out := buf.String()
	if n := strings.Count(out, "remote=192.0.2.1"); n != 2 {
		t.Fatalf("log lines for 192.0.2.1: got %d, want 2 (the first, then one after a minute with the count)\n%s", n, out)
	}
	if !strings.Contains(out, "since_last_line=8") {
		t.Fatalf("log: want the count of the failures since the first line (8)\n%s", out)
	}
	if th.Total() != 12 {
		t.Fatalf("Total: got %d, want 12", th.Total())
	}
}

// TestBudget: reservations fit or not, and come back.
func TestBudget(t *testing.T) {
	if _, err := door.NewBudget(0); err == nil {
		t.Fatal("NewBudget(0): want an error")
	}
	b, err := door.NewBudget(100)
	if err != nil {
		t.Fatal(err)
	}
	if !b.TryAcquire(60) || b.TryAcquire(41) || !b.TryAcquire(40) || b.TryAcquire(1) {
		t.Fatal("reservations: want 60 and 40 to fit in 100, 41 and 1 beyond")
	}
	b.Release(60)
	if !b.TryAcquire(60) {
		t.Fatal("after Release: want 60 to fit again")
	}
	if !b.TryAcquire(0) || !b.TryAcquire(-5) {
		t.Fatal("zero and negative: want them always to fit")
	}
}

// TestLimits: defaults fill zero fields, and unusable values are refused.
func TestLimits(t *testing.T) {
	l := door.Limits{MaxClients: 50}.WithDefaults()
	if l.MaxUnauthenticated != 50 || l.AuthTimeout != door.DefaultAuthTimeout || l.MaxInFlight != door.DefaultMaxInFlight {
		t.Fatalf("WithDefaults: got %+v", l)
	}
	for _, bad := range []door.Limits{
		{MaxClients: -1}, {MaxClients: 10, MaxUnauthenticated: 11}, {AuthTimeout: time.Millisecond},
		{IdleTimeout: 48 * time.Hour}, {MaxAuthFailures: -1}, {MaxInFlight: -1},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v): want an error", bad)
		}
	}
	if err := door.DefaultLimits().Validate(); err != nil {
		t.Fatalf("DefaultLimits: %v", err)
	}
}

// TestRevalidate: after the client CAs change, a TLS connection whose
// client certificate no longer verifies is closed; one that still does is
// kept.
func TestRevalidate(t *testing.T) {
	ca1, ca2 := tlstest.NewCA(t, "ca one"), tlstest.NewCA(t, "ca two")
	server := ca1.Server(t).TLS
	pool := x509.NewCertPool()
	pool.AddCert(ca1.Cert)
	pool.AddCert(ca2.Cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{server}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cs := door.NewConns(10, 10)
	served := make(chan *tls.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if err := tc.Handshake(); err != nil {
				c.Close()
				continue
			}
			if _, err := cs.Admit(tc); err != nil {
				c.Close()
				continue
			}
			served <- tc
		}
	}()
	roots := ca1.Pool()
	dial := func(ca *tlstest.CA) *tls.Conn {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{ca.Client(t, "client of "+ca.Cert.Subject.CommonName).TLS}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1, c2 := dial(ca1), dial(ca2)
	<-served
	<-served
	only1 := x509.NewCertPool()
	only1.AddCert(ca1.Cert)
	if n := cs.Revalidate(only1); n != 1 {
		t.Fatalf("Revalidate: closed %d, want 1 (the client of the removed CA)", n)
	}
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Fatal("the client of the removed CA: read succeeded, want its connection closed")
	}
	c1.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c1.Read(make([]byte, 1)); err == nil || !isTimeout(err) {
		t.Fatalf("the client of the kept CA: got %v, want its connection open (a read timeout)", err)
	}
	if n := cs.Revalidate(nil); n != 0 {
		t.Fatalf("Revalidate(nil): closed %d, want 0", n)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestServeAnsweredMakesRoom: a connection that has not signed in makes
// room for a newcomer as soon as its request is answered, although net/http
// holds it a while longer: half a second when the answer closes it over an
// unread body, up to ReadTimeout when it waits for the rest of a body the
// handler did not read. Before, a newcomer found the unauthenticated share
// full of such connections and was refused, so a burst of requests refused
// before their bodies kept every client out, a client with a token
// included.
func TestServeAnsweredMakesRoom(t *testing.T) {
	for _, tc := range []struct{ name, request string }{
		{"ClosingAnswer", "POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n"},
		{"BodyNeverSent", "POST /deny HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := door.NewConns(10, 1)
			ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/refuse":
					w.Header().Set("Connection", "close")
					http.Error(w, "too large", http.StatusRequestEntityTooLarge)
				case "/deny":
					http.Error(w, "no token", http.StatusUnauthorized)
				default:
					door.FromContext(r.Context()).SignIn()
					io.WriteString(w, "ok")
				}
			}))
			ts.Config.ReadTimeout = time.Minute
			cs.Serve(ts.Config)
			ts.Start()
			defer ts.Close()
			dial := func() (net.Conn, *bufio.Reader) {
				nc, err := net.Dial("tcp", ts.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { nc.Close() })
				nc.SetDeadline(time.Now().Add(10 * time.Second))
				return nc, bufio.NewReader(nc)
			}
			a, _ := dial()
			io.WriteString(a, tc.request)
			time.Sleep(100 * time.Millisecond) // the handler has answered
			b, br := dial()
			io.WriteString(b, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("a newcomer just after a request answered before its body: %v, want it served (the answered connection makes room)", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the newcomer: got %d, want 200", resp.StatusCode)
			}
		})
	}
}
