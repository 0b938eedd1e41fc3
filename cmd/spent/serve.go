package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/ecash"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/internal/atomicfile"
	"github.com/spentledger/spent/privacypass"
)

// Timeouts of the HTTP server. Claims are small and fast; these only bound
// clients that stall.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
)

func (m *Main) serveCommand() *cobra.Command {
	var configPath, listen, data, storeURL string
	var allowNonDurable, newFence bool
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
server joining a shared store, or a fence known to be lost).`,
		Example: `  spent serve
  spent serve --config spent.toml --listen 0.0.0.0:7070 --data /var/lib/spent
  spent serve --store postgres://spent@db.internal/spent`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg := defaultServeConfig()
			if configPath != "" {
				var err error
				if cfg, err = loadConfig(configPath, m.getenv); err != nil {
					return &usageError{err}
				}
			}
			if c.Flags().Changed("listen") {
				cfg.Listen = listen
			}
			if c.Flags().Changed("data") {
				cfg.Data = data
			}
			if c.Flags().Changed("store") {
				if _, err := storeKind(storeURL); err != nil {
					return &usageError{err}
				}
				cfg.StoreURL = storeURL
			}
			if c.Flags().Changed("allow-non-durable") {
				cfg.AllowNonDurable = allowNonDurable
			}
			if err := cfg.validate(); err != nil {
				return &usageError{err}
			}
			if err := cfg.checkListen(); err != nil {
				return &usageError{err}
			}
			m.run = func(ctx context.Context) error { return m.serve(ctx, cfg, newFence) }
			return nil
		},
	}
	f := c.Flags()
	f.StringVarP(&configPath, "config", "c", "", "TOML configuration `file` (see docs/configuration.md)")
	f.StringVar(&listen, "listen", defaultListen, "TCP `address` to listen on (overrides the file's listen)")
	f.StringVar(&data, "data", defaultData, "data `directory`: secret and embedded store (overrides the file's data)")
	f.StringVar(&storeURL, "store", "", "store `DSN`: "+storeSchemes+" (default: pebble in DATA/"+storeDir+"; overrides the file's [store] url)")
	f.BoolVar(&allowNonDurable, "allow-non-durable", false, "start a shared store even when its engine may lose acknowledged writes (logs what can be lost)")
	f.BoolVar(&newFence, "new-fence", false, "first start of a data directory without a fence on a store that already holds records: the fence begins now (refused once DATA/fence exists)")
	return c
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
// timeout), the sweeper stops, and the store closes last.
func (m *Main) serve(ctx context.Context, cfg serveConfig, newFence bool) error {
	log := newLogger(m.Stderr, cfg)

	// The lock comes first: nothing in the data directory is touched while
	// another process uses it.
	lock, err := lockDataDir(cfg.Data, true, "stop it first, or give this server its own --data")
	if err != nil {
		return err
	}
	m.onClose(lock.Close)
	removeStaleFiles(cfg.Data, log)

	kind, err := storeKind(cfg.StoreURL)
	if err != nil {
		return err
	}
	var embeddedDir string
	storeHadFiles := false
	if kind == "pebble" {
		if embeddedDir, err = pebbleDir(cfg.StoreURL, cfg.Data); err != nil {
			return err
		}
		ents, _ := os.ReadDir(embeddedDir)
		storeHadFiles = len(ents) > 0
	}
	secret, created, err := openSecret(cfg.Data, filepath.Join(cfg.Data, storeDir), rand.Reader, m.writeFile)
	if err != nil {
		return err
	}
	if created {
		log.Info("generated a new secret: this data directory starts a new epoch", "path", filepath.Join(cfg.Data, secretFile))
	}
	lc := cfg.Ledger
	lc.Secret = secret
	fst := &fenceStart{
		data: cfg.Data, shared: kind != "pebble", storeHadFiles: storeHadFiles, newFence: newFence, secret: secret,
		node: lc.Node, interval: cfg.FenceInterval, now: lc.Now, rnd: rand.Reader, log: log, writeFile: m.writeFile,
	}
	fstate, fenceMissing, err := fst.loadFence()
	if err != nil {
		return err
	}

	opened, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	if m.WrapStore != nil {
		opened.store = m.WrapStore(opened.store)
	}
	store := opened.store
	closeStore := sync.OnceValue(store.Close)
	m.onClose(closeStore)

	fst.store = store
	fnc, err := fst.open(ctx, fstate, fenceMissing, opened.kind+" at "+opened.where)
	if err != nil {
		if errors.Is(err, errSecretMismatch) {
			return fmt.Errorf("%w: servers sharing a store must share %s (copy it from a server already running on this store)",
				err, filepath.Join(cfg.Data, secretFile))
		}
		return err
	}
	leaseHeld := true
	defer func() {
		if leaseHeld {
			fnc.close(context.Background())
		}
	}()
	ledger, err := spent.NewLedger(ctx, store, lc)
	if err != nil {
		return fmt.Errorf("starting ledger: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	if opened.collector != nil {
		reg.MustRegister(opened.collector)
	}
	sw := newSweeper(ledger, cfg.SweepInterval, cfg.SweepBatch, log, reg)

	var stopping atomic.Bool
	hc := sphttp.DefaultConfig()
	hc.Tokens = cfg.Tokens
	if cfg.MaxBody > 0 {
		hc.MaxBody = cfg.MaxBody
	}
	hc.Registerer = reg
	hc.Gatherer = reg
	hc.Logger = log
	hc.Ready = func(ctx context.Context) error {
		if stopping.Load() {
			return errors.New("shutting down")
		}
		// A read of a key nobody holds proves the store answers.
		_, err := store.Get(ctx, spent.Hash{}, ledger.Now())
		if err != nil && !errors.Is(err, spent.ErrNotFound) {
			return err
		}
		return nil
	}
	api, err := sphttp.NewServer(ledger, hc)
	if err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	var handler http.Handler = api
	var pp *privacypass.Server
	var ec *ecash.Issuer
	if cfg.Privacypass != nil || cfg.Ecash != nil {
		mux := http.NewServeMux()
		mux.Handle("/", api)
		if cfg.Privacypass != nil {
			if pp, err = m.startPrivacypass(ctx, cfg, ledger, log); err != nil {
				return err
			}
			defer pp.Close()
			pp.Register(mux)
		}
		if cfg.Ecash != nil {
			if ec, err = m.startEcash(cfg, secret, ledger, log); err != nil {
				return err
			}
			ec.Register(mux)
		}
		handler = mux
	}

	// Every route shares one budget of bodies in flight; without tokens,
	// only requests addressed to a loopback name are served (see
	// sphttp.LoopbackOnly).
	if handler, err = sphttp.LimitBodies(handler, cfg.MaxBodies, cfg.maxBody()); err != nil {
		return err
	}
	if len(cfg.Tokens) == 0 {
		handler = sphttp.LoopbackOnly(handler)
	}
	if m.WrapHandler != nil {
		handler = m.WrapHandler(handler)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// Requests run on a context of their own: cancelling ctx starts the
		// shutdown, which lets in-flight claims finish rather than cancelling
		// them.
		BaseContext: func(net.Listener) context.Context { return context.Background() },
	}

	addr := ln.Addr().String()
	fmt.Fprintf(m.Stdout, "spent listening on http://%s\n", addr)
	log.Info("spent serving", "addr", addr, "data", cfg.Data, "store", opened.kind, "at", opened.where, "node", lc.Node,
		"namespaces", strings.Join(ledger.Namespaces(), ","), "tokens", len(cfg.Tokens))
	if len(cfg.Tokens) == 0 {
		log.Warn("auth is off: no tokens are configured, so the server is loopback-only", "addr", addr)
	}

	sweepCtx, stopSweep := context.WithCancel(context.Background())
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		sw.run(sweepCtx)
	}()
	if pp != nil {
		go pp.Run(sweepCtx)
	}
	if ec != nil {
		go ec.Run(sweepCtx, time.Minute)
	}
	fenceDone := make(chan struct{})
	go func() {
		defer close(fenceDone)
		fnc.run(sweepCtx, cfg.FenceInterval)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests", "timeout", cfg.ShutdownTimeout)
	case err := <-serveErr:
		// Serve failed on its own; shut down what it left running.
		runErr = fmt.Errorf("http server: %w", err)
	}
	stopping.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("graceful shutdown did not finish in time: closing the remaining connections", "err", err)
		srv.Close()
	}
	if runErr == nil {
		<-serveErr // http.ErrServerClosed, once Shutdown has closed the listener
	}
	stopSweep()
	<-sweepDone
	<-fenceDone
	// Every request has finished: a last canary covers all they wrote.
	if err := fnc.advance(context.Background()); err != nil {
		log.Warn("fence: last advance before stopping", "err", err)
	}
	fnc.close(context.Background())
	leaseHeld = false
	if err := closeStore(); err != nil {
		log.Error("closing store", "err", err)
		return errors.Join(runErr, fmt.Errorf("closing store: %w", err))
	}
	log.Info("stopped")
	return runErr
}

// removeStaleFiles removes the temporary files that a write killed in the
// middle left in the data directory, and logs each.
func removeStaleFiles(dir string, log *slog.Logger) {
	removed, err := atomicfile.RemoveStale(dir)
	for _, p := range removed {
		log.Info("removed a temporary file left by an interrupted write", "path", p)
	}
	if err != nil {
		log.Warn("removing temporary files left by interrupted writes", "err", err)
	}
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
