package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// checkDurable reads the persistence settings of one primary and describes
// each one that lets a crash (or memory pressure) lose acknowledged claims,
// with what it loses and what to set instead. It returns nil for a durable
// server: appendonly yes, appendfsync always, fsync during rewrites
// (no-appendfsync-on-rewrite no), and no eviction.
func checkDurable(ctx context.Context, c *goredis.Client) []string {
	addr := c.Options().Addr
	get := func(name string) (string, error) {
		m, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return "", err
		}
		v, ok := m[name]
		if !ok {
			return "", fmt.Errorf("no setting %q", name)
		}
		return v, nil
	}
	var problems []string
	say := func(format string, args ...any) {
		problems = append(problems, addr+": "+fmt.Sprintf(format, args...))
	}
	aof, err := get("appendonly")
	if err != nil {
		say("cannot read its persistence settings (CONFIG GET appendonly: %v), so nothing shows that acknowledged claims survive a crash; "+
			"run Redis with appendonly yes and appendfsync always, and allow CONFIG GET to the store's user", err)
		return problems
	}
	fsync, err := get("appendfsync")
	if err != nil {
		say("cannot read appendfsync (CONFIG GET: %v); set appendfsync always and allow CONFIG GET", err)
		return problems
	}
	switch {
	case aof != "yes":
		save, _ := get("save")
		if strings.TrimSpace(save) == "" {
			save = "none"
		}
		say("appendonly is %s (RDB snapshots: %s), so a crash loses every claim since the last snapshot, all of them without snapshots; "+
			"set appendonly yes and appendfsync always", aof, save)
	case fsync == "everysec":
		say("appendfsync is everysec, so a crash can lose the claims acknowledged in the last one to two seconds; set appendfsync always")
	case fsync != "always":
		say("appendfsync is %s, so a power loss or kernel crash can lose the claims acknowledged in the last 30 seconds or so "+
			"(whatever the kernel had not written); set appendfsync always", fsync)
	}
	if aof == "yes" && fsync == "always" {
		switch v, err := get("no-appendfsync-on-rewrite"); {
		case err != nil:
			say("cannot read no-appendfsync-on-rewrite (CONFIG GET: %v); set it to no and allow CONFIG GET", err)
		case v != "no":
			say("no-appendfsync-on-rewrite is %s, so while Redis rewrites its append-only file or saves a snapshot it does not fsync, "+
				"and a crash then can lose the claims acknowledged in the last 30 seconds or so; set no-appendfsync-on-rewrite no", v)
		}
	}
	policy, err1 := get("maxmemory-policy")
	maxmem, err2 := get("maxmemory")
	if err := errors.Join(err1, err2); err != nil {
		say("cannot read its eviction settings (CONFIG GET: %v); set maxmemory-policy noeviction and allow CONFIG GET", err)
	} else if policy != "noeviction" && maxmem != "0" {
		say("maxmemory-policy is %s with maxmemory %s bytes, so Redis evicts records when memory runs short and forgets spent keys; "+
			"set maxmemory-policy noeviction (a full server then refuses claims instead)", policy, maxmem)
	}
	return problems
}

// checkVersion refuses a server older than Redis 7.0, which lacks SET with
// both NX and GET.
func checkVersion(ctx context.Context, c *goredis.Client) error {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return nil // INFO may be disabled; an old server then fails the first claim
	}
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		major, _, _ := strings.Cut(v, ".")
		if n, err := strconv.Atoi(major); err == nil && n < 7 {
			return fmt.Errorf("%s runs Redis %s: the store needs Redis 7.0 or later", c.Options().Addr, v)
		}
	}
	return nil
}

// checkNotCluster refuses a cluster node opened as a single server: most
// keys would answer MOVED.
func checkNotCluster(ctx context.Context, c *goredis.Client) error {
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		return nil // INFO may be disabled; a cluster node then fails on the first MOVED
	}
	if strings.Contains(info, "cluster_enabled:1") {
		return fmt.Errorf("%s is a Redis Cluster node: use a redis-cluster:// DSN (Options.Cluster)", c.Options().Addr)
	}
	return nil
}
