package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/resp"
)

// fileRESP is the [resp] section: the RESP listener's key prefixes and
// limits (its address is the top-level resp_listen, or --resp).
type fileRESP struct {
	// Namespaces maps key prefixes to namespaces; empty maps "NAME:" to
	// each namespace NAME.
	Namespaces  map[string]string   `toml:"namespaces"`
	Rollback    []string            `toml:"rollback"`
	MinExpiry   map[string]duration `toml:"min_expiry"`
	MaxArgs     int64               `toml:"max_args"`
	MaxBulk     int64               `toml:"max_bulk"`
	MaxPipeline int64               `toml:"max_pipeline"`
	MaxClients  int64               `toml:"max_clients"`
	MaxReply    int64               `toml:"max_reply"`
	MaxRollback int64               `toml:"max_rollback_bytes"`
}

// respConfig is the RESP listener's part of serveConfig.
type respConfig struct {
	// Listen is the address; empty means no RESP listener.
	Listen string
	// Namespaces maps key prefixes to namespaces; nil means "NAME:" for
	// each namespace NAME.
	Namespaces map[string]string
	// Rollback lists the prefixes whose SET … NX can be rolled back by DEL.
	Rollback []string
	// MinExpiry is the shortest life of a record of a prefix: a shorter EX
	// is raised to it.
	MinExpiry map[string]time.Duration
	// The listener's limits; zero means the resp package's defaults
	// (MaxClients: the top-level max_clients).
	MaxArgs, MaxBulk, MaxPipeline, MaxClients, MaxReply int
	// MaxRollbackBytes is the budget of the values waiting for their
	// rollback window; zero means the resp package's default.
	MaxRollbackBytes int64
}

// apply checks the [resp] section against the namespaces and sets it in cfg.
func (r fileRESP) apply(cfg *serveConfig) error {
	for _, l := range []struct {
		key      string
		v        int64
		min, max int64
	}{{"max_args", r.MaxArgs, 4, 1 << 16}, {"max_bulk", r.MaxBulk, spent.MaxKeyLen, 1 << 30},
		{"max_pipeline", r.MaxPipeline, 1, spent.MaxBatch}, {"max_clients", r.MaxClients, 1, 1 << 20},
		{"max_reply", r.MaxReply, 1 << 10, 1 << 30}, {"max_rollback_bytes", r.MaxRollback, 1 << 10, 1 << 40}} {
		if l.v != 0 && (l.v < l.min || l.v > l.max) {
			return fmt.Errorf("[resp] %s = %d: want %d to %d (or 0, or leave it out, for the default)", l.key, l.v, l.min, l.max)
		}
	}
	for prefix, ns := range r.Namespaces {
		if prefix == "" {
			return fmt.Errorf("[resp] namespaces: an empty prefix would map every key; give each namespace a prefix such as %q", ns+":")
		}
		if _, ok := cfg.Ledger.Namespaces[ns]; !ok {
			return fmt.Errorf("[resp] namespaces: prefix %q: namespace %q is not configured (have %s)", prefix, ns, strings.Join(sortedKeys(cfg.Ledger.Namespaces), ", "))
		}
	}
	cfg.RESP.Namespaces, cfg.RESP.Rollback = r.Namespaces, r.Rollback
	prefixes := cfg.respPrefixes()
	for _, p := range r.Rollback {
		ns, ok := prefixes[p]
		if !ok {
			return fmt.Errorf("[resp] rollback: prefix %q is not mapped to a namespace (mapped: %s)", p, strings.Join(sortedKeys(prefixes), ", "))
		}
		if cfg.Ledger.Namespaces[ns].OnLeaseExpiry != spent.LeaseExpiryHold {
			return fmt.Errorf("[resp] rollback: prefix %q: namespace %q retakes expired leases, so a spend whose completion a crash cut short would become free again; set on_lease_expiry = \"hold\" in [namespaces.%s]", p, ns, ns)
		}
	}
	cfg.RESP.MinExpiry = nil
	for p, d := range r.MinExpiry {
		ns, ok := prefixes[p]
		if !ok {
			return fmt.Errorf("[resp] min_expiry: prefix %q is not mapped to a namespace (mapped: %s)", p, strings.Join(sortedKeys(prefixes), ", "))
		}
		if ret := cfg.Ledger.Namespaces[ns].Retention; time.Duration(d) <= 0 || time.Duration(d) > ret {
			return fmt.Errorf("[resp] min_expiry: prefix %q: %v: want more than 0 and at most namespace %q's retention, %v", p, time.Duration(d), ns, ret)
		}
		if cfg.RESP.MinExpiry == nil {
			cfg.RESP.MinExpiry = map[string]time.Duration{}
		}
		cfg.RESP.MinExpiry[p] = time.Duration(d)
	}
	cfg.RESP.MaxArgs, cfg.RESP.MaxBulk = int(r.MaxArgs), int(r.MaxBulk)
	cfg.RESP.MaxPipeline, cfg.RESP.MaxClients = int(r.MaxPipeline), int(r.MaxClients)
	cfg.RESP.MaxReply, cfg.RESP.MaxRollbackBytes = int(r.MaxReply), r.MaxRollback
	return nil
}

// respPrefixes returns the prefix map in force: the file's, or "NAME:" for
// each namespace.
func (cfg *serveConfig) respPrefixes() map[string]string {
	if cfg.RESP.Namespaces != nil {
		return cfg.RESP.Namespaces
	}
	m := make(map[string]string, len(cfg.Ledger.Namespaces))
	for ns := range cfg.Ledger.Namespaces {
		m[ns+":"] = ns
	}
	return m
}

// respServer returns the RESP listener's server over l, or nil when no
// RESP address is configured. It follows the server's door policy (d),
// draws on its budget of bytes in flight and shares its sign-in throttle.
func (m *Main) respServer(cfg serveConfig, l *spent.Ledger, d doors, reg prometheus.Registerer, log *slog.Logger) (*resp.Server, error) {
	if cfg.RESP.Listen == "" {
		return nil, nil
	}
	rc := resp.DefaultConfig()
	prefixes := cfg.respPrefixes()
	names := make([]string, 0, len(prefixes))
	for p := range prefixes {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		ns := prefixes[p]
		pr := resp.Prefix{Prefix: p, Namespace: ns}
		for _, r := range cfg.RESP.Rollback {
			pr.Rollback = pr.Rollback || r == p
		}
		if cfg.Privacypass != nil && ns == cfg.Privacypass.Namespace {
			// A token is presentable for epoch + grace (+ skew): its nonce
			// is never remembered for less, whatever EX the relay asks.
			pol, _ := l.Policy(ns)
			pr.MinExpiry = pol.Retention
		}
		if d, ok := cfg.RESP.MinExpiry[p]; ok {
			pr.MinExpiry = max(pr.MinExpiry, d)
		}
		rc.Prefixes = append(rc.Prefixes, pr)
	}
	rc.Tokens = cfg.Tokens
	for _, v := range []struct {
		dst *int
		src int
	}{{&rc.MaxArgs, cfg.RESP.MaxArgs}, {&rc.MaxBulk, cfg.RESP.MaxBulk},
		{&rc.MaxPipeline, cfg.RESP.MaxPipeline}, {&rc.MaxClients, cfg.RESP.MaxClients}} {
		if v.src > 0 {
			*v.dst = v.src
		}
	}
	if rc.MaxBulk == 0 {
		rc.MaxBulk = cfg.Ledger.MaxResult + 1024
	}
	if cfg.RESP.MaxReply > 0 {
		rc.MaxReply = cfg.RESP.MaxReply
	}
	if cfg.RESP.MaxRollbackBytes > 0 {
		rc.MaxRollbackBytes = cfg.RESP.MaxRollbackBytes
	}
	rc.Limits, rc.Budget, rc.Throttle = cfg.Limits, d.budget, d.throttle
	rc.Registerer, rc.Logger = reg, log
	rc.Version = moduleVersion(debug.ReadBuildInfo())
	s, err := resp.NewServer(l, rc)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// serveRESP serves s on ln (with TLS when tc is set) until it is shut down.
func serveRESP(s *resp.Server, ln net.Listener, tc *tls.Config) <-chan error {
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	return errc
}

// shutdownRESP lets the RESP listener's connections finish, then completes
// its rollback windows, within ctx.
func shutdownRESP(ctx context.Context, s *resp.Server, log *slog.Logger) {
	if s == nil {
		return
	}
	if err := s.Shutdown(ctx); err != nil {
		log.Warn("resp: graceful shutdown did not finish in time", "err", err)
	}
}
