package door

import (
	"container/list"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// ErrFull is returned by [Conns.Admit] when a listener serves MaxClients
// connections (or its share of unauthenticated ones) and none of them can
// be closed to make room.
var ErrFull = errors.New("door: max number of clients reached")

// Conns admits and tracks the connections of one listener: at most max in
// all, at most maxUnauth of them before they sign in. When a connection
// arrives and either bound is reached, the oldest connection that has not
// signed in and is idle is closed to make room for it; when there is none,
// the newcomer is refused with ErrFull. Signed-in connections are never
// closed to make room, so a flood of unauthenticated sockets cannot keep an
// authorised client out, and cannot push one out either.
type Conns struct {
	max, maxUnauth int

	mu      sync.Mutex
	n       int
	unauth  list.List // of *Conn, oldest first: those not signed in
	all     map[*Conn]struct{}
	evicted int64
	refused int64
}

// NewConns returns the admission of a listener of at most max
// connections, maxUnauth of them unauthenticated (both at least 1,
// maxUnauth at most max).
func NewConns(max, maxUnauth int) *Conns {
	max = maxOf(max, 1)
	maxUnauth = min(maxOf(maxUnauth, 1), max)
	return &Conns{max: max, maxUnauth: maxUnauth, all: map[*Conn]struct{}{}}
}

// maxOf is the builtin max, which NewConns's parameter named max hides.
func maxOf(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Conn is one admitted connection.
type Conn struct {
	nc       net.Conn
	cs       *Conns
	el       *list.Element // in cs.unauth while not signed in
	busy     int
	failures int
	gone     bool
	signed   atomic.Bool   // SignIn's fast path: set while signed in
	closed   chan struct{} // closed when the connection is forgotten
}

// Closed returns a channel closed once the connection is no longer
// admitted: closed to make room, closed by Revalidate, or Done. A server
// that makes a connection wait (the delay of a refused sign-in) waits on it
// too, so that a connection closed meanwhile holds nothing.
func (c *Conn) Closed() <-chan struct{} { return c.closed }

// Admit admits nc, closing the oldest idle unauthenticated connection when
// a bound is reached; it returns ErrFull, and does not close nc, when no
// connection can make room. The caller calls [Conn.Done] when nc closes.
func (cs *Conns) Admit(nc net.Conn) (*Conn, error) {
	cs.mu.Lock()
	var victims []*Conn
	for cs.n >= cs.max || cs.unauth.Len() >= cs.maxUnauth {
		v := cs.oldestIdleLocked()
		if v == nil {
			cs.mu.Unlock()
			closeAll(victims)
			return nil, ErrFull
		}
		cs.removeLocked(v)
		cs.evicted++
		victims = append(victims, v)
	}
	c := &Conn{nc: nc, cs: cs, closed: make(chan struct{})}
	c.el = cs.unauth.PushBack(c)
	cs.all[c] = struct{}{}
	cs.n++
	cs.mu.Unlock()
	closeAll(victims)
	return c, nil
}

func closeAll(cs []*Conn) {
	for _, c := range cs {
		c.nc.Close()
	}
}

// oldestIdleLocked returns the oldest unauthenticated connection not
// serving a request, or nil.
func (cs *Conns) oldestIdleLocked() *Conn {
	for e := cs.unauth.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*Conn); c.busy == 0 {
			return c
		}
	}
	return nil
}

func (cs *Conns) removeLocked(c *Conn) {
	if c.gone {
		return
	}
	c.gone = true
	close(c.closed)
	if c.el != nil {
		cs.unauth.Remove(c.el)
		c.el = nil
	}
	delete(cs.all, c)
	cs.n--
}

// SignIn marks the connection signed in: it no longer counts against the
// unauthenticated share and is never closed to make room.
func (c *Conn) SignIn() {
	if c.signed.Load() {
		return
	}
	c.signed.Store(true)
	c.cs.mu.Lock()
	if c.el != nil {
		c.cs.unauth.Remove(c.el)
		c.el = nil
	}
	c.cs.mu.Unlock()
}

// SignOut marks a signed-in connection as not signed in again (RESP's
// RESET): it counts against the unauthenticated share from now on, as the
// newest of them.
func (c *Conn) SignOut() {
	c.signed.Store(false)
	c.cs.mu.Lock()
	if c.el == nil && !c.gone {
		c.el = c.cs.unauth.PushBack(c)
	}
	c.cs.mu.Unlock()
}

// SignedIn reports whether [Conn.SignIn] was called.
func (c *Conn) SignedIn() bool {
	c.cs.mu.Lock()
	defer c.cs.mu.Unlock()
	return c.el == nil && !c.gone
}

// Busy marks the connection as serving a request (true) or idle (false);
// the calls nest. A busy connection is not closed to make room.
func (c *Conn) Busy(b bool) {
	c.cs.mu.Lock()
	if b {
		c.busy++
	} else if c.busy > 0 {
		c.busy--
	}
	c.cs.mu.Unlock()
}

// Failed counts a refused sign-in on the connection and returns how many
// it has made.
func (c *Conn) Failed() int {
	c.cs.mu.Lock()
	defer c.cs.mu.Unlock()
	c.failures++
	return c.failures
}

// Done forgets the connection; call it once it is closed. It is safe to
// call more than once, and after the connection was closed to make room.
func (c *Conn) Done() {
	c.cs.mu.Lock()
	c.cs.removeLocked(c)
	c.cs.mu.Unlock()
}

// Len returns the connections admitted and, of them, those not signed in.
func (cs *Conns) Len() (all, unauthenticated int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.n, cs.unauth.Len()
}

// Evicted returns how many connections were closed to make room.
func (cs *Conns) Evicted() int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.evicted
}

// Revalidate closes every TLS connection whose client certificate does not
// verify against roots as a client certificate (its chain as presented,
// at the current time), and returns how many it closed. Call it after the
// client CAs are reloaded: a client whose CA was removed is cut off at
// once rather than keeping its open connections. Connections without a
// client certificate, or not TLS, are left alone (a server that requires
// client certificates never completes their handshake). With roots nil
// (client certificates no longer asked for) nothing is closed.
func (cs *Conns) Revalidate(roots *x509.CertPool) int {
	if roots == nil {
		return 0
	}
	cs.mu.Lock()
	conns := make([]*Conn, 0, len(cs.all))
	for c := range cs.all {
		conns = append(conns, c)
	}
	cs.mu.Unlock()
	closed := 0
	for _, c := range conns {
		st, ok := connectionState(c.nc)
		if !ok || !st.HandshakeComplete || len(st.PeerCertificates) == 0 {
			continue
		}
		if VerifyClient(st.PeerCertificates, roots) != nil {
			cs.mu.Lock()
			cs.removeLocked(c)
			cs.mu.Unlock()
			c.nc.Close()
			closed++
		}
	}
	return closed
}

// connectionState returns the TLS state of nc, looking through wrappers
// that name the connection they wrap with NetConn.
func connectionState(nc net.Conn) (tls.ConnectionState, bool) {
	for range 4 {
		if t, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
			return t.ConnectionState(), true
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = u.NetConn()
	}
	return tls.ConnectionState{}, false
}

// VerifyClient verifies a client's certificate chain (leaf first, as a TLS
// handshake presents it) against roots, for client authentication, as
// crypto/tls does with RequireAndVerifyClientCert.
func VerifyClient(chain []*x509.Certificate, roots *x509.CertPool) error {
	if len(chain) == 0 {
		return errors.New("door: no client certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return err
}
