package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

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

// openStore opens the store cfg names. Stores shared by several servers are
// the caller's to check with checkSecret.
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

// secretCheck is where every server records (a MAC of) its secret in the
// store, so that a server started with another secret refuses to run: two
// secrets over one store would hash one key two ways and answer it fresh
// twice.
var secretCheckKey = func() spent.Hash {
	sum := sha256.Sum256([]byte("spent: secret check key v1"))
	var h spent.Hash
	copy(h[:], sum[:])
	return h
}()

// secretCheckLife is how long the check record lives: for the store's life.
const secretCheckLife = 100 * 365 * 24 * time.Hour

// errSecretMismatch says that the store was set up with another secret.
var errSecretMismatch = errors.New("this store was set up with another secret")

// secretMAC is what the secret check record holds: a MAC of the secret,
// which does not reveal it.
func secretMAC(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("spent: secret check v1"))
	return m.Sum(nil)
}

// findSecretCheck reports whether the store holds a secret check record,
// without writing one: a store that holds one holds records. It returns
// errSecretMismatch when the record was made with another secret.
func findSecretCheck(ctx context.Context, store spent.Store, secret []byte, now time.Time) (bool, error) {
	rec, err := store.Get(ctx, secretCheckKey, now)
	if errors.Is(err, spent.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("secret check: %w", err)
	}
	if !hmac.Equal(rec.Result, secretMAC(secret)) {
		return true, errSecretMismatch
	}
	return true, nil
}

// checkSecret records a MAC of secret in the store on first start, and on
// every later start checks that the secret is the same. It reports whether
// it created the record (the store held none: it was empty, or set up by a
// server older than the check). The MAC does not reveal the secret.
func checkSecret(ctx context.Context, store spent.Store, secret []byte, node uint32, now time.Time) (created bool, err error) {
	mac := secretMAC(secret)
	first, err := store.ReserveSeq(ctx, node, 1)
	if err != nil {
		return false, fmt.Errorf("secret check: %w", err)
	}
	rec := spent.Record{
		Namespace: "spent.meta", Key: secretCheckKey, FirstSeen: now, Place: "secret-check",
		State: spent.StateComplete, Result: mac, ExpiresAt: now.Add(secretCheckLife),
		Seq: spent.Seq{Node: node, Counter: first},
	}
	res, err := store.Claim(ctx, spent.ClaimOp{Record: rec, Now: now})
	if err != nil {
		return false, fmt.Errorf("secret check: %w", err)
	}
	if !hmac.Equal(res.Record.Result, mac) {
		return false, errSecretMismatch
	}
	return res.Inserted, nil
}
