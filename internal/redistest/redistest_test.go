package redistest_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent/internal/redistest"
)

func TestKillAndRestartKeepTheAppendOnlyFile(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer c.Close()
	for _, name := range []string{"appendonly", "appendfsync"} {
		got, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"appendonly": "yes", "appendfsync": "always"}[name]; got[name] != want {
			t.Fatalf("%s: got %q, want %q", name, got[name], want)
		}
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Kill(t)
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Kill: got no error, want the server gone")
	}
	srv.Restart(t)
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after restart: got %q, %v, want %q", got, err, "v")
	}
	if !strings.HasPrefix(srv.URL(), "redis://127.0.0.1:") {
		t.Fatalf("URL: got %q", srv.URL())
	}
}

func TestSharedPublishesTheAddress(t *testing.T) {
	const env = "SPENT_REDISTEST_SELFTEST"
	t.Run("Starts", func(t *testing.T) {
		addr := redistest.Shared(t, env)
		if got := os.Getenv(env); got != addr {
			t.Fatalf("%s: got %q, want %q", env, got, addr)
		}
		if again := redistest.Shared(t, env); again != addr {
			t.Fatalf("second Shared: got %q, want the same %q", again, addr)
		}
	})
	if got := os.Getenv(env); got != "" {
		t.Fatalf("%s after the test: got %q, want it unset", env, got)
	}
}

func TestArgsOverrideDefaults(t *testing.T) {
	srv := redistest.Start(t, redistest.Args("--appendfsync", "everysec"))
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer c.Close()
	got, err := c.ConfigGet(context.Background(), "appendfsync").Result()
	if err != nil || got["appendfsync"] != "everysec" {
		t.Fatalf("appendfsync: got %v, %v, want everysec", got, err)
	}
}

// TestReplicaLagsBehindACutLink: a replica behind a cut proxy misses the
// primary's writes, and keeps what it had once promoted.
func TestReplicaLagsBehindACutLink(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t)
	link := redistest.NewProxy(t, primary.Addr)
	replica := redistest.StartReplica(t, link.Addr)
	pc := goredis.NewClient(&goredis.Options{Addr: primary.Addr, DisableIdentity: true})
	defer pc.Close()
	if err := pc.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	primary.WaitReplicas(t, 1, 5*time.Second)
	link.Cut()
	if err := pc.Set(ctx, "after", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	primary.Kill(t)
	replica.Promote(t)
	rc := goredis.NewClient(&goredis.Options{Addr: replica.Addr, DisableIdentity: true})
	defer rc.Close()
	for key, want := range map[string]int64{"before": 1, "after": 0} {
		if got := rc.Exists(ctx, key).Val(); got != want {
			t.Fatalf("EXISTS %s on the promoted replica: got %d, want %d", key, got, want)
		}
	}
	if err := rc.Set(ctx, "written", "1", 0).Err(); err != nil {
		t.Fatalf("SET on the promoted replica: got %v, want no error", err)
	}
}
