package resp_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/resp"
)

// A relay's Redis client spends a token against spent: the first SET … NX
// is fresh, the second a repeat, and a DEL of the spent token is refused.
func ExampleServer() {
	cfg := spent.DefaultConfig()
	cfg.Secret = bytes.Repeat([]byte("s"), spent.MinSecretLen)
	cfg.Namespaces = map[string]spent.Policy{
		"relay-tokens": {Mode: spent.ModeRefuse, Retention: 30 * time.Hour, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold},
	}
	ledger, err := spent.NewLedger(context.Background(), inmem.New(), cfg)
	if err != nil {
		panic(err)
	}
	rc := resp.DefaultConfig()
	rc.Prefixes = []resp.Prefix{{Prefix: "tokens:redeemed:", Namespace: "relay-tokens"}}
	srv, err := resp.NewServer(ledger, rc)
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
	defer rdb.Close()
	ctx := context.Background()
	first, _ := rdb.SetNX(ctx, "tokens:redeemed:k1:n1", "1", 30*time.Hour).Result()
	second, _ := rdb.SetNX(ctx, "tokens:redeemed:k1:n1", "1", 30*time.Hour).Result()
	fmt.Println("first spend fresh:", first)
	fmt.Println("second spend fresh:", second)
	err = rdb.Del(ctx, "tokens:redeemed:k1:n1").Err()
	fmt.Println("DEL refused:", err != nil)
	// Output:
	// first spend fresh: true
	// second spend fresh: false
	// DEL refused: true
}
