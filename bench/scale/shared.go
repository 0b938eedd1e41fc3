package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/postgres"
	"github.com/spentledger/spent/redis"
)

// sharedConfig is what the shared subcommand measures.
type sharedConfig struct {
	store     string // redis, postgres or etcd
	addr      string // redis: host:port; postgres: a DSN; etcd: host:port,...
	pid       int    // the server's process, for its memory
	records   int64
	duration  time.Duration
	workers   int
	loadBatch int
	batchers  int
	sample    int
	sweepB    int
}

// secretFor is the fixed secret of the shared stores' keys: they have no
// spent serve, so any secret does, as long as check uses the same one.
var secretFor = []byte("spent bench/scale: a fixed secret of 32 bytes.......")

func openShared(ctx context.Context, store, addr string) (spent.Store, error) {
	switch store {
	case "redis":
		o := redis.DefaultOptions()
		o.Addrs = []string{addr}
		return redis.Open(ctx, o)
	case "postgres":
		o := postgres.DefaultOptions()
		o.ConnString = addr
		return postgres.Open(ctx, o)
	case "etcd":
		o := etcd.DefaultOptions()
		o.Endpoints = strings.Split(addr, ",")
		return etcd.Open(ctx, o)
	}
	return nil, fmt.Errorf("unknown store %q: want redis, postgres or etcd", store)
}

// runShared loads c.records into a shared store, measures claims, the
// server's memory and the store's size, and sweeps (PostgreSQL only: Redis
// and etcd forget expired records by themselves).
func runShared(ctx context.Context, c sharedConfig) (Run, error) {
	run := Run{Store: c.store, Records: c.records}
	k, err := newKeyer(secretFor)
	if err != nil {
		return run, err
	}
	s, err := openShared(ctx, c.store, c.addr)
	if err != nil {
		return run, err
	}
	defer s.Close()
	rss0 := serverRSS(c.store, c.pid)
	base := time.Now()
	log.Printf("%s %d: loading in batches of %d from %d goroutines", c.store, c.records, c.loadBatch, c.workers)
	loadRate, err := load(ctx, s, k, 0, c.records, base, c.workers, c.loadBatch)
	if err != nil {
		return run, err
	}
	log.Printf("%s %d: loaded at %.0f records/s", c.store, c.records, loadRate)
	if err := checkLoaded(ctx, s, k, c.records, c.sample, base); err != nil {
		return run, err
	}
	claimed, err := measureBoth(ctx, s, c.duration, c.batchers, &run)
	if err != nil {
		return run, err
	}
	held := c.records + claimed
	run.RSSBytes = serverRSS(c.store, c.pid)
	notes := []string{fmt.Sprintf("loaded at %.0f records/s (ClaimBatch of %d from %d goroutines); per-record figures divide by the %d records held when measured (%d loaded + %d claimed by the measurement)",
		loadRate, c.loadBatch, c.workers, held, c.records, claimed)}
	more, err := sharedSizes(ctx, c, held, rss0, &run)
	if err != nil {
		return run, err
	}
	notes = append(notes, more...)
	if c.store == "postgres" {
		took, n, err := sweep(ctx, s, base, c.sweepB)
		if err == nil && n != expiring(c.records) {
			err = fmt.Errorf("sweep removed %d rows, want %d", n, expiring(c.records))
		}
		if err != nil {
			return run, err
		}
		run.SweepS, run.Swept = round(took.Seconds(), 3), n
		notes = append(notes, fmt.Sprintf("sweep of the expired tenth in DeleteExpired calls of %d", c.sweepB))
	} else {
		notes = append(notes, "no sweep: the engine forgets expired records by itself (DeleteExpired removes nothing)")
	}
	run.Notes = strings.Join(notes, "; ")
	return run, nil
}

// sharedSizes fills the memory and size figures of a shared store.
func sharedSizes(ctx context.Context, c sharedConfig, held, rss0 int64, run *Run) ([]string, error) {
	switch c.store {
	case "redis":
		used, err := redisUsedMemory(ctx, c.addr)
		if err != nil {
			return nil, err
		}
		run.MemBytesPerRecord = round(float64(used)/float64(held), 1)
		return []string{fmt.Sprintf("RSS of redis-server; mem B/rec is INFO used_memory (%d) / records; no disk figure (the AOF is a log of writes, rewritten at will)", used)}, nil
	case "postgres":
		n, err := pgSize(ctx, c.addr)
		if err != nil {
			return nil, err
		}
		run.DiskBytesPerRecord = round(float64(n)/float64(held), 1)
		return []string{fmt.Sprintf("RSS is the proportional set size (PSS) of the postmaster and its children (shared buffers counted once); disk B/rec is the sum of pg_total_relation_size of the store's tables (%d), WAL not counted; no mem B/rec (PostgreSQL keeps the rows on disk)", n)}, nil
	case "etcd":
		n, err := etcdDBSize(ctx, c.addr)
		if err != nil {
			return nil, err
		}
		run.DiskBytesPerRecord = round(float64(n)/float64(held), 1)
		run.MemBytesPerRecord = round(float64(run.RSSBytes-rss0)/float64(held), 1)
		return []string{fmt.Sprintf("one member (not a 3-member cluster); RSS of etcd; disk B/rec is the status endpoint's dbSize (%d) / records; mem B/rec is etcd's RSS growth / records", n)}, nil
	}
	return nil, nil
}

func redisUsedMemory(ctx context.Context, addr string) (int64, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			var n int64
			_, err := fmt.Sscan(v, &n)
			return n, err
		}
	}
	return 0, fmt.Errorf("redis INFO memory has no used_memory")
}

func pgSize(ctx context.Context, dsn string) (int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')`,
		postgres.DefaultOptions().Schema).Scan(&n)
	return n, err
}

func etcdDBSize(ctx context.Context, endpoints string) (int64, error) {
	eps := strings.Split(endpoints, ",")
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	st, err := c.Status(ctx, eps[0])
	if err != nil {
		return 0, err
	}
	return st.DbSize, nil
}

// serverRSS is the memory of the server process pid: its VmRSS, or for
// PostgreSQL the PSS of the postmaster and all its children.
func serverRSS(store string, pid int) int64 {
	if pid <= 0 {
		return 0
	}
	if store == "postgres" {
		return treePSS(pid)
	}
	return procRSS(pid)
}

// checkShared reopens a shared store and checks that sample live loaded
// keys are still there: after a restart of its server.
func checkShared(ctx context.Context, store, addr string, records int64, sample int) error {
	k, err := newKeyer(secretFor)
	if err != nil {
		return err
	}
	s, err := openShared(ctx, store, addr)
	if err != nil {
		return err
	}
	defer s.Close()
	return checkLoaded(ctx, s, k, records, sample, time.Now())
}
