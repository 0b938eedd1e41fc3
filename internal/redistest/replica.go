package redistest

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// StartReplica starts a durable redis-server that replicates from the
// server at primary (host:port: the primary itself, or a [Proxy] in front of
// it, which the test can cut), and waits until the replica has synced. It
// stops it when tb ends. Redis replicates asynchronously: a write the
// primary acknowledged may not have reached the replica yet.
func StartReplica(tb testing.TB, primary string, opts ...Option) *Server {
	tb.Helper()
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		tb.Fatalf("redistest: StartReplica: %v", err)
	}
	opts = append([]Option{Args("--replicaof", host, port)}, opts...)
	s := Start(tb, opts...)
	c := s.client()
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && infoField(info, "master_link_status") == "up" && infoField(info, "master_sync_in_progress") == "0" {
			return s
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: replica %s of %s not synced after %v: %v %s\n%s", s.Addr, primary, startTimeout, err, info, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Promote makes a replica a primary (REPLICAOF NO ONE), as an operator or
// Sentinel does after its primary failed: it keeps what it had received,
// and accepts writes.
func (s *Server) Promote(tb testing.TB) {
	tb.Helper()
	c := s.client()
	defer c.Close()
	if err := c.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		tb.Fatalf("redistest: REPLICAOF NO ONE on %s: %v", s.Addr, err)
	}
}

// WaitReplicas waits until n replicas have acknowledged every write the
// server took so far (WAIT), or fails tb after timeout.
func (s *Server) WaitReplicas(tb testing.TB, n int, timeout time.Duration) {
	tb.Helper()
	c := s.client()
	defer c.Close()
	got, err := c.Wait(context.Background(), n, timeout).Result()
	if err != nil || got < int64(n) {
		tb.Fatalf("redistest: WAIT %d on %s: %d replicas acknowledged, err %v", n, s.Addr, got, err)
	}
}

func (s *Server) client() *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: s.Addr, MaxRetries: -1, DisableIdentity: true})
}

// Proxy is a TCP proxy on a free loopback port that forwards each
// connection to a target the test can change or cut: it stands for the
// network between a replica and its primary, or for the address clients
// reach the current primary at (a virtual IP, a Sentinel-aware proxy).
type Proxy struct {
	// Addr is where the proxy listens, 127.0.0.1:port.
	Addr string

	ln     net.Listener
	mu     sync.Mutex
	target string // "" while cut
	conns  map[net.Conn]struct{}
	closed bool
}

// NewProxy starts a proxy to target and stops it when tb ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	go p.serve()
	tb.Cleanup(p.close)
	return p
}

// Cut closes every connection and refuses new ones (each is closed at
// once) until Repoint: the link is down.
func (p *Proxy) Cut() { p.Repoint("") }

// Repoint closes every connection and sends new ones to target.
func (p *Proxy) Repoint(target string) {
	p.mu.Lock()
	p.target = target
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

// forward joins c to a new connection to the target.
func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	target, closed := p.target, p.closed
	p.mu.Unlock()
	if target == "" || closed {
		c.Close()
		return
	}
	u, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.target != target || p.closed {
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(u, c)
	go pipe(c, u)
	<-done
	c.Close()
	u.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Cut()
}

// String returns the proxy's address and target, for messages.
func (p *Proxy) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("proxy %s -> %q", p.Addr, p.target)
}
