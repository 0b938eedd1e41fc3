package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/redistest"
	"github.com/spentledger/spent/redis"
)

// waitLinked waits until the primary at addr has n connected replicas.
func waitLinked(t *testing.T, addr string, n int) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, DisableIdentity: true})
	defer c.Close()
	want := "connected_slaves:" + strconv.Itoa(n)
	for deadline := time.Now().Add(20 * time.Second); ; {
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, want+"\r\n") && strings.Count(info, "state=online") == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("primary %s: want %s, got %q, %v", addr, want, info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWaitReplicas checks Options.WaitReplicas on a primary with one
// replica: writes answer once the replica has them; asking for more replicas
// than answer is an ErrNotReplicated error, with the write on the primary.
func TestWaitReplicas(t *testing.T) {
	primary := redistest.Start(t, redistest.Args("--repl-diskless-sync-delay", "0"))
	replica := redistest.Start(t, redistest.Args("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port)))
	waitLinked(t, primary.Addr, 1)
	ctx := context.Background()
	dir := t.TempDir()
	opts := serverOptions(primary.Addr, dir)
	opts.WaitReplicas = 1
	// Generous, so that a replica slowed by a busy machine (the race
	// detector, the other packages' tests) still acknowledges in time;
	// the calls meant to time out use short instead.
	opts.WaitTimeout = 3 * time.Second
	s := MustOpen(t, opts)
	short := opts
	short.WaitTimeout = 300 * time.Millisecond
	rc := goredis.NewClient(&goredis.Options{Addr: replica.Addr, DisableIdentity: true})
	defer rc.Close()

	t.Run("WritesReachTheReplica", func(t *testing.T) {
		for i := range 20 {
			h := hashOf("waited " + strconv.Itoa(i))
			res, err := s.Claim(ctx, oneStep(h, uint64(i+1)))
			if err != nil || !res.Inserted {
				t.Fatalf("Claim: got %v, %v, want inserted", res.Inserted, err)
			}
			// WAIT answered: the replica has the record now.
			if n, err := rc.Exists(ctx, s.RecordKey(h)).Result(); err != nil || n != 1 {
				t.Fatalf("record on the replica right after Claim: got %d, %v, want 1", n, err)
			}
		}
		ops := []spent.ClaimOp{oneStep(hashOf("waited batch 1"), 100), oneStep(hashOf("waited batch 2"), 101)}
		if _, err := s.ClaimBatch(ctx, ops); err != nil {
			t.Fatalf("ClaimBatch: %v", err)
		}
		if _, err := s.ReserveSeq(ctx, 1, 10); err != nil {
			t.Fatalf("ReserveSeq: %v", err)
		}
		if _, err := s.Count(ctx, spent.CountOp{Key: hashOf("quota"), Limit: 3, ExpiresAt: t0.Add(time.Hour), Now: t0}); err != nil {
			t.Fatalf("Count: %v", err)
		}
	})

	t.Run("TooFewReplicasIsAnError", func(t *testing.T) {
		more := short
		more.WaitReplicas = 2
		s2 := MustOpen(t, more)
		h := hashOf("not replicated enough")
		start := time.Now()
		_, err := s2.Claim(ctx, oneStep(h, 200))
		if !errors.Is(err, redis.ErrNotReplicated) || !strings.HasPrefix(err.Error(), "redis: claim: ") {
			t.Fatalf("Claim waiting for 2 of 1 replicas: got %v, want redis: claim: ... ErrNotReplicated", err)
		}
		if d := time.Since(start); d < more.WaitTimeout {
			t.Fatalf("Claim returned after %v, want it to wait %v", d, more.WaitTimeout)
		}
		// The outcome is unknown to the caller, but the record is on the
		// primary, where the ledger reads it back.
		if r, err := s2.Get(ctx, h, t0); err != nil || r.Seq.Counter != 200 {
			t.Fatalf("Get after the shortfall: got %v, %v, want the record", r.Seq, err)
		}
	})

	t.Run("ReplicaDownIsAnError", func(t *testing.T) {
		replica.Kill(t)
		waitLinked(t, primary.Addr, 0)
		s := MustOpen(t, short)
		_, err := s.Claim(ctx, oneStep(hashOf("replica down"), 300))
		if !errors.Is(err, redis.ErrNotReplicated) {
			t.Fatalf("Claim with the replica down: got %v, want ErrNotReplicated", err)
		}
		// The claim is on the primary, where a repeat finds it: an answer
		// that writes nothing needs no replica.
		res, err := s.Claim(ctx, oneStep(hashOf("replica down"), 301))
		if err != nil || res.Inserted || res.Record.Seq.Counter != 300 {
			t.Fatalf("repeat Claim with the replica down: got %v %v, %v, want the record of seq 300", res.Inserted, res.Record.Seq, err)
		}
		err = s.Release(ctx, hashOf("replica down"), spent.Seq{Node: 9, Counter: 300}, t0)
		if !errors.Is(err, spent.ErrNotPending) {
			t.Fatalf("Release of a complete record: got %v, want ErrNotPending", err)
		}
	})
}
