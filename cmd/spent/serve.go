package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/door"
	"github.com/spentledger/spent/ecash"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/node"
	"github.com/spentledger/spent/privacypass"
	"github.com/spentledger/spent/resp"
)

// writeWaitMargin is the time a waiting claim's request keeps, beyond its
// wait, to read its body, make its last look and write its answer. The
// HTTP server's other timeouts are the door policy's (door.Limits): claims
// are small and fast, and these only bound clients that stall.
const writeWaitMargin = 30 * time.Second

// doors is what every listener of the server shares (package door): the
// policy, the budget of bytes in flight (max_bodies: HTTP bodies and RESP
// arguments), the sign-in throttle, and the admission of the HTTP
// listener's connections.
type doors struct {
	limits   door.Limits
	budget   *door.Budget
	throttle *door.Throttle
	http     *door.Conns
	// unauth is the share of budget that HTTP bodies without a valid
	// token may hold (door.UnauthenticatedShare).
	unauth *door.Budget
}

// newDoors builds the doors of cfg.
func newDoors(cfg serveConfig, log *slog.Logger) (doors, error) {
	lim := cfg.Limits.WithDefaults()
	lim.MaxInFlight = cfg.MaxBodies
	b, err := door.NewBudget(lim.MaxInFlight)
	if err != nil {
		return doors{}, err
	}
	u, err := door.NewBudget(min(door.UnauthenticatedShare(lim.MaxInFlight), lim.MaxInFlight))
	if err != nil {
		return doors{}, err
	}
	return doors{limits: lim, budget: b, unauth: u, throttle: door.NewThrottle(log),
		http: door.NewConns(lim.MaxClients, lim.MaxUnauthenticated)}, nil
}

func (m *Main) serveCommand() *cobra.Command {
	var sf serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the server",
		Long: `Run the server, by default on the embedded (pebble) store kept in the data
directory. --store puts the ledger on a shared store instead, so that several
servers answer as one: redis://, redis-cluster://, postgres:// or etcd:// (see
docs/stores.md). Servers sharing a store must share the secret: copy DATA/secret
from the first server; a server with another secret refuses to start.

Without --config there is one namespace, "default" (echo, 24h retention, 30s
lease, hold on lease expiry), and no tokens: auth is off and the server only
listens on a loopback address. The HMAC secret is generated on first start and
kept in DATA/secret (mode 0600). SIGINT or SIGTERM shuts down gracefully.

The rollback fence (DATA/fence) names the newest canary record the server
wrote to the store; a store without it is refused as rolled back. A data
directory without a fence beside a store that already holds records is
refused too, unless this is its deliberate first start: --new-fence (a new
server joining a shared store, or a fence known to be lost).

--tls-cert and --tls-key serve HTTPS (TLS 1.2 or later); the files are
reloaded on SIGHUP and when they change, without dropping a connection.
--tls-client-ca then requires of every client a certificate signed by one
of its CAs. A non-loopback address without TLS is refused unless
--allow-plaintext (see docs/operations.md, "TLS and mTLS").

--resp serves Redis clients too (RESP2 and RESP3, with the same tokens and
TLS): SET key value NX is a claim, keys map to namespaces by prefix ("NAME:"
for each namespace unless [resp] namespaces says otherwise; see docs/resp.md).`,
		Example: `  spent serve
  spent serve --config spent.toml --listen 0.0.0.0:7070 --data /var/lib/spent --tls-cert server.crt --tls-key server.key
  spent serve --store postgres://spent@db.internal/spent
  spent serve --resp 127.0.0.1:6380`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := sf.config(c, m.getenv)
			if err != nil {
				return err
			}
			m.run = func(ctx context.Context) error { return m.serve(ctx, cfg, sf.newFence) }
			return nil
		},
	}
	sf.add(c.Flags())
	return c
}

// serveFlags are the flags of the serve command.
type serveFlags struct {
	configPath, listen, data, storeURL string
	resp                               string
	tlsCert, tlsKey, tlsClientCA       string
	allowNonDurable, newFence          bool
	allowPlaintext                     bool
}

// add defines the flags on f.
func (sf *serveFlags) add(f *pflag.FlagSet) {
	f.StringVarP(&sf.configPath, "config", "c", "", "TOML configuration `file` (see docs/configuration.md)")
	f.StringVar(&sf.listen, "listen", defaultListen, "TCP `address` to listen on (overrides the file's listen)")
	f.StringVar(&sf.data, "data", defaultData, "data `directory`: secret and embedded store (overrides the file's data)")
	f.StringVar(&sf.storeURL, "store", "", "store `DSN`: "+storeSchemes+" (default: pebble in DATA/"+storeDir+"; overrides the file's [store] url)")
	f.BoolVar(&sf.allowNonDurable, "allow-non-durable", false, "start a shared store even when its engine may lose acknowledged writes (logs what can be lost)")
	f.BoolVar(&sf.newFence, "new-fence", false, "first start of a data directory without a fence on a store that already holds records: the fence begins now (refused once DATA/fence exists)")
	f.StringVar(&sf.tlsCert, "tls-cert", "", "PEM `file` of the server's certificate (chain): serve HTTPS (overrides the file's tls_cert)")
	f.StringVar(&sf.tlsKey, "tls-key", "", "PEM `file` of the certificate's private key (overrides the file's tls_key)")
	f.StringVar(&sf.tlsClientCA, "tls-client-ca", "", "PEM `file` of the CAs that sign client certificates: every client must present one (overrides the file's tls_client_ca)")
	f.StringVar(&sf.resp, "resp", "", "TCP `address` of a RESP (Redis protocol) listener, e.g. 127.0.0.1:6380 (overrides the file's resp_listen; see docs/resp.md)")
	f.BoolVar(&sf.allowPlaintext, "allow-plaintext", false, "listen on a non-loopback address without TLS (behind a TLS-terminating proxy; overrides the file's allow_plaintext)")
}

// config returns the configuration the command line asks for: the file's
// values (or the defaults) with the flags that were set over them, checked.
func (sf *serveFlags) config(c *cobra.Command, getenv func(string) string) (serveConfig, error) {
	cfg := defaultServeConfig()
	if sf.configPath != "" {
		var err error
		if cfg, err = loadConfig(sf.configPath, getenv); err != nil {
			return cfg, &usageError{err}
		}
	}
	set := c.Flags().Changed
	if set("store") {
		if _, err := storeKind(sf.storeURL); err != nil {
			return cfg, &usageError{err}
		}
		cfg.StoreURL = sf.storeURL
	}
	for _, o := range []struct {
		flag     string
		dst, src *string
	}{
		{"listen", &cfg.Listen, &sf.listen}, {"data", &cfg.Data, &sf.data},
		{"tls-cert", &cfg.TLSCert, &sf.tlsCert}, {"tls-key", &cfg.TLSKey, &sf.tlsKey},
		{"tls-client-ca", &cfg.TLSClientCA, &sf.tlsClientCA}, {"resp", &cfg.RESP.Listen, &sf.resp},
	} {
		if set(o.flag) {
			*o.dst = *o.src
		}
	}
	if set("allow-non-durable") {
		cfg.AllowNonDurable = sf.allowNonDurable
	}
	if set("allow-plaintext") {
		cfg.AllowPlaintext = sf.allowPlaintext
	}
	for _, check := range []func() error{cfg.validate, cfg.checkTLS, cfg.checkListen} {
		if err := check(); err != nil {
			return cfg, &usageError{err}
		}
	}
	return cfg, nil
}

// newLogger returns the server's logger on w.
func newLogger(w io.Writer, cfg serveConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve runs the server until ctx is cancelled, then shuts down gracefully:
// the listener closes, in-flight requests finish (within the shutdown
// timeout), and the node closes (package node: the sweeper and the fence
// stop, a last canary is written, the store closes last).
//
// The certificates are loaded and the listener opened before the node, so
// that a bad certificate or a port in use is found before anything is
// written to the data directory.
func (m *Main) serve(ctx context.Context, cfg serveConfig, newFence bool) error {
	log := newLogger(m.Stderr, cfg)
	var certs *certReloader
	if cfg.TLSCert != "" {
		var err error
		if certs, err = newCertReloader(cfg, log); err != nil {
			return &usageError{err}
		}
		defer certs.watch()()
	}
	ln, err := listen(cfg.Listen, "listen", "listen")
	if err != nil {
		return err
	}
	var respLn net.Listener
	if cfg.RESP.Listen != "" {
		if respLn, err = listen(cfg.RESP.Listen, "resp", "resp_listen"); err != nil {
			ln.Close()
			return err
		}
	}
	serving := false
	defer func() {
		if !serving {
			ln.Close()
			if respLn != nil {
				respLn.Close()
			}
		}
	}()
	reg := prometheus.NewRegistry()
	tr, err := m.startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer tr.flush() // after the node's close, so that its last spans go too
	if err := m.openAudit(&cfg, log); err != nil {
		return err
	}
	if err := fitOpenFiles(&cfg, openFileLimit(), log); err != nil {
		return err
	}
	dr, err := newDoors(cfg, log)
	if err != nil {
		return &usageError{err}
	}
	nc := m.nodeConfig(cfg, newFence, reg, log)
	tr.node(&nc)
	n, err := node.Open(ctx, nc)
	if errors.Is(err, node.ErrNewFence) {
		return &usageError{err} // --new-fence where it does not belong: exit 2, as any misused flag
	}
	if err != nil {
		return err
	}
	m.onClose(n.Close)
	handler, route, tokens, err := m.handler(ctx, cfg, n, dr, reg, log)
	if tokens.pp != nil {
		defer tokens.pp.Close()
	}
	if err != nil {
		return err
	}
	rs, err := m.respServer(cfg, n.Ledger(), dr, reg, log)
	if err != nil {
		return &usageError{err}
	}
	srv := newHTTPServer(tr.handler(handler, route), cfg.MaxWait, dr, log)
	if certs != nil {
		srv.TLSConfig = certs.serverConfig()
		// A reload that changes the client CAs closes the connections
		// whose certificate no longer verifies, on every listener.
		certs.onReload(func(roots *x509.CertPool) {
			if n := dr.http.Revalidate(roots); n > 0 {
				log.Warn("tls: closed HTTP connections whose client certificate no longer verifies", "closed", n)
			}
			if rs != nil {
				rs.Revalidate(roots)
			}
		})
	}
	m.announce(cfg, ln.Addr().String(), certs != nil, n, log)
	if rs != nil {
		scheme := "redis"
		if certs != nil {
			scheme = "rediss"
		}
		fmt.Fprintf(m.Stdout, "spent RESP listening on %s://%s\n", scheme, respLn.Addr())
		log.Info("spent serving RESP", "addr", respLn.Addr().String(), "tls", certs != nil)
	}

	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	tokens.run(bg)
	serveErr := make(chan error, 1)
	serving = true
	go func() {
		if certs != nil {
			serveErr <- srv.ServeTLS(ln, "", "")
			return
		}
		serveErr <- srv.Serve(ln)
	}()
	if rs != nil {
		var tc *tls.Config
		if certs != nil {
			tc = certs.serverConfig()
		}
		respErr := serveRESP(rs, respLn, tc)
		go func() {
			if err := <-respErr; err != nil && !errors.Is(err, resp.ErrServerClosed) {
				log.Error("resp listener failed: Redis clients are no longer served; restart the server", "err", err)
			}
		}()
	}
	// The RESP listener shuts down beside the HTTP server, within the same
	// shutdown timeout, and before the node closes the store.
	respDone, httpDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(respDone)
		if rs == nil {
			return
		}
		select {
		case <-ctx.Done():
		case <-n.Lost():
		case <-httpDone:
		}
		rctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		shutdownRESP(rctx, rs, log)
	}()
	runErr := shutdown(ctx, cfg, n, srv, serveErr, log)
	close(httpDone)
	<-respDone
	stopBG()
	if err := n.Close(); err != nil {
		return errors.Join(runErr, err)
	}
	log.Info("stopped")
	return runErr
}

// announce prints the address the server listens on and logs what it
// serves, with a warning for each safety it goes without.
func (m *Main) announce(cfg serveConfig, addr string, tls bool, n *node.Node, log *slog.Logger) {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	fmt.Fprintf(m.Stdout, "spent listening on %s://%s\n", scheme, addr)
	st := n.Store()
	log.Info("spent serving", "addr", addr, "tls", tls, "client_ca", cfg.TLSClientCA != "", "data", cfg.Data, "store", st.Kind, "at", st.Where, "node", cfg.Ledger.Node,
		"namespaces", strings.Join(n.Ledger().Namespaces(), ","), "tokens", len(cfg.Tokens))
	if len(cfg.Tokens) == 0 {
		log.Warn("auth is off: no tokens are configured, so the server is loopback-only", "addr", addr)
	}
	if loopback, _ := isLoopback(cfg.Listen); !loopback && !tls {
		log.Warn("allow_plaintext: listening on a non-loopback address without TLS, so bearer tokens and results cross the network in the clear", "addr", addr)
	}
}

// listen opens a listener on addr, with an error that says what to do when
// it cannot: flag and key name the setting that gave addr ("listen", or
// "resp" and "resp_listen").
func listen(addr, flag, key string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s %s: %w: another process listens on that port; choose another with --%s (or stop it)", key, addr, err, flag)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: check the address given to --%s (or the file's %s)", key, addr, err, flag, key)
	}
	return ln, nil
}

// nodeConfig returns the configuration of the node serve runs: cfg's
// ledger, intervals and store, with m's test hooks.
func (m *Main) nodeConfig(cfg serveConfig, newFence bool, reg prometheus.Registerer, log *slog.Logger) node.Config {
	nc := node.DefaultConfig()
	nc.Dir = cfg.Data
	nc.Ledger = cfg.Ledger
	if kind, _ := storeKind(cfg.StoreURL); kind == "pebble" {
		// (A bad DSN was refused with the flags; openStore says so again.)
		nc.EmbeddedDir, _ = pebbleDir(cfg.StoreURL, cfg.Data)
	} else {
		nc.Shared = true
	}
	nc.NewFence = newFence
	nc.FenceInterval, nc.SweepInterval, nc.SweepBatch = cfg.FenceInterval, cfg.SweepInterval, cfg.SweepBatch
	nc.Registerer, nc.ProcessMetrics = reg, true
	nc.InUseHint = "stop it first, or give this server its own --data"
	nc.Logger = log
	if cfg.Ledger.Now != nil {
		nc.Now = cfg.Ledger.Now
	}
	nc.WriteFile = m.writeFile
	nc.OpenStore = func(ctx context.Context) (node.Opened, error) {
		opened, err := openStore(ctx, cfg, log)
		if err != nil {
			return node.Opened{}, err
		}
		if m.WrapStore != nil {
			opened.store = m.WrapStore(opened.store)
		}
		return node.Opened{Store: opened.store, Kind: opened.kind, Where: opened.where, Collector: opened.collector}, nil
	}
	return nc
}

// tokenServices are the server's optional token services.
type tokenServices struct {
	pp *privacypass.Server
	ec *ecash.Issuer
}

// run starts the services' background work, until ctx ends.
func (t tokenServices) run(ctx context.Context) {
	if t.pp != nil {
		go t.pp.Run(ctx)
	}
	if t.ec != nil {
		go t.ec.Run(ctx, time.Minute)
	}
}

// handler builds the server's HTTP handler over n's ledger: the API, the
// token services of cfg, the body budget and, without tokens, the loopback
// guard; and the route of a request, as the metrics count it (traces name
// their server spans with it). It returns the token services it started
// even on error, for the caller to close.
func (m *Main) handler(ctx context.Context, cfg serveConfig, n *node.Node, dr doors, reg *prometheus.Registry, log *slog.Logger) (http.Handler, func(*http.Request) string, tokenServices, error) {
	var ts tokenServices
	hc := sphttp.DefaultConfig()
	hc.Tokens = cfg.Tokens
	if cfg.MaxBody > 0 {
		hc.MaxBody = cfg.MaxBody
	}
	hc.Registerer = reg
	hc.Gatherer = reg
	hc.Logger = log
	hc.Ready = n.Ready
	hc.MaxWait = cfg.MaxWait
	hc.Throttle, hc.MaxAuthFailures = dr.throttle, dr.limits.MaxAuthFailures
	hc.Answers = dr.budget
	api, err := sphttp.NewServer(n.Ledger(), hc)
	if err != nil {
		return nil, nil, ts, fmt.Errorf("http server: %w", err)
	}
	var handler http.Handler = api
	var mux *http.ServeMux // the routes beside the API's, if any
	route := func(r *http.Request) string { return api.Route(mux, r) }
	if cfg.Privacypass != nil || cfg.Ecash != nil {
		mux = http.NewServeMux()
		mux.Handle("/", api)
		if cfg.Privacypass != nil {
			if ts.pp, err = m.startPrivacypass(ctx, cfg, n.Ledger(), log); err != nil {
				return nil, nil, ts, err
			}
			ts.pp.Register(mux)
			if err := reg.Register(ts.pp.Metrics()); err != nil {
				return nil, nil, ts, fmt.Errorf("privacypass: metrics: %w", err)
			}
		}
		if cfg.Ecash != nil {
			if ts.ec, err = m.startEcash(cfg, n.Secret(), n.Ledger(), log); err != nil {
				return nil, nil, ts, err
			}
			ts.ec.Register(mux)
			if err := reg.Register(ts.ec.Metrics()); err != nil {
				return nil, nil, ts, fmt.Errorf("ecash: metrics: %w", err)
			}
		}
		handler = api.Instrument(mux) // the routes beside the API in its metrics
	}

	// The operator's page at /ui/ (package console), under the same tokens.
	if handler, err = m.withConsole(ctx, cfg, n, dr, reg, log, handler); err != nil {
		return nil, nil, ts, err
	}

	// Every route shares one budget of bodies in flight; without tokens,
	// only requests addressed to a loopback name are served (see
	// sphttp.LoopbackOnly).
	if handler, err = sphttp.LimitBodiesWith(handler, sphttp.BodyLimits{Budget: dr.budget, MaxBody: cfg.maxBody(),
		Unauthenticated: dr.unauth, Authorized: api.Authorized}); err != nil {
		return nil, nil, ts, err
	}
	if len(cfg.Tokens) == 0 {
		handler = sphttp.LoopbackOnly(handler)
	}
	// The guards' refusals, and the console's pages, in the request
	// metrics too.
	handler = api.InstrumentOuter(mux, handler)
	if m.WrapHandler != nil {
		handler = m.WrapHandler(handler)
	}
	return handler, route, ts, nil
}

// newHTTPServer returns the server's http.Server over handler, under the
// door policy: its connections admitted by dr.http (max_clients and the
// unauthenticated share), a request's header within auth_timeout and the
// whole request within read_timeout, idle connections closed after
// idle_timeout. Its write timeout leaves a claim that waits maxWait
// (max_wait) time to be answered: it is write_timeout, or maxWait and
// writeWaitMargin when longer.
func newHTTPServer(handler http.Handler, maxWait time.Duration, dr doors, log *slog.Logger) *http.Server {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: dr.limits.AuthTimeout,
		ReadTimeout:       dr.limits.ReadTimeout,
		WriteTimeout:      max(dr.limits.WriteTimeout, maxWait+writeWaitMargin),
		IdleTimeout:       dr.limits.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// Requests run on a context of their own: cancelling ctx starts the
		// shutdown, which lets in-flight claims finish rather than cancelling
		// them.
		BaseContext: func(net.Listener) context.Context { return context.Background() },
	}
	dr.http.Serve(srv)
	return srv
}

// shutdown waits until ctx is cancelled or srv fails on its own, then
// drains n and shuts srv down, letting in-flight requests finish within
// the shutdown timeout. It returns srv's failure, if any.
func shutdown(ctx context.Context, cfg serveConfig, n *node.Node, srv *http.Server, serveErr <-chan error, log *slog.Logger) error {
	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests", "timeout", cfg.ShutdownTimeout)
	case err := <-serveErr:
		// Serve failed on its own; shut down what it left running.
		runErr = fmt.Errorf("http server: %w", err)
	case <-n.Lost():
		// Another server took this one's node on the shared store: stop
		// (fail closed) rather than write seqs of a node two servers use.
		log.Error("shutting down: the node lease is lost", "timeout", cfg.ShutdownTimeout)
		runErr = n.LostErr()
	}
	n.Drain()
	// Waiting claims answer in_progress now rather than hold the shutdown
	// up for their whole wait.
	n.Ledger().StopWaiting()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("graceful shutdown did not finish in time: closing the remaining connections", "err", err)
		srv.Close()
	}
	if runErr == nil {
		<-serveErr // http.ErrServerClosed, once Shutdown has closed the listener
	}
	return runErr
}

// Where the privacypass section keeps its files in the data directory.
const (
	kekFile        = "kek"
	privacypassDir = "privacypass-keys"
	ecashDir       = "ecash-keys"
)

// loadKEK returns the key-encryption key of the issuers' keys: SPENT_KEK
// (base64 of 32 bytes), or, when that is unset, DATA/kek, generated on first
// use with a warning.
func (m *Main) loadKEK(cfg serveConfig, log *slog.Logger) ([]byte, error) {
	if v := m.getenv("SPENT_KEK"); v != "" {
		k, err := privacypass.ParseKEK(v)
		if err != nil {
			return nil, fmt.Errorf("SPENT_KEK: %w", err)
		}
		return k, nil
	}
	path := filepath.Join(cfg.Data, kekFile)
	k, created, err := privacypass.LoadOrCreateKEK(path)
	if err != nil {
		return nil, fmt.Errorf("key-encryption key: %w", err)
	}
	if created {
		log.Warn("SPENT_KEK is unset, so a key-encryption key was generated beside the keys it protects; set SPENT_KEK to keep the keys safe from a copy of the data directory", "path", path)
	} else {
		log.Warn("SPENT_KEK is unset: using the key-encryption key in the data directory", "path", path)
	}
	return k, nil
}

// startEcash builds the value-token issuer of cfg's [ecash] section. Its
// challenge secret is derived from the ledger secret, so that servers sharing
// a store (and so the secret) accept each other's challenges.
func (m *Main) startEcash(cfg serveConfig, secret []byte, ledger *spent.Ledger, log *slog.Logger) (*ecash.Issuer, error) {
	kek, err := m.loadKEK(cfg, log)
	if err != nil {
		return nil, err
	}
	ec := *cfg.Ecash
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("spent: ecash challenge secret v1"))
	ec.Secret = mac.Sum(nil)
	ec.Logger = log.With("component", "ecash")
	keys, err := ecash.OpenKeys(ec.KeysConfig(filepath.Join(cfg.Data, ecashDir), kek))
	if err != nil {
		return nil, fmt.Errorf("ecash: %w", err)
	}
	is, err := ecash.New(ec, ledger, keys)
	if err != nil {
		return nil, fmt.Errorf("ecash: %w", err)
	}
	log.Info("ecash: value-token issuer on", "issuer_name", ec.IssuerName, "denominations", fmt.Sprint(ec.Denominations))
	return is, nil
}

// startPrivacypass builds the Privacy Pass issuer and redemption endpoint of
// cfg's [privacypass] section. The key-encryption key comes from SPENT_KEK
// (base64 of 32 bytes), or, when that is unset, from DATA/kek, generated on
// first use with a warning.
func (m *Main) startPrivacypass(ctx context.Context, cfg serveConfig, ledger *spent.Ledger, log *slog.Logger) (*privacypass.Server, error) {
	kek, err := m.loadKEK(cfg, log)
	if err != nil {
		return nil, err
	}
	pp, err := privacypass.New(ctx, *cfg.Privacypass, ledger, filepath.Join(cfg.Data, privacypassDir), kek, log.With("component", "privacypass"))
	if err != nil {
		return nil, fmt.Errorf("privacypass: %w", err)
	}
	log.Info("privacypass: issuer and redemption on", "issuer_name", cfg.Privacypass.IssuerName,
		"directory", privacypass.DirectoryPath, "token_request", cfg.Privacypass.RequestPath, "redeem", privacypass.RedeemPath)
	return pp, nil
}
