package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent/console"
	"github.com/spentledger/spent/node"
)

// withConsole returns h with the operator's page (package console) served
// at /ui/ beside it, under the same tokens, and starts the page's sampler of
// the claim counters in reg, until ctx ends. Every other path goes to h
// unchanged.
func (m *Main) withConsole(ctx context.Context, cfg serveConfig, n *node.Node, dr doors, reg *prometheus.Registry, log *slog.Logger, h http.Handler) (http.Handler, error) {
	cc := console.DefaultConfig(n.Ledger())
	cc.Tokens = cfg.Tokens
	cc.Gatherer = reg
	cc.Secure = cfg.TLSCert != ""
	cc.Label = fmt.Sprintf("node %d · %s store", cfg.Ledger.Node, n.Store().Kind)
	cc.Logger = log.With("component", "console")
	// Refused logins count with the other doors' refused sign-ins.
	cc.Throttle = dr.throttle
	if cfg.Ledger.Now != nil {
		cc.Now = cfg.Ledger.Now
	}
	c, err := console.New(cc)
	if err != nil {
		return nil, err
	}
	go c.Run(ctx)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "/ui" || strings.HasPrefix(p, console.Prefix) {
			if p == "/ui" {
				http.Redirect(w, r, console.Prefix, http.StatusMovedPermanently)
				return
			}
			c.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}
