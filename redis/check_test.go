package redis_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent/internal/redistest"
	"github.com/spentledger/spent/redis"
)

// openResult opens a store with opts and returns what it logged and the
// error; the store, if opened, is closed.
func openResult(t *testing.T, opts redis.Options) (string, error) {
	t.Helper()
	var log bytes.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&log, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redis.Open(ctx, opts)
	if err == nil {
		s.Close()
	}
	return log.String(), err
}

// TestOpenChecksDurability checks the start-up refusal: a server without
// appendonly yes and appendfsync always, one that may evict records, or one
// that hides its settings is refused unless AllowNonDurable is set, and then
// Open logs what can be lost.
func TestOpenChecksDurability(t *testing.T) {
	srv := redistest.Start(t)
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr, DisableIdentity: true})
	defer admin.Close()
	ctx := context.Background()
	set := func(t *testing.T, kv ...string) {
		t.Helper()
		for i := 0; i < len(kv); i += 2 {
			if err := admin.ConfigSet(ctx, kv[i], kv[i+1]).Err(); err != nil {
				t.Fatalf("CONFIG SET %s %s: %v", kv[i], kv[i+1], err)
			}
		}
	}
	durable := []string{"appendonly", "yes", "appendfsync", "always", "no-appendfsync-on-rewrite", "no", "maxmemory", "0", "maxmemory-policy", "noeviction"}

	cases := []struct {
		name     string
		settings []string
		want     []string // in the refusal and in the warning
	}{
		{"EverySec", []string{"appendfsync", "everysec"}, []string{"appendfsync is everysec", "last one to two seconds", "set appendfsync always"}},
		{"FsyncNo", []string{"appendfsync", "no"}, []string{"appendfsync is no", "power loss", "set appendfsync always"}},
		{"NoAOF", []string{"appendonly", "no"}, []string{"appendonly is no", "since the last snapshot", "set appendonly yes"}},
		{"NoFsyncOnRewrite", []string{"no-appendfsync-on-rewrite", "yes"}, []string{"no-appendfsync-on-rewrite is yes", "set no-appendfsync-on-rewrite no"}},
		{"Eviction", []string{"maxmemory", "104857600", "maxmemory-policy", "allkeys-lru"}, []string{"maxmemory-policy is allkeys-lru", "set maxmemory-policy noeviction"}},
		{"VolatileEviction", []string{"maxmemory", "104857600", "maxmemory-policy", "volatile-ttl"}, []string{"maxmemory-policy is volatile-ttl"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set(t, durable...)
			set(t, tc.settings...)
			opts := serverOptions(srv.Addr, t.TempDir())
			_, err := openResult(t, opts)
			if !errors.Is(err, redis.ErrNotDurable) {
				t.Fatalf("Open: got %v, want ErrNotDurable", err)
			}
			for _, w := range append(tc.want, srv.Addr, "allow_non_durable=true") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q: want it to say %q", err, w)
				}
			}
			opts.AllowNonDurable = true
			log, err := openResult(t, opts)
			if err != nil {
				t.Fatalf("Open with AllowNonDurable: got %v, want success", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(log, w) || !strings.Contains(log, "level=WARN") {
					t.Errorf("warning %q: want a WARN that says %q", log, w)
				}
			}
		})
	}

	t.Run("Durable", func(t *testing.T) {
		set(t, durable...)
		// An eviction policy does not matter without a memory limit.
		set(t, "maxmemory-policy", "allkeys-lru")
		log, err := openResult(t, serverOptions(srv.Addr, t.TempDir()))
		if err != nil || log != "" {
			t.Fatalf("Open on a durable server: got %v and log %q, want success and no log", err, log)
		}
	})

	t.Run("ConfigHidden", func(t *testing.T) {
		hidden := redistest.Start(t, redistest.Args("--rename-command", "CONFIG", ""))
		opts := serverOptions(hidden.Addr, t.TempDir())
		_, err := openResult(t, opts)
		if !errors.Is(err, redis.ErrNotDurable) || !strings.Contains(err.Error(), "cannot read its persistence settings") {
			t.Fatalf("Open without CONFIG: got %v, want ErrNotDurable saying it cannot read the settings", err)
		}
		opts.AllowNonDurable = true
		log, err := openResult(t, opts)
		if err != nil || !strings.Contains(log, "cannot read its persistence settings") {
			t.Fatalf("Open without CONFIG, allowed: got %v and log %q, want success and a warning", err, log)
		}
	})
}
