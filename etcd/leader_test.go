package etcd_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/internal/etcdtest"
	"github.com/spentledger/spent/storetest"
)

// The leader test kills the cluster's leader with SIGKILL, twice, while
// leaderWorkers goroutines claim through one ledger whose store knows every
// member, and restarts each killed member on its data directory. It then
// checks that the cluster went on, that every acknowledged claim is still
// there (read through the first killed member alone), that no key was
// answered fresh twice, and that the history of claims and reads, with
// failed claims as operations of unknown outcome, is linearizable.
const (
	leaderWorkers = 24
	leaderHotKeys = 48
	leaderNS      = "pay"
)

// leaderIn is a claim (of Key, storing Result) or a read of Key.
type leaderIn struct {
	Get    bool
	Key    string
	Result string // unique per claim
}

// leaderOut is an answer. Unknown marks a claim that failed: it may or may
// not have been written, now or later.
type leaderOut struct {
	Unknown bool
	Found   bool // get
	Outcome spent.Outcome
	Result  string
	Seq     spent.Seq
}

// leaderModel is the sequential specification of one key: its state is the
// Result of the claim that wrote it, "" while the key is free.
func leaderModel() porcupine.Model {
	m := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range h {
				k := op.Input.(leaderIn).Key
				if _, ok := by[k]; !ok {
					order = append(order, k)
				}
				by[k] = append(by[k], op)
			}
			parts := make([][]porcupine.Operation, len(order))
			for i, k := range order {
				parts[i] = by[k]
			}
			return parts
		},
		Init: func() []any { return []any{""} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(string), input.(leaderIn), output.(leaderOut)
			switch {
			case in.Get && out.Found:
				if s != "" && out.Result == s {
					return []any{s}
				}
			case in.Get:
				if s == "" {
					return []any{s}
				}
			case out.Unknown:
				if s == "" {
					return []any{s, in.Result}
				}
				return []any{s}
			case out.Outcome == spent.Fresh:
				if s == "" && out.Result == in.Result {
					return []any{in.Result}
				}
			case out.Outcome == spent.Replayed:
				if s != "" && out.Result == s {
					return []any{s}
				}
			}
			return nil
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(leaderIn), output.(leaderOut)
			if in.Get {
				if !out.Found {
					return fmt.Sprintf("get(%s) -> none", in.Key)
				}
				return fmt.Sprintf("get(%s) -> %s %v", in.Key, out.Result, out.Seq)
			}
			if out.Unknown {
				return fmt.Sprintf("claim(%s, %s) -> unknown", in.Key, in.Result)
			}
			return fmt.Sprintf("claim(%s, %s) -> %s %s %v", in.Key, in.Result, out.Outcome, out.Result, out.Seq)
		},
		DescribeState: func(state any) string {
			if state.(string) == "" {
				return "free"
			}
			return state.(string)
		},
	}
	return m.ToModel()
}

// leaderRun is the load and its history.
type leaderRun struct {
	ledger *spent.Ledger
	base   time.Time

	next atomic.Int64 // new-key counter
	ok   atomic.Int64 // claims answered without error

	mu     sync.Mutex
	hist   []porcupine.Operation
	recent []string // recent new keys, to claim again
	errs   int
}

func (r *leaderRun) stamp() int64 { return int64(time.Since(r.base)) }

func (r *leaderRun) record(client int, in leaderIn, call int64, out leaderOut, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hist = append(r.hist, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// pick chooses the next operation of a worker.
func (r *leaderRun) pick(rng *rand.Rand, client, n int) leaderIn {
	res := "c" + strconv.Itoa(client) + "." + strconv.Itoa(n)
	x := rng.IntN(100)
	switch {
	case x < 35:
		return leaderIn{Key: "hot" + strconv.Itoa(rng.IntN(leaderHotKeys)), Result: res}
	case x < 80:
		key := "new" + strconv.FormatInt(r.next.Add(1), 10)
		r.mu.Lock()
		r.recent = append(r.recent, key)
		if len(r.recent) > 512 {
			r.recent = r.recent[256:]
		}
		r.mu.Unlock()
		return leaderIn{Key: key, Result: res}
	}
	r.mu.Lock()
	var key string
	if len(r.recent) > 0 {
		key = r.recent[rng.IntN(len(r.recent))]
	}
	r.mu.Unlock()
	if key == "" {
		key = "hot0"
	}
	return leaderIn{Get: x >= 90, Key: key, Result: res}
}

// work runs one worker until stop is closed.
func (r *leaderRun) work(client int, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
	ctx := context.Background()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		in := r.pick(rng, client, n)
		call := r.stamp()
		if in.Get {
			rec, err := r.ledger.Get(ctx, leaderNS, in.Key)
			switch code := spent.ErrorCode(err); code {
			case "":
				r.record(client, in, call, leaderOut{Found: true, Result: string(rec.Result), Seq: rec.Seq}, r.stamp())
			case spent.ENotFound:
				r.record(client, in, call, leaderOut{}, r.stamp())
			default:
				// A failed read changes nothing: it is left out.
			}
			continue
		}
		res, err := r.ledger.Claim(ctx, spent.Claim{Namespace: leaderNS, Key: in.Key, Place: "leader-test", Result: []byte(in.Result)})
		if err != nil {
			r.mu.Lock()
			r.errs++
			r.mu.Unlock()
			// Unknown outcome: the claim may take effect at any time
			// after its call, so it never returns.
			r.record(client, in, call, leaderOut{Unknown: true}, -1)
			continue
		}
		r.ok.Add(1)
		r.record(client, in, call, leaderOut{Outcome: res.Outcome, Result: string(res.Record.Result), Seq: res.Record.Seq}, r.stamp())
	}
}

// waitClaims runs until n more claims were answered, and at least d passed.
func (r *leaderRun) waitClaims(t *testing.T, n int64, d time.Duration) {
	t.Helper()
	start, from := time.Now(), r.ok.Load()
	deadline := start.Add(60 * time.Second)
	for r.ok.Load()-from < n || time.Since(start) < d {
		if time.Now().After(deadline) {
			t.Fatalf("%d claims answered in 60s, want %d: the cluster did not go on", r.ok.Load()-from, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLeaderKilledUnderLoad(t *testing.T) {
	c := etcdtest.Start(t, 3)
	opts := etcd.DefaultOptions()
	opts.Endpoints = c.Endpoints()
	opts.Prefix = "/leader-test/"
	opts.Logger = quietLogger()
	store := MustOpen(t, opts)

	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("leader test secret: 32 bytes or more")
	cfg.Namespaces = map[string]spent.Policy{leaderNS: {
		Mode: spent.ModeEcho, Retention: time.Hour, Lease: time.Minute, OnLeaseExpiry: spent.LeaseExpiryHold,
	}}
	cfg.SeqBlock = 64 // reserve often, through the kills too
	cfg.Now = storetest.NewClock(time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC)).Now
	ctx := context.Background()
	ledger, err := spent.NewLedger(ctx, store, cfg)
	if err != nil {
		t.Fatal(err)
	}

	r := &leaderRun{ledger: ledger, base: time.Now()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range leaderWorkers {
		wg.Go(func() { r.work(w, stop) })
	}
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer halt()

	r.waitClaims(t, 200, time.Second)
	var killed []int
	for round := range 2 {
		leader, err := c.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before := r.ok.Load()
		if err := c.Kill(leader); err != nil {
			t.Fatal(err)
		}
		killedAt := time.Now()
		killed = append(killed, leader)
		if err := c.WaitHealthy(ctx); err != nil {
			t.Fatalf("round %d: after killing the leader %s: %v", round, c.Members()[leader].Name, err)
		}
		if now, err := c.Leader(ctx); err != nil || now == leader {
			t.Fatalf("round %d: leader after killing %d: got %d, %v, want another member", round, leader, now, err)
		}
		r.waitClaims(t, 200, time.Second)
		t.Logf("round %d: killed leader %s with %d claims answered; new leader elected and 200 more claims answered %v later",
			round, c.Members()[leader].Name, before, time.Since(killedAt).Round(time.Millisecond))
		if err := c.Restart(ctx, leader); err != nil {
			t.Fatalf("round %d: restarting %s: %v", round, c.Members()[leader].Name, err)
		}
		r.waitClaims(t, 100, 500*time.Millisecond)
	}
	halt()

	// Read every key back through the first killed member alone: it
	// restarted on its data and caught up.
	one := opts
	one.Endpoints = []string{c.Members()[killed[0]].Endpoint()}
	verify := MustOpen(t, one)
	vl, err := spent.NewLedger(ctx, verify, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hist := r.hist
	end := r.stamp()
	keys := map[string]bool{}
	for _, op := range hist {
		keys[op.Input.(leaderIn).Key] = true
	}
	final := map[string]spent.Record{}
	for key := range keys {
		in := leaderIn{Get: true, Key: key}
		call := r.stamp()
		rec, err := vl.Get(ctx, leaderNS, key)
		out := leaderOut{}
		switch spent.ErrorCode(err) {
		case "":
			out = leaderOut{Found: true, Result: string(rec.Result), Seq: rec.Seq}
			final[key] = rec
		case spent.ENotFound:
		default:
			t.Fatalf("Get(%s) through the restarted member: %v", key, err)
		}
		hist = append(hist, porcupine.Operation{ClientId: leaderWorkers, Input: in, Call: call, Output: out, Return: r.stamp()})
	}
	for i := range hist {
		if hist[i].Return < 0 {
			hist[i].Return = r.stamp() + int64(time.Hour)
		}
	}

	// Every acknowledged claim is there, no key was fresh twice, and every
	// answer about a key names the same write.
	fresh := map[string]string{}
	seqOf := map[string]spent.Seq{}
	unknown := 0
	for _, op := range hist[:len(r.hist)] {
		in, out := op.Input.(leaderIn), op.Output.(leaderOut)
		if out.Unknown {
			unknown++
			continue
		}
		if !in.Get && out.Outcome == spent.Fresh {
			if prev, ok := fresh[in.Key]; ok {
				t.Errorf("key %s: fresh twice, for %s and %s", in.Key, prev, in.Result)
			}
			fresh[in.Key] = in.Result
		}
		if in.Get && !out.Found {
			continue
		}
		if s, ok := seqOf[out.Result]; ok && s != out.Seq {
			t.Errorf("key %s: result %s answered with seqs %v and %v", in.Key, out.Result, s, out.Seq)
		}
		seqOf[out.Result] = out.Seq
		rec, ok := final[in.Key]
		if !ok {
			t.Errorf("key %s: acknowledged %s (%s), gone after the restarts", in.Key, out.Result, out.Outcome)
			continue
		}
		if string(rec.Result) != out.Result || rec.Seq != out.Seq {
			t.Errorf("key %s: acknowledged %s %v, got %s %v after the restarts", in.Key, out.Result, out.Seq, rec.Result, rec.Seq)
		}
	}
	t.Logf("%d operations in %v, %d claims answered, %d of unknown outcome, %d keys",
		len(r.hist), time.Duration(end).Round(time.Millisecond), r.ok.Load(), unknown, len(keys))

	model := leaderModel()
	res, info := porcupine.CheckOperationsVerbose(model, hist, 2*time.Minute)
	if res != porcupine.Ok {
		path := filepath.Join(t.ArtifactDir(), "leader-linearizability.html")
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Errorf("writing the visualization: %v", err)
		}
		t.Fatalf("history of %d operations: got %v, want %v; visualization: %s (go test -artifacts keeps it)", len(hist), res, porcupine.Ok, path)
	}
}

// TestLeaderModelRejects shows that the leader test's checker can fail: a
// key answered fresh twice, and an acknowledged claim that a later read
// does not see, are not linearizable, while unknown outcomes may go either
// way.
func TestLeaderModelRejects(t *testing.T) {
	op := func(c int, in leaderIn, call int64, out leaderOut, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret}
	}
	claimA := leaderIn{Key: "k", Result: "a"}
	claimB := leaderIn{Key: "k", Result: "b"}
	get := leaderIn{Get: true, Key: "k"}
	cases := []struct {
		name string
		hist []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"FreshTwice", []porcupine.Operation{
			op(0, claimA, 0, leaderOut{Outcome: spent.Fresh, Result: "a"}, 10),
			op(1, claimB, 0, leaderOut{Outcome: spent.Fresh, Result: "b"}, 10),
		}, porcupine.Illegal},
		{"AckedThenLost", []porcupine.Operation{
			op(0, claimA, 0, leaderOut{Outcome: spent.Fresh, Result: "a"}, 10),
			op(1, get, 20, leaderOut{}, 30),
		}, porcupine.Illegal},
		{"ReplayOfAnother", []porcupine.Operation{
			op(0, claimA, 0, leaderOut{Outcome: spent.Fresh, Result: "a"}, 10),
			op(1, claimB, 20, leaderOut{Outcome: spent.Replayed, Result: "b"}, 30),
		}, porcupine.Illegal},
		{"UnknownTookEffect", []porcupine.Operation{
			op(0, claimA, 0, leaderOut{Unknown: true}, 1<<40),
			op(1, claimB, 20, leaderOut{Outcome: spent.Replayed, Result: "a"}, 30),
		}, porcupine.Ok},
		{"UnknownDidNot", []porcupine.Operation{
			op(0, claimA, 0, leaderOut{Unknown: true}, 1<<40),
			op(1, get, 20, leaderOut{}, 30),
			op(1, claimB, 40, leaderOut{Outcome: spent.Fresh, Result: "b"}, 50),
		}, porcupine.Ok},
	}
	for _, tc := range cases {
		if got := porcupine.CheckOperationsTimeout(leaderModel(), tc.hist, time.Minute); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
