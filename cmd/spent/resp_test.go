package main_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startSpentRESP starts `spent serve` with a RESP listener on a free
// loopback port and returns the process and the RESP address.
func startSpentRESP(t *testing.T, bin, dir string, args ...string) (*spentProcess, string) {
	t.Helper()
	p, lines := launchSpent(t, bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--resp", "127.0.0.1:0", "--data", dir}, args...), 1)
	raddr, ok := strings.CutPrefix(lines[0], "spent RESP listening on redis://")
	if !ok {
		t.Fatalf("spent serve --resp: got %q, want its RESP address; stderr:\n%s", lines[0], p.stderr)
	}
	return p, raddr
}

// TestRESPKillLosesNothingAcknowledged kills spent with SIGKILL while
// go-redis clients claim through its RESP listener, single and pipelined,
// and checks after each restart that every SET … NX answered OK is still
// there: a repeat is nil, GET gives its value, and DEL is refused.
func TestRESPKillLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills spent several times")
	}
	bin := buildSpent(t)
	dir := t.TempDir()
	var acked sync.Map // key → value
	total := 0
	for round := range 4 {
		p, raddr := startSpentRESP(t, bin, dir)
		rdb := redis.NewClient(&redis.Options{Addr: raddr, PoolSize: 32, MaxRetries: -1})
		ctx := context.Background()
		// Everything acknowledged before this round is still spent.
		checked := 0
		acked.Range(func(k, v any) bool {
			if checked >= 300 {
				return false
			}
			checked++
			got, err := rdb.SetNX(ctx, k.(string), "again", 0).Result()
			if err != nil || got {
				t.Fatalf("round %d: SETNX %s after kill -9: got %v, %v; want false (an acknowledged claim is never lost)", round, k, got, err)
			}
			val, err := rdb.Get(ctx, k.(string)).Result()
			if err != nil || val != v.(string) {
				t.Fatalf("round %d: GET %s: got %q, %v; want %q", round, k, val, err, v)
			}
			if err := rdb.Del(ctx, k.(string)).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOT_PENDING") {
				t.Fatalf("round %d: DEL %s of a complete record: got %v, want a NOT_PENDING refusal", round, k, err)
			}
			return true
		})
		var n atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if w%2 == 0 {
						k := fmt.Sprintf("default:r%d-w%d-%d", round, w, i)
						v := "v" + k
						ok, err := rdb.SetNX(ctx, k, v, time.Hour).Result()
						if err == nil && ok {
							acked.Store(k, v)
							n.Add(1)
						}
						continue
					}
					pipe := rdb.Pipeline()
					cmds := make([]*redis.StatusCmd, 16)
					for j := range cmds {
						k := fmt.Sprintf("default:r%d-w%d-%d-%d", round, w, i, j)
						cmds[j] = pipe.SetArgs(ctx, k, "p"+k, redis.SetArgs{Mode: "NX", TTL: time.Hour})
					}
					pipe.Exec(ctx)
					for j, c := range cmds {
						if c.Err() == nil && c.Val() == "OK" {
							k := fmt.Sprintf("default:r%d-w%d-%d-%d", round, w, i, j)
							acked.Store(k, "p"+k)
							n.Add(1)
						}
					}
				}
			}()
		}
		time.Sleep(time.Duration(300+100*round) * time.Millisecond)
		p.cmd.Process.Kill()
		<-p.exited
		close(stop)
		wg.Wait()
		rdb.Close()
		if n.Load() == 0 {
			t.Fatalf("round %d: no claim acknowledged before the kill; stderr:\n%s", round, p.stderr)
		}
		total += int(n.Load())
	}
	// A last start checks the last round's claims.
	_, raddr := startSpentRESP(t, bin, dir)
	rdb := redis.NewClient(&redis.Options{Addr: raddr})
	defer rdb.Close()
	lost := 0
	acked.Range(func(k, v any) bool {
		got, err := rdb.SetNX(context.Background(), k.(string), "again", 0).Result()
		if err != nil {
			t.Fatalf("SETNX %s: %v", k, err)
		}
		if got {
			lost++
		}
		return true
	})
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged claims were free again after kill -9", lost, total)
	}
	t.Logf("%d acknowledged claims over 4 kills, none lost", total)
}

// TestRESPOneKeyManyConnections races one key from 100 connections, ten
// times: exactly one SET … NX is answered OK each time.
func TestRESPOneKeyManyConnections(t *testing.T) {
	bin := buildSpent(t)
	_, raddr := startSpentRESP(t, bin, t.TempDir())
	clients := make([]*redis.Client, 100)
	for i := range clients {
		clients[i] = redis.NewClient(&redis.Options{Addr: raddr, PoolSize: 1, MaxRetries: -1})
		defer clients[i].Close()
		if err := clients[i].Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 10 {
		key := fmt.Sprintf("default:race-%d", round)
		var wins atomic.Int64
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for c, rdb := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ok, err := rdb.SetNX(context.Background(), key, fmt.Sprint(c), 0).Result()
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				if ok {
					wins.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if w := wins.Load(); w != 1 {
			t.Fatalf("round %d: %d connections were answered 1 for one key, want exactly 1", round, w)
		}
	}
}
