package etcd_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"strings"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/internal/etcdtest"
)

// This example runs against the test cluster that etcdtest starts (three
// etcd members built from go.mod); in production the DSN lists your
// members, say etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379/spent.
func ExampleOpen() {
	endpoints, err := etcdtest.SharedEndpoints()
	if err != nil {
		log.Fatal(err)
	}
	prefix := "/example-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	opts, err := etcd.ParseURL("etcd://" + strings.Join(endpoints, ",") + prefix)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	store, err := etcd.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

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
