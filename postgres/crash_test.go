package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/internal/syncbuf"
	"github.com/spentledger/spent/postgres"
)

// The crash check: claims from many goroutines through a ledger over the
// store, the server stopped with pg_ctl stop -m immediate (every server
// process quits at once, without a checkpoint, as in a crash) while they
// are in flight, restarted on the same data directory, and every
// acknowledged claim looked for. It runs on a cluster of its own.

const (
	crashWorkers = 24
	crashNS      = "crash"
)

func crashResult(key string) []byte { return []byte("result of " + key + "\x00") }

// crashRun is what the claimers were told, over all cycles.
type crashRun struct {
	mu        sync.Mutex
	acked     map[string]spent.Seq // the seq each acknowledged key was answered with
	fresh     map[string]int       // the cycle that answered a key fresh
	ackedKeys []string
	inDoubt   map[string]bool // sent, answered with an error, never acknowledged since
	errs      []string
	sent      atomic.Int64
	acks      atomic.Int64
	failures  atomic.Int64
}

func newCrashRun() *crashRun {
	return &crashRun{acked: map[string]spent.Seq{}, fresh: map[string]int{}, inDoubt: map[string]bool{}}
}

func (cr *crashRun) violatef(format string, args ...any) {
	cr.errs = append(cr.errs, fmt.Sprintf(format, args...))
}

// answer records the answer to a claim of key in cycle.
func (cr *crashRun) answer(cycle int, key string, res spent.Answer) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.acks.Add(1)
	delete(cr.inDoubt, key)
	seq, known := cr.acked[key]
	switch res.Outcome {
	case spent.Fresh:
		if c, ok := cr.fresh[key]; ok {
			cr.violatef("key %s answered fresh twice: in cycle %d and, with seq %v, in cycle %d", key, c, res.Record.Seq, cycle)
		} else if known && seq != res.Record.Seq {
			cr.violatef("key %s answered fresh with seq %v in cycle %d after it was acknowledged with seq %v", key, res.Record.Seq, cycle, seq)
		}
		cr.fresh[key] = cycle
	case spent.Replayed:
		if known && seq != res.Record.Seq {
			cr.violatef("key %s replayed with seq %v in cycle %d, want the acknowledged seq %v", key, res.Record.Seq, cycle, seq)
		}
		if !bytes.Equal(res.Record.Result, crashResult(key)) {
			cr.violatef("key %s replayed %q, want %q", key, res.Record.Result, crashResult(key))
		}
	default:
		cr.violatef("key %s: got %v in cycle %d, want fresh or replayed", key, res.Outcome, cycle)
	}
	if !known {
		cr.acked[key] = res.Record.Seq
		cr.ackedKeys = append(cr.ackedKeys, key)
	}
}

func (cr *crashRun) failed(key string) {
	cr.failures.Add(1)
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if _, ok := cr.acked[key]; !ok {
		cr.inDoubt[key] = true
	}
}

// pick returns the next key to claim: mostly new keys, some repeats of
// acknowledged ones, and the keys left in doubt by the last crash.
func (cr *crashRun) pick(rng *rand.Rand, cycle, worker int, next *int) string {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for key := range cr.inDoubt {
		if rng.IntN(2) == 0 {
			return key
		}
	}
	if len(cr.ackedKeys) > 0 && rng.IntN(5) == 0 {
		return cr.ackedKeys[rng.IntN(len(cr.ackedKeys))]
	}
	*next++
	return fmt.Sprintf("c%d-w%d-%d", cycle, worker, *next)
}

// verify checks that every acknowledged claim is in the store with the
// acknowledged seq and result.
func (cr *crashRun) verify(ctx context.Context, l *spent.Ledger, when string) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for key, seq := range cr.acked {
		r, err := l.Get(ctx, crashNS, key)
		switch {
		case err != nil:
			cr.violatef("key %s acknowledged with seq %v: %s: got %v, want the record", key, seq, when, err)
		case r.Seq != seq:
			cr.violatef("key %s acknowledged with seq %v: %s: got seq %v", key, seq, when, r.Seq)
		case !bytes.Equal(r.Result, crashResult(key)):
			cr.violatef("key %s: %s: got result %q, want %q", key, when, r.Result, crashResult(key))
		}
	}
}

func crashLedger(tb testing.TB, s spent.Store) *spent.Ledger {
	tb.Helper()
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("the crash test's secret, 32 bytes or more")
	cfg.Namespaces = map[string]spent.Policy{crashNS: {Mode: spent.ModeEcho, Retention: 24 * time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold}}
	cfg.SeqBlock = 256
	l, err := spent.NewLedger(context.Background(), s, cfg)
	if err != nil {
		tb.Fatalf("NewLedger: %v", err)
	}
	return l
}

// runCrashCycles runs cycles of load, kill and restart against c, through
// one store that lives across them (its pool reconnects), and then checks
// everything through a store opened afresh. It returns the violations; with
// untilViolation, it returns as soon as a cycle has found one.
func runCrashCycles(t *testing.T, c *pgtest.Cluster, opts postgres.Options, cycles int, seed uint64, untilViolation bool) []string {
	ctx := context.Background()
	s := MustOpen(t, opts)
	l := crashLedger(t, s)
	cr := newCrashRun()
	rng := rand.New(rand.NewPCG(seed, 1))
	for cycle := range cycles {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range crashWorkers {
			wrng := rand.New(rand.NewPCG(seed, uint64(cycle*1000+w+2)))
			wg.Go(func() {
				next := 0
				for {
					select {
					case <-stop:
						return
					default:
					}
					key := cr.pick(wrng, cycle, w, &next)
					cr.sent.Add(1)
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					res, err := l.Claim(cctx, spent.Claim{Namespace: crashNS, Key: key, Place: "crash", Result: crashResult(key)})
					cancel()
					if err != nil {
						cr.failed(key)
						time.Sleep(2 * time.Millisecond)
						continue
					}
					cr.answer(cycle, key, res)
				}
			})
		}
		// Let acknowledgements accumulate, then kill at a random moment.
		time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
		acksBefore, failsBefore := cr.acks.Load(), cr.failures.Load()
		if err := c.Kill(); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		time.Sleep(100 * time.Millisecond) // claims in flight fail
		close(stop)
		wg.Wait()
		if acksBefore == 0 {
			t.Fatalf("cycle %d: no claim acknowledged before the kill", cycle)
		}
		if cr.failures.Load() == failsBefore {
			t.Fatalf("cycle %d: no claim failed at the kill, want some in flight", cycle)
		}
		if err := c.Restart(); err != nil {
			t.Fatalf("cycle %d: restart: %v", cycle, err)
		}
		// The store's pool drops its dead connections and makes new ones.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := s.Get(ctx, l.HashKey(crashNS, "probe"), time.Now())
			if err == nil || strings.Contains(err.Error(), "not found") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: store unusable 30s after the restart: %v", cycle, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		cr.verify(ctx, l, fmt.Sprintf("after restart %d", cycle+1))
		t.Logf("cycle %d: %d claims sent, %d acknowledged, %d failed so far", cycle, cr.sent.Load(), cr.acks.Load(), cr.failures.Load())
		if untilViolation && len(cr.violations()) > 0 {
			return cr.violations()
		}
	}
	s.Close()
	s2 := MustOpen(t, opts)
	l2 := crashLedger(t, s2)
	cr.verify(ctx, l2, "through a store opened afresh")
	// Every key left in doubt gets an answer now, consistent with the rest.
	cr.mu.Lock()
	var doubted []string
	for key := range cr.inDoubt {
		doubted = append(doubted, key)
	}
	cr.mu.Unlock()
	for _, key := range doubted {
		res, err := l2.Claim(ctx, spent.Claim{Namespace: crashNS, Key: key, Place: "crash", Result: crashResult(key)})
		if err != nil {
			cr.mu.Lock()
			cr.violatef("key %s left in doubt: claim after the last restart: %v", key, err)
			cr.mu.Unlock()
			continue
		}
		cr.answer(cycles, key, res)
	}
	t.Logf("%d cycles: %d claims sent, %d acknowledged (%d keys), %d failed", cycles, cr.sent.Load(), cr.acks.Load(), len(cr.acked), cr.failures.Load())
	return cr.violations()
}

func (cr *crashRun) violations() []string {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return append([]string(nil), cr.errs...)
}

// TestCrashImmediateStop kills the server under load three times: every
// acknowledged claim must survive, and no key may be answered fresh twice.
func TestCrashImmediateStop(t *testing.T) {
	c := pgtest.Start(t, pgtest.Options{})
	o := testOptions(t, c.DSN(), "crash")
	o.MaxConns = crashWorkers
	errs := runCrashCycles(t, c, o, 3, uint64(time.Now().UnixNano()), false)
	for i, e := range errs {
		if i == 20 {
			t.Errorf("... and %d more", len(errs)-20)
			break
		}
		t.Error(e)
	}
}

// TestCrashCheckCatchesLostClaims shows that the crash check can fail: on a
// server that acknowledges commits before flushing them
// (synchronous_commit=off, accepted with AllowNonDurable, and a WAL writer
// that waits long), a kill loses acknowledged claims, and the check says so.
func TestCrashCheckCatchesLostClaims(t *testing.T) {
	c := pgtest.Start(t, pgtest.Options{Settings: map[string]string{
		"synchronous_commit": "off", "wal_writer_delay": "10s", "wal_writer_flush_after": "0",
	}})
	o := testOptions(t, c.DSN(), "crash")
	o.MaxConns = crashWorkers
	o.AllowNonDurable = true
	var logs syncbuf.Buffer // its warning is expected
	o.Logger = slogTo(&logs)
	errs := runCrashCycles(t, c, o, 3, uint64(time.Now().UnixNano()), true)
	lost := 0
	for _, e := range errs {
		if strings.Contains(e, "want the record") || strings.Contains(e, "fresh twice") {
			lost++
		}
	}
	if lost == 0 {
		t.Fatalf("a server with synchronous_commit=off killed up to 3 times under load: got no lost claim, want the crash check to report some (violations: %v)", errs)
	}
	t.Logf("the crash check reported %d lost claims on a non-durable server (as it should); first: %s", lost, errs[0])
}
