package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/node"
	"github.com/spentledger/spent/pebble"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "node-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	cfg := node.DefaultConfig()
	cfg.Dir = dir
	cfg.EmbeddedDir = filepath.Join(dir, "pebble")
	cfg.Ledger.Namespaces = map[string]spent.Policy{"orders": spent.DefaultPolicy()}
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.OpenStore = func(context.Context) (node.Opened, error) {
		s, err := pebble.Open(cfg.EmbeddedDir, pebble.DefaultOptions())
		return node.Opened{Store: s, Kind: "pebble", Where: cfg.EmbeddedDir}, err
	}
	ctx := context.Background()
	n, err := node.Open(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		res, err := n.Ledger().Claim(ctx, spent.Claim{Namespace: "orders", Key: "order-1", Result: []byte("paid")})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Outcome, string(res.Record.Result))
	}
	fmt.Println("ready:", n.Ready(ctx))
	if err := n.Close(); err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{node.SecretFile, node.FenceFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			fmt.Println("kept:", name)
		}
	}
	// Output:
	// fresh paid
	// replayed paid
	// ready: <nil>
	// kept: secret
	// kept: fence
}
