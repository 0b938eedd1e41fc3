package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/dsn"
	"github.com/spentledger/spent/pebble"
)

// openedStore is the store a server runs on, with what serve needs to know
// about it.
type openedStore struct {
	store spent.Store
	// kind names the engine: pebble, redis, redis-cluster, postgres, etcd.
	kind string
	// where says where the store is, for the log, without credentials.
	where string
	// collector exports engine metrics, or is nil.
	collector prometheus.Collector
}

// storeSchemes lists the DSN schemes --store takes.
const storeSchemes = "pebble:///path, redis://host:port, redis-cluster://host:port,host:port, postgres://..., etcd://host:port,host:port,host:port"

// storeKind returns the engine a DSN names, checking its scheme. An empty DSN
// is the embedded store in the data directory.
func storeKind(s string) (string, error) {
	if s == "" {
		return "pebble", nil
	}
	scheme, _, ok := strings.Cut(s, "://")
	if !ok {
		return "", fmt.Errorf("store %q: want a URL (%s)", dsn.Redact(s), storeSchemes)
	}
	switch scheme {
	case "pebble":
		if _, err := pebbleDir(s, "."); err != nil {
			return "", err
		}
		return scheme, nil
	case "redis", "rediss", "redis-cluster", "rediss-cluster", "postgres", "postgresql", "etcd", "etcds":
		return scheme, nil
	}
	return "", fmt.Errorf("store %q: unknown scheme %q (want %s)", dsn.Redact(s), scheme, storeSchemes)
}

// pebbleDir returns the directory a pebble DSN names, or the default one in
// the data directory.
func pebbleDir(dsn, data string) (string, error) {
	if dsn == "" {
		return filepath.Join(data, storeDir), nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	if u.Host != "" || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("store %q: write a pebble store as pebble:///absolute/path or pebble:relative/path, with no host or query", dsn)
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	if p == "" {
		return "", fmt.Errorf("store %q: the path is empty", dsn)
	}
	return filepath.Clean(p), nil
}

// openStore opens the store cfg names. The node (package node) checks the
// store's recorded secret and node number once it is open.
func openStore(ctx context.Context, cfg serveConfig, log *slog.Logger) (*openedStore, error) {
	kind, err := storeKind(cfg.StoreURL)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "pebble":
		dir, err := pebbleDir(cfg.StoreURL, cfg.Data)
		if err != nil {
			return nil, err
		}
		opts := cfg.Store
		opts.Logger = log.With("component", "pebble")
		s, err := pebble.Open(dir, opts)
		if err != nil {
			return nil, fmt.Errorf("opening store: %w", err)
		}
		return &openedStore{store: s, kind: kind, where: dir, collector: newStoreCollector(s)}, nil
	}
	return openSharedStore(ctx, kind, cfg, log)
}
