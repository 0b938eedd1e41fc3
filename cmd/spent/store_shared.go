package main

import (
	"context"
	"fmt"
	"log/slog"
)

// openSharedStore opens a store shared by several servers.
func openSharedStore(ctx context.Context, kind string, cfg serveConfig, log *slog.Logger) (*openedStore, error) {
	return nil, fmt.Errorf("store %q: the %s store is not wired yet", redactDSN(cfg.StoreURL), kind)
}
