package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/redistest"
	"github.com/spentledger/spent/internal/waittest"
)

// TestWaitAcrossServers runs the waiting-claim tests with the claim on one
// store and the waiter on another over the same Redis server, as two spent
// servers would: the waiter learns of the end from the scripts' PUBLISH.
func TestWaitAcrossServers(t *testing.T) {
	srv := redistest.Start(t)
	waittest.Run(t, func(t *testing.T) (a, b spent.Store) {
		dir := t.TempDir()
		return MustOpen(t, serverOptions(srv.Addr, dir)), MustOpen(t, serverOptions(srv.Addr, dir))
	})
}

// TestWaitEndsResubscribed: when the ends subscription's connection is
// killed, the store subscribes again and wakes every waiter (lost), and
// the ends published afterwards reach the waiter.
func TestWaitEndsResubscribed(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	a, b := MustOpen(t, serverOptions(srv.Addr, dir)), MustOpen(t, serverOptions(srv.Addr, dir))
	ctx := context.Background()
	ended, lost := make(chan spent.Hash, 16), make(chan struct{}, 16)
	stop, err := b.WatchEnds(ctx, func(h spent.Hash) { ended <- h }, func() { lost <- struct{}{} })
	if err != nil {
		t.Fatalf("WatchEnds: %v", err)
	}
	defer stop()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer c.Close()
	if n, err := c.ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub: %d, %v; want one subscriber killed", n, err)
	}
	select {
	case <-lost:
	case <-time.After(20 * time.Second):
		t.Fatal("lost not called after the subscription's connection was killed")
	}
	la, _ := waittest.Ledgers(t, a, a)
	first, err := la.Claim(ctx, spent.Claim{Namespace: waittest.NSRetake, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la.Complete(ctx, spent.Completion{Namespace: waittest.NSRetake, Key: "k", Seq: first.Record.Seq, Result: []byte("r")}); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-ended:
		if h != first.Record.Hash {
			t.Fatalf("ended %v, want %v", h, first.Record.Hash)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no end told after the subscription was made again")
	}
}

// TestWaitAcrossServersCluster is TestWaitAcrossServers on a Redis Cluster
// of three primaries: a script's PUBLISH on the primary of the key's slot
// reaches the subscriber, wherever it subscribed.
func TestWaitAcrossServersCluster(t *testing.T) {
	addrs := redistest.SharedCluster(t, envCluster, 3)
	waittest.Run(t, func(t *testing.T) (a, b spent.Store) {
		dir := t.TempDir()
		return MustOpen(t, clusterOptions(addrs, dir)), MustOpen(t, clusterOptions(addrs, dir))
	})
}
