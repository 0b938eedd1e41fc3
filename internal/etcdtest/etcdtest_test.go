package etcdtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/spentledger/spent/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestKillLeaderAndRestart checks the harness itself: a write survives the
// leader's SIGKILL, the others elect a new leader and take writes, and the
// killed member restarts on its data and catches up.
func TestKillLeaderAndRestart(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, "before", "1"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(old); err != nil {
		t.Fatal(err)
	}
	if c.Running(old) {
		t.Fatalf("member %d: got running after Kill, want stopped", old)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("after killing the leader: %v", err)
	}
	now, err := c.Leader(ctx)
	if err != nil || now == old {
		t.Fatalf("leader after killing member %d: got %d, %v, want another member", old, now, err)
	}
	if _, err := cli.Put(ctx, "during", "2"); err != nil {
		t.Fatalf("Put with a member down: %v", err)
	}
	if err := c.Restart(ctx, old); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	// Read from the restarted member alone, serializably: it has caught up.
	one, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Members()[old].Endpoint()}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := one.Get(ctx, "during", clientv3.WithSerializable())
		if err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted member: got %v, %v, want the write made while it was down", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
