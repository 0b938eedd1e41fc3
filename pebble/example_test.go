package pebble_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "spent-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := pebble.Open(dir, pebble.DefaultOptions())
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx := context.Background()
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("an example secret of at least 32 bytes")
	cfg.Namespaces = map[string]spent.Policy{"tickets": {
		Mode: spent.ModeRefuse, Retention: 30 * 24 * time.Hour, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold,
	}}
	ledger, err := spent.NewLedger(ctx, store, cfg)
	if err != nil {
		log.Fatal(err)
	}

	for _, gate := range []string{"north", "south"} {
		res, err := ledger.Claim(ctx, spent.Claim{Namespace: "tickets", Key: "ticket-0042", Place: gate, Result: []byte{}})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(gate, res.Outcome, "first seen at", res.Record.Place)
	}
	// Output:
	// north fresh first seen at north
	// south refused first seen at north
}
