package redis_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/redistest"
	"github.com/spentledger/spent/redis"
)

// killRun claims keys through a ledger over a redis store while the server
// is killed with SIGKILL and restarted on its append-only file, and records
// every answer.
type killRun struct {
	t      *testing.T
	srv    *redistest.Server
	store  *redis.Store
	ledger *spent.Ledger

	next atomic.Int64 // key counter
	acks atomic.Int64 // answers without error

	mu         sync.Mutex
	acked      map[string]spent.Seq // the seq each acknowledged key was answered with
	ackedKeys  []string
	freshSeq   map[spent.Seq]string
	errors     int
	violations []string
}

const killNS = "tickets"

func killPolicies() map[string]spent.Policy {
	return map[string]spent.Policy{killNS: {
		Mode: spent.ModeEcho, Retention: time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold,
	}}
}

// killClaim is the claim of key: two-step for every third key (its record
// stays pending), one-step with a result otherwise.
func killClaim(key string) spent.Claim {
	c := spent.Claim{Namespace: killNS, Key: key, Place: "kill-test"}
	if len(key)%3 != 0 {
		c.Result = []byte("result of " + key)
	}
	return c
}

func newKillRun(t *testing.T, srv *redistest.Server, opts redis.Options) *killRun {
	opts.DialTimeout = time.Second
	opts.ReadTimeout = 2 * time.Second
	opts.WriteTimeout = 2 * time.Second
	s := MustOpen(t, opts)
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("the redis kill test's secret, 32+ bytes")
	cfg.Namespaces = killPolicies()
	cfg.SeqBlock = 50
	l, err := spent.NewLedger(context.Background(), s, cfg)
	if err != nil {
		t.Fatalf("NewLedger: %v", err)
	}
	return &killRun{t: t, srv: srv, store: s, ledger: l, acked: map[string]spent.Seq{}, freshSeq: map[spent.Seq]string{}}
}

func (r *killRun) violatef(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// claim claims key and checks the answer against what was acknowledged.
func (r *killRun) claim(ctx context.Context, key string) {
	res, err := r.ledger.Claim(ctx, killClaim(key))
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errors++
		return
	}
	r.acks.Add(1)
	seq := res.Record.Seq
	prev, known := r.acked[key]
	switch res.Outcome {
	case spent.Fresh:
		if known {
			r.violatef("key %s answered fresh (seq %v) after it was acknowledged with seq %v", key, seq, prev)
		}
		if other, ok := r.freshSeq[seq]; ok {
			r.violatef("seq %v answered fresh for %s and %s", seq, other, key)
		}
		r.freshSeq[seq] = key
	case spent.Replayed, spent.InProgress:
		if known && prev != seq {
			r.violatef("key %s answered %v with seq %v, want seq %v acknowledged before", key, res.Outcome, seq, prev)
		}
		if res.Outcome == spent.Replayed && !bytes.Equal(res.Record.Result, killClaim(key).Result) {
			r.violatef("key %s replayed %q", key, res.Record.Result)
		}
	default:
		r.violatef("key %s answered %v", key, res.Outcome)
	}
	if !known {
		r.acked[key] = seq
		r.ackedKeys = append(r.ackedKeys, key)
	}
}

// load runs workers goroutines until ctx ends: most claim new keys, some
// claim again keys acknowledged before (perhaps before a restart).
func (r *killRun) load(ctx context.Context, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				key := fmt.Sprintf("k%d", r.next.Add(1))
				if rng.IntN(5) == 0 {
					r.mu.Lock()
					if n := len(r.ackedKeys); n > 0 {
						key = r.ackedKeys[rng.IntN(n)]
					}
					r.mu.Unlock()
				}
				r.claim(context.Background(), key)
			}
		})
	}
	return &wg
}

// cycles kills and restarts the server n times under load, then stops the
// load and checks that every acknowledged claim is stored with its seq.
func (r *killRun) cycles(n, workers int) {
	t := r.t
	ctx, stop := context.WithCancel(context.Background())
	wg := r.load(ctx, workers)
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for c := range n {
		// Kill at a random moment once this incarnation has answered.
		base := r.acks.Load()
		deadline := time.Now().Add(20 * time.Second)
		for r.acks.Load() < base+200 {
			if time.Now().After(deadline) {
				stop()
				wg.Wait()
				t.Fatalf("cycle %d: %d answers in 20s, want 200", c, r.acks.Load()-base)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
		r.srv.Kill(t)
		time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
		r.srv.Restart(t)
	}
	// Let the last incarnation answer, then stop.
	base := r.acks.Load()
	for deadline := time.Now().Add(20 * time.Second); r.acks.Load() < base+200 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	wg.Wait()

	ctx2 := context.Background()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, key := range r.ackedKeys {
		want := r.acked[key]
		got, err := r.ledger.Get(ctx2, killNS, key)
		switch {
		case err != nil:
			r.violatef("key %s acknowledged with seq %v: got %v after the restarts, want the record", key, want, err)
		case got.Seq != want:
			r.violatef("key %s acknowledged with seq %v: got seq %v after the restarts", key, want, got.Seq)
		}
	}
	t.Logf("%d kills: %d keys acknowledged, %d answers, %d errors", n, len(r.ackedKeys), r.acks.Load(), r.errors)
}

// TestServerKilledUnderLoad kills redis-server with SIGKILL while 24
// goroutines claim, four times, each time restarting it on the same
// append-only file (same port, same directory), and checks that every
// acknowledged claim is still there with its seq and that no key was
// answered fresh twice.
func TestServerKilledUnderLoad(t *testing.T) {
	srv := redistest.Start(t)
	r := newKillRun(t, srv, serverOptions(srv.Addr, t.TempDir()))
	r.cycles(4, 24)
	for i, v := range r.violations {
		if i == 20 {
			t.Errorf("... and %d more", len(r.violations)-20)
			break
		}
		t.Error(v)
	}
}

// TestKillCheckCatchesLostClaims shows that the kill test can fail: on a
// server without an append-only file, a kill loses the acknowledged claims,
// and the check reports them.
func TestKillCheckCatchesLostClaims(t *testing.T) {
	srv := redistest.Start(t, redistest.Args("--appendonly", "no"))
	opts := serverOptions(srv.Addr, t.TempDir())
	opts.AllowNonDurable = true
	opts.AutoPipeline = false // the path without autopipelining, killed too
	r := newKillRun(t, srv, opts)
	r.cycles(1, 16)
	lost := 0
	for _, v := range r.violations {
		if bytes.Contains([]byte(v), []byte("want the record")) {
			lost++
		}
	}
	if lost == 0 {
		t.Fatalf("kill of a server without an append-only file: got no lost claims reported (%d violations), want some", len(r.violations))
	}
	t.Logf("the check reported %d lost claims, as it should", lost)
}
