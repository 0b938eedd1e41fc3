package redis_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/redistest"
	"github.com/spentledger/spent/redis"
	"github.com/spentledger/spent/storetest"
)

// The environment variables through which storetest's crash children find
// the servers their parent started.
const (
	envServer  = "SPENT_REDISTEST_SERVER"
	envCluster = "SPENT_REDISTEST_CLUSTER"
)

// prefixFor isolates each storetest directory in its own keyspace: opening
// the same directory again finds the same records, another finds none.
func prefixFor(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "spent-test:" + hex.EncodeToString(sum[:8]) + ":"
}

// MustOpen opens a store with opts and closes it when the test ends.
func MustOpen(tb testing.TB, opts redis.Options) *redis.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := redis.Open(ctx, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// serverOptions returns the options of a store on the server at addr, in the
// keyspace of dir.
func serverOptions(addr, dir string) redis.Options {
	o := redis.DefaultOptions()
	o.Addrs = []string{addr}
	o.Prefix = prefixFor(dir)
	return o
}

// clusterOptions returns the options of a store on the cluster of addrs, in
// the keyspace of dir.
func clusterOptions(addrs []string, dir string) redis.Options {
	o := redis.DefaultOptions()
	o.Addrs = addrs
	o.Cluster = true
	o.Prefix = prefixFor(dir)
	return o
}

// TestServer runs the conformance suite on one durable redis-server, then
// the store's own tests on the same server.
func TestServer(t *testing.T) {
	addr := redistest.Shared(t, envServer)
	storetest.Run(t, storetest.Harness{
		NativeExpiry: true,
		Open: func(tb testing.TB, dir string) spent.Store {
			return MustOpen(tb, serverOptions(addr, dir))
		},
	})
	admin := goredis.NewClient(&goredis.Options{Addr: addr, DisableIdentity: true})
	defer admin.Close()
	commonTests(t, func(dir string) redis.Options { return serverOptions(addr, dir) }, admin)
}

// TestCluster runs the conformance suite on a Redis Cluster of three
// primaries, then the store's own tests on the same cluster.
func TestCluster(t *testing.T) {
	addrs := redistest.SharedCluster(t, envCluster, 3)
	storetest.Run(t, storetest.Harness{
		NativeExpiry: true,
		Open: func(tb testing.TB, dir string) spent.Store {
			return MustOpen(tb, clusterOptions(addrs, dir))
		},
	})
	admin := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, DisableIdentity: true})
	defer admin.Close()
	commonTests(t, func(dir string) redis.Options { return clusterOptions(addrs, dir) }, admin)
	t.Run("KeysSpreadOverPrimaries", func(t *testing.T) { testSpread(t, addrs, admin) })
	t.Run("TagsMatchServerSlots", func(t *testing.T) { testTagSlots(t, admin) })
	t.Run("ClusterNodeIsNoSingleServer", func(t *testing.T) {
		_, err := redis.Open(context.Background(), serverOptions(addrs[0], t.TempDir()))
		if err == nil || !strings.Contains(err.Error(), "redis-cluster://") {
			t.Fatalf("Open of a cluster node as a single server: got %v, want an error naming redis-cluster://", err)
		}
	})
}
