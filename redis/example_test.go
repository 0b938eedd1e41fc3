package redis_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/redistest"
	"github.com/spentledger/spent/redis"
)

// ExampleOpen claims one ticket at two gates over a Redis server. It needs
// a durable server (appendonly yes, appendfsync always), so it is not run by
// go test as an example; TestExampleOpen runs it on a server of its own and
// checks its output.
func ExampleOpen() {
	ctx := context.Background()
	opts, err := redis.ParseURL(os.Getenv("SPENT_REDIS_URL")) // redis://host:port, or redis-cluster://...
	if err != nil {
		log.Fatal(err)
	}
	store, err := redis.Open(ctx, opts)
	if err != nil {
		log.Fatal(err) // for instance, redis: server is not durable: ... set appendfsync always
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
}

// TestExampleOpen runs ExampleOpen on a durable server started for it.
func TestExampleOpen(t *testing.T) {
	srv := redistest.Start(t)
	t.Setenv("SPENT_REDIS_URL", srv.URL()+"?prefix=example:")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	ExampleOpen()
	os.Stdout = stdout
	w.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	want := "north fresh first seen at north\nsouth refused first seen at north\n"
	if string(out) != want {
		t.Fatalf("ExampleOpen printed:\n%s\nwant:\n%s", out, want)
	}
}

func ExampleParseURL() {
	opts, err := redis.ParseURL("redis-cluster://10.0.0.1:7000,10.0.0.2:7000?wait_replicas=1&wait_timeout=200ms")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.Join(opts.Addrs, " "), opts.Cluster, opts.WaitReplicas, opts.WaitTimeout, opts.Prefix)
	// Output: 10.0.0.1:7000 10.0.0.2:7000 true 1 200ms spent:
}
