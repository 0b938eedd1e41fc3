package redis_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
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

// TestPurge checks what the conformance suite does not see of Purge, on one
// server and on a cluster: it goes over many SCAN pages and every primary
// in calls of a limit, removes the pending-index entries of what it purges,
// and leaves alone the records of a store under another prefix, one that
// the first store's prefix would match as a glob pattern if it were not
// escaped.
func TestPurge(t *testing.T) {
	t.Run("Server", func(t *testing.T) {
		addr := redistest.Shared(t, envServer)
		admin := goredis.NewClient(&goredis.Options{Addr: addr, DisableIdentity: true})
		defer admin.Close()
		testPurgeMany(t, func(prefix string) redis.Options {
			o := serverOptions(addr, "")
			o.Prefix = prefix
			return o
		}, admin)
	})
	t.Run("Cluster", func(t *testing.T) {
		addrs := redistest.SharedCluster(t, envCluster, 3)
		admin := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, DisableIdentity: true})
		defer admin.Close()
		testPurgeMany(t, func(prefix string) redis.Options {
			o := clusterOptions(addrs, "")
			o.Prefix = prefix
			return o
		}, admin)
	})
}

func testPurgeMany(t *testing.T, options func(prefix string) redis.Options, admin goredis.UniversalClient) {
	ctx := context.Background()
	base := prefixFor(t.TempDir())
	s := MustOpen(t, options(base+"a*:"))
	other := MustOpen(t, options(base+"ab:"))
	rng := rand.New(rand.NewPCG(11, 12))
	write := func(st *redis.Store, ns string, n int, counter uint64) []spent.Hash {
		t.Helper()
		hs := make([]spent.Hash, n)
		ops := make([]spent.ClaimOp, n)
		for i := range ops {
			hs[i] = randHash(rng)
			ops[i] = oneStep(hs[i], counter+uint64(i))
			ops[i].Record.Namespace = ns
			if i%4 == 0 {
				r := &ops[i].Record
				r.State, r.Result, r.LeaseUntil = spent.StatePending, nil, t0.Add(time.Minute)
			}
		}
		res, err := st.ClaimBatch(ctx, ops)
		if err != nil {
			t.Fatalf("ClaimBatch: %v", err)
		}
		for i := range res {
			if !res[i].Inserted {
				t.Fatalf("ClaimBatch op %d: not inserted", i)
			}
		}
		return hs
	}
	purged := write(s, "A", 2500, 1)
	kept := write(s, "B", 700, 10000)
	elsewhere := write(other, "A", 300, 20000)

	total, calls := 0, 0
	for {
		n, err := s.Purge(ctx, "A", 1000)
		if err != nil {
			t.Fatalf("Purge: %v", err)
		}
		if n > 1000 {
			t.Fatalf("Purge with limit 1000: removed %d", n)
		}
		total += n
		calls++
		if n < 1000 {
			break
		}
	}
	if total != len(purged) || calls != 3 {
		t.Fatalf("Purge in calls of 1000: removed %d in %d calls, want %d in 3", total, calls, len(purged))
	}
	if n := storetest.Missing(t, s, purged, t0); n != len(purged) {
		t.Fatalf("records of A gone after Purge: %d, want %d", n, len(purged))
	}
	if n := storetest.Missing(t, s, kept, t0); n != 0 {
		t.Fatalf("records of B gone after purging A: %d, want 0", n)
	}
	if n := storetest.Missing(t, other, elsewhere, t0); n != 0 {
		t.Fatalf("records of A under another prefix gone: %d, want 0", n)
	}
	// The pending index holds B's pending records only.
	var entries int64
	for i := range 256 {
		n, err := admin.ZCard(ctx, s.PendingKey(spent.Hash{byte(i)})).Result()
		if err != nil {
			t.Fatal(err)
		}
		entries += n
	}
	if want := int64((len(kept) + 3) / 4); entries != want {
		t.Fatalf("pending index entries after Purge: got %d, want B's %d", entries, want)
	}
}
