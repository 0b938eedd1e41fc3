package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/internal/dsn"
	"github.com/spentledger/spent/postgres"
	"github.com/spentledger/spent/redis"
)

// openSharedStore opens a store shared by several servers: Redis (one server
// or a cluster), PostgreSQL or etcd. Each checks at Open that its engine is
// durable and refuses otherwise, unless cfg.AllowNonDurable.
func openSharedStore(ctx context.Context, kind string, cfg serveConfig, log *slog.Logger) (*openedStore, error) {
	where := dsn.Redact(cfg.StoreURL)
	switch kind {
	case "redis", "rediss", "redis-cluster", "rediss-cluster":
		opts, err := redis.ParseURL(cfg.StoreURL)
		if err != nil {
			return nil, err
		}
		opts.AllowNonDurable = opts.AllowNonDurable || cfg.AllowNonDurable
		opts.Logger = log.With("component", "redis")
		s, err := redis.Open(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("opening store %s: %w", where, err)
		}
		if opts.Cluster {
			kind = "redis-cluster"
		}
		return &openedStore{store: s, kind: kind, where: strings.Join(opts.Addrs, ",")}, nil
	case "postgres", "postgresql":
		opts, err := postgres.ParseURL(cfg.StoreURL)
		if err != nil {
			return nil, err
		}
		opts.AllowNonDurable = opts.AllowNonDurable || cfg.AllowNonDurable
		opts.Logger = log.With("component", "postgres")
		s, err := postgres.Open(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("opening store %s: %w", where, err)
		}
		return &openedStore{store: s, kind: "postgres", where: where}, nil
	case "etcd", "etcds":
		opts, err := etcd.ParseURL(cfg.StoreURL)
		if err != nil {
			return nil, err
		}
		opts.AllowNonDurable = opts.AllowNonDurable || cfg.AllowNonDurable
		opts.Logger = log.With("component", "etcd")
		s, err := etcd.Open(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("opening store %s: %w", where, err)
		}
		return &openedStore{store: s, kind: "etcd", where: strings.Join(opts.Endpoints, ",")}, nil
	}
	return nil, fmt.Errorf("store %q: unknown scheme %q (want %s)", where, kind, storeSchemes)
}
