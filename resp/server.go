package resp

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/internal/grant"
)

// Defaults of the limits in Config.
const (
	// DefaultMaxArgs is the most arguments one command may carry.
	DefaultMaxArgs = 64
	// DefaultMaxPipeline is the most commands of one connection decided
	// together: the claims among them share one store write.
	DefaultMaxPipeline = 1024
	// DefaultMaxClients is the most connections served at once.
	DefaultMaxClients = door.DefaultMaxClients
	// DefaultMaxReply is the most reply bytes a connection holds before it
	// writes them: a batch whose replies pass it is written as it is
	// decided, so that a client that pipelines reads of large values
	// without reading the replies makes the server hold no more.
	DefaultMaxReply = 256 << 10
	// DefaultMaxRollbackBytes is the default budget of the values waiting
	// in memory for the end of their rollback window: 64 MiB.
	DefaultMaxRollbackBytes = 64 << 20
)

// Prefix maps the keys that start with Prefix to a namespace: the rest of
// the key is the claim key.
type Prefix struct {
	// Prefix starts the Redis keys of the namespace ("tokens:redeemed:").
	Prefix string
	// Namespace is the configured namespace those keys are claimed in.
	Namespace string
	// Rollback makes SET … NX and SETNX hold the key pending (a two-step
	// claim) for half the namespace's lease, so that DEL can roll the spend
	// back, as a token relay does when a later check rejects the
	// message; then the listener completes the claim with the value. The
	// namespace must hold on lease expiry, so that a claim whose completion
	// a crash cut short stays spent (an unknown outcome) rather than free.
	Rollback bool
	// MinExpiry is the shortest life a record of this prefix may have: a
	// shorter expiry asked with EX, PX, EXAT or PXAT is raised to it
	// (Privacy Pass namespaces: epoch + grace + skew). Zero: no minimum.
	MinExpiry time.Duration
}

// Config configures a Server. Start from DefaultConfig.
type Config struct {
	// Prefixes map key prefixes to namespaces. A key that matches none is
	// refused with an error reply, never claimed in a default namespace;
	// the longest matching prefix wins.
	Prefixes []Prefix
	// Tokens are the accepted tokens, sent with AUTH or HELLO … AUTH, with
	// their namespace scopes: the HTTP API's. With none, authentication is
	// off and only loopback clients are served.
	Tokens []grant.Token
	// MaxArgs is the most arguments of one command, MaxBulk the longest
	// argument in bytes, MaxPipeline the most commands of a connection
	// decided together, MaxClients the most connections (over
	// Limits.MaxClients when set). Zero means the default (MaxBulk: the
	// ledger's MaxResult plus 1 KiB).
	MaxArgs, MaxBulk, MaxPipeline, MaxClients int
	// MaxReply is the most reply bytes a connection holds before it writes
	// them (zero: DefaultMaxReply).
	MaxReply int
	// MaxRollbackBytes is the budget of the values of rollback prefixes
	// waiting in memory for their window's end (zero:
	// DefaultMaxRollbackBytes). A claim whose value does not fit is refused
	// before it is made (-UNAVAILABLE, retry), never made without its
	// rollback.
	MaxRollbackBytes int64
	// Limits is the policy every door of the server follows (package door):
	// connections and the unauthenticated share, the sign-in, read, write
	// and idle deadlines, refused sign-ins before a connection is closed.
	// Zero fields take door's defaults.
	Limits door.Limits
	// Budget is the budget of bytes in flight the listener's command
	// arguments draw on, shared with the server's other doors (the HTTP
	// bodies); nil means one of Limits.MaxInFlight of its own.
	Budget *door.Budget
	// Throttle counts refused sign-ins, shared with the server's other
	// doors; nil means one of its own, logging to Logger.
	Throttle *door.Throttle
	// Registerer receives the listener's metrics; nil means none.
	Registerer prometheus.Registerer
	// Logger receives connection and store errors; nil discards them.
	Logger *slog.Logger
	// Version is reported by HELLO and INFO.
	Version string
}

// DefaultConfig returns a Config with the default limits and no prefixes.
func DefaultConfig() Config {
	return Config{MaxArgs: DefaultMaxArgs, MaxPipeline: DefaultMaxPipeline, MaxReply: DefaultMaxReply,
		MaxRollbackBytes: DefaultMaxRollbackBytes, Limits: door.DefaultLimits()}
}

// Server answers Redis clients over a Ledger (see docs/resp.md).
type Server struct {
	ledger   *spent.Ledger
	prefixes []Prefix // longest first
	grants   grant.Set
	cfg      Config
	log      *slog.Logger
	m        *metrics
	rollback *completer
	lim      door.Limits
	budget   *door.Budget
	throttle *door.Throttle
	admit    *door.Conns
	// preAuth and full are the limits of a command before and after the
	// connection signs in.
	preAuth, full limits

	mu      sync.Mutex
	lns     map[net.Listener]bool
	conns   map[*conn]bool
	closing bool
	wg      sync.WaitGroup
	ids     atomic.Int64
}

// NewServer returns a Server over l. It refuses prefixes that name unknown
// namespaces, repeat, or roll back in a namespace that retakes expired
// leases, and tokens the HTTP API would refuse.
func NewServer(l *spent.Ledger, cfg Config) (*Server, error) {
	if l == nil {
		return nil, errors.New("resp: nil ledger")
	}
	d := DefaultConfig()
	if err := cfg.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("resp: %w", err)
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.MaxArgs == 0 {
		cfg.MaxArgs = d.MaxArgs
	}
	if cfg.MaxPipeline == 0 {
		cfg.MaxPipeline = d.MaxPipeline
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = cfg.Limits.MaxClients
	}
	cfg.Limits.MaxClients = cfg.MaxClients
	cfg.Limits.MaxUnauthenticated = min(cfg.Limits.MaxUnauthenticated, cfg.MaxClients)
	if cfg.MaxBulk == 0 {
		cfg.MaxBulk = spent.DefaultMaxResult + 1024
	}
	if cfg.MaxReply == 0 {
		cfg.MaxReply = d.MaxReply
	}
	if cfg.MaxRollbackBytes == 0 {
		cfg.MaxRollbackBytes = d.MaxRollbackBytes
	}
	if cfg.MaxArgs < 4 || cfg.MaxBulk < spent.MaxKeyLen || cfg.MaxPipeline < 1 || cfg.MaxClients < 1 || cfg.MaxReply < 1 || cfg.MaxRollbackBytes < 1 {
		return nil, fmt.Errorf("resp: limits too small: max_args %d (at least 4), max_bulk %d (at least %d), max_pipeline %d, max_clients %d, max_reply %d, max_rollback_bytes %d (at least 1)",
			cfg.MaxArgs, cfg.MaxBulk, spent.MaxKeyLen, cfg.MaxPipeline, cfg.MaxClients, cfg.MaxReply, cfg.MaxRollbackBytes)
	}
	if cfg.MaxPipeline > spent.MaxBatch {
		return nil, fmt.Errorf("resp: max_pipeline %d: at most %d, the ledger's largest batch", cfg.MaxPipeline, spent.MaxBatch)
	}
	if len(cfg.Prefixes) == 0 {
		return nil, errors.New("resp: no prefixes: map at least one key prefix to a namespace ([resp.namespaces] in the config file)")
	}
	seen := map[string]bool{}
	for _, p := range cfg.Prefixes {
		if seen[p.Prefix] {
			return nil, fmt.Errorf("resp: prefix %q given twice", p.Prefix)
		}
		seen[p.Prefix] = true
		pol, ok := l.Policy(p.Namespace)
		if !ok {
			return nil, fmt.Errorf("resp: prefix %q: namespace %q is not configured", p.Prefix, p.Namespace)
		}
		if p.Rollback && pol.OnLeaseExpiry != spent.LeaseExpiryHold {
			return nil, fmt.Errorf("resp: prefix %q rolls back, but namespace %q retakes expired leases: a spend whose completion a crash cut short would become free again; give the namespace on_lease_expiry = \"hold\"", p.Prefix, p.Namespace)
		}
		if p.MinExpiry < 0 || p.MinExpiry > pol.Retention {
			return nil, fmt.Errorf("resp: prefix %q: minimum expiry %v outside 0 to the namespace's retention %v", p.Prefix, p.MinExpiry, pol.Retention)
		}
	}
	grants, err := grant.New("resp", cfg.Tokens, l)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("resp: metrics: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	budget := cfg.Budget
	if budget == nil {
		if budget, err = door.NewBudget(cfg.Limits.MaxInFlight); err != nil {
			return nil, fmt.Errorf("resp: %w", err)
		}
	}
	throttle := cfg.Throttle
	if throttle == nil {
		throttle = door.NewThrottle(log)
	}
	s := &Server{
		ledger:   l,
		prefixes: slices.Clone(cfg.Prefixes),
		grants:   grants,
		cfg:      cfg,
		log:      log,
		m:        m,
		lim:      cfg.Limits,
		budget:   budget,
		throttle: throttle,
		admit:    door.NewConns(cfg.MaxClients, cfg.Limits.MaxUnauthenticated),
		lns:      map[net.Listener]bool{},
		conns:    map[*conn]bool{},
	}
	s.full = limits{args: cfg.MaxArgs, bulk: cfg.MaxBulk, frame: cfg.MaxArgs * cfg.MaxBulk, line: maxLine}
	s.preAuth = limits{args: door.PreAuthArgs, bulk: door.PreAuthFrame, frame: door.PreAuthFrame, line: door.PreAuthFrame, preAuth: true}
	slices.SortFunc(s.prefixes, func(a, b Prefix) int { return len(b.Prefix) - len(a.Prefix) })
	s.rollback = newCompleter(l, log, m, cfg.MaxRollbackBytes)
	go s.rollback.run()
	return s, nil
}

// route returns the prefix a Redis key falls under and the claim key.
func (s *Server) route(key []byte) (*Prefix, string, bool) {
	for i := range s.prefixes {
		p := &s.prefixes[i]
		if len(key) > len(p.Prefix) && string(key[:len(p.Prefix)]) == p.Prefix {
			return p, string(key[len(p.Prefix):]), true
		}
	}
	return nil, "", false
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("resp: server closed")

// Serve accepts connections on ln (wrap it in tls.NewListener for TLS) and
// serves each in its own goroutine, until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.lns[ln] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Error("resp: accept", "err", err, "retry_in", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.start(nc)
	}
}

// start serves nc unless the server is closing or full. A connection over
// the limits closes the oldest idle one that has not signed in to make
// room (package door), or is refused when there is none.
func (s *Server) start(nc net.Conn) {
	c := newConn(s, nc)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.mu.Unlock()
	before := s.admit.Evicted()
	entry, err := s.admit.Admit(nc)
	if n := s.admit.Evicted() - before; n > 0 {
		s.m.refused.WithLabelValues("evicted").Add(float64(n))
	}
	if err != nil {
		s.m.refused.WithLabelValues("max_clients").Inc()
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		c.w.fail("ERR", fmt.Sprintf("max number of clients reached (%d, resp max_clients)", s.cfg.MaxClients))
		c.flush()
		nc.Close()
		return
	}
	c.entry = entry
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		entry.Done()
		nc.Close()
		return
	}
	s.conns[c] = true
	s.wg.Add(1)
	s.mu.Unlock()
	if len(s.grants) == 0 && !loopbackAddr(nc.RemoteAddr()) {
		s.m.refused.WithLabelValues("not_loopback").Inc()
		c.w.fail("DENIED", "no tokens are configured, so this listener serves loopback clients only: configure [[tokens]] to serve "+nc.RemoteAddr().String())
		c.flush()
		s.forget(c)
		nc.Close()
		return
	}
	go c.serve()
}

func (s *Server) forget(c *conn) {
	if c.entry != nil {
		c.entry.Done()
	}
	s.mu.Lock()
	if s.conns[c] {
		delete(s.conns, c)
		s.wg.Done()
	}
	s.mu.Unlock()
}

// Revalidate closes every TLS connection whose client certificate no longer
// verifies against roots, and returns how many it closed: call it after the
// client CAs are reloaded, so that a client whose CA was removed is cut off
// rather than keeping its open connections (see [door.Conns.Revalidate]).
func (s *Server) Revalidate(roots *x509.CertPool) int {
	n := s.admit.Revalidate(roots)
	if n > 0 {
		s.m.refused.WithLabelValues("revoked").Add(float64(n))
		s.log.Warn("resp: closed connections whose client certificate no longer verifies", "closed", n)
	}
	return n
}

// loopbackAddr reports whether a is a loopback TCP address (or not TCP at
// all: a Unix socket or an in-process pipe).
func loopbackAddr(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return !ok || t.IP.IsLoopback()
}

// Shutdown stops accepting connections, lets every connection finish the
// commands it has read and answer them, closes it, and then completes the
// spends of rollback prefixes still in their window (their window ends
// early: their DEL is refused from then on). If ctx ends first the
// connections are closed at once; the completions still run, bounded by
// ctx. Call it before closing the ledger's store.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.stop()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		err = ctx.Err()
	}
	return errors.Join(err, s.rollback.close(ctx))
}

// isStoreError reports whether err says the store is unwell.
func isStoreError(err error) bool {
	switch spent.ErrorCode(err) {
	case spent.EUnavailable, spent.EInternal:
		return true
	}
	return false
}

// errorReply writes err as an error reply: the spent problem code in
// capitals as its first word ("UNAVAILABLE store unavailable: …").
func (w *writer) errorReply(err error) {
	code := spent.ErrorCode(err)
	if code == "" {
		code = spent.EInternal
	}
	msg := err.Error()
	var e *spent.Error
	if errors.As(err, &e) {
		msg = e.Message
		if e.Code == spent.EUnavailable {
			msg += ": the store did not answer; retry later (nothing was decided that the retry could contradict)"
		}
	}
	w.fail(strings.ToUpper(code), msg)
}

// ioErr reports whether err ends a connection quietly.
func ioErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)
}
