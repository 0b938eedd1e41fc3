package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/internal/redistest"
)

// auditDouble is a line of spent audit --json.
type auditDouble struct {
	Namespace string `json:"namespace"`
	Hash      string `json:"hash"`
	First     struct {
		Seq  string `json:"seq"`
		Node uint32 `json:"node"`
	} `json:"first"`
	Second struct {
		Seq  string `json:"seq"`
		Node uint32 `json:"node"`
	} `json:"second"`
}

func (d auditDouble) String() string {
	return fmt.Sprintf("%s/%s: seq %s on node %d, then seq %s on node %d", d.Namespace, d.Hash, d.First.Seq, d.First.Node, d.Second.Seq, d.Second.Node)
}

// TestAuditAfterFailover is the acceptance audit's real test: two spent
// servers (nodes 1 and 2) on a Redis primary with a replica, claims under
// load, the primary SIGKILLed and the replica promoted (REPLICAOF NO ONE),
// the servers' store address repointed to it (a proxy stands for the
// virtual IP or Sentinel-aware address an operator moves), and every claim
// retried through the other node. "spent audit" over both nodes' logs must
// list exactly the keys the clients saw accepted fresh twice, with both
// seqs and nodes. In "Failover" the replication link is cut before the
// second phase of claims, so the replica misses them; in "Control" it is
// not, and the failover waits for the replica to catch up: no double.
func TestAuditAfterFailover(t *testing.T) {
	for _, c := range []struct {
		name string
		cut  bool
	}{{"Failover", true}, {"Control", false}} {
		t.Run(c.name, func(t *testing.T) { runFailover(t, c.cut) })
	}
}

// claimSeen is one answer a client received.
type claimSeen struct {
	outcome spent.Outcome
	seq     spent.Seq
	hash    spent.Hash
}

func runFailover(t *testing.T, cut bool) {
	primary := redistest.Start(t)
	link := redistest.NewProxy(t, primary.Addr)
	replica := redistest.StartReplica(t, link.Addr)
	front := redistest.NewProxy(t, primary.Addr)
	storeURL := "redis://" + front.Addr

	dataA, dataB := t.TempDir(), t.TempDir()
	auditA, auditB := filepath.Join(t.TempDir(), "audit"), filepath.Join(t.TempDir(), "audit")
	conf := func(node int, dir string) string {
		return WriteConfig(t, fmt.Sprintf("node = %d\nfence_interval = \"1h\"\n\n[audit]\ndir = %q\n", node, dir))
	}
	a := MustServe(t, dataA, nil, nil, "--store", storeURL, "--config", conf(1, auditA))
	secret, err := os.ReadFile(filepath.Join(dataA, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataB, "secret"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	b := MustServe(t, dataB, nil, nil, "--store", storeURL, "--config", conf(2, auditB), "--new-fence")
	clients := []*sphttp.Client{sphttp.NewClient(a.Addr, sphttp.ClientConfig{}), sphttp.NewClient(b.Addr, sphttp.ClientConfig{})}

	const (
		phase1  = 200 // claims replicated before anything happens
		phase2  = 400 // claims during which the primary fails
		killAt  = 150 // fresh answers of phase 2 before the kill
		workers = 8
	)
	seen := make([][]claimSeen, phase1+phase2)
	var seenMu sync.Mutex
	// claim claims key i through client c until it gets an answer.
	claim := func(i, c int) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			ans, err := clients[c].Claim(context.Background(), spent.Claim{
				Namespace: "default", Key: fmt.Sprintf("pay-%d", i), Place: fmt.Sprintf("client via node %d", c+1), Result: []byte("paid"),
			})
			if err == nil {
				seenMu.Lock()
				seen[i] = append(seen[i], claimSeen{ans.Outcome, ans.Record.Seq, ans.Record.Hash})
				seenMu.Unlock()
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("key %d through node %d: still failing after 60s: %v", i, c+1, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// run claims keys [from, to) with workers; each fresh answer adds to
	// fresh.
	var fresh atomic.Int64
	run := func(from, to, via int) *sync.WaitGroup {
		var next atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < to; i = int(next.Add(1) - 1) {
					claim(i, (i+via)%2)
					seenMu.Lock()
					if n := len(seen[i]); n > 0 && seen[i][n-1].outcome == spent.Fresh {
						fresh.Add(1)
					}
					seenMu.Unlock()
				}
			})
		}
		return &wg
	}

	run(0, phase1, 0).Wait()
	primary.WaitReplicas(t, 1, 10*time.Second)
	if cut {
		link.Cut()
	}
	fresh.Store(0)
	load := run(phase1, phase1+phase2, 0)
	if cut {
		// The primary dies under load, with claims acknowledged that the
		// replica never received.
		for fresh.Load() < killAt {
			time.Sleep(time.Millisecond)
		}
		primary.Kill(t)
		time.Sleep(200 * time.Millisecond) // claims fail meanwhile, and are retried
	} else {
		load.Wait()
		primary.WaitReplicas(t, 1, 10*time.Second)
		primary.Kill(t)
	}
	replica.Promote(t)
	front.Repoint(replica.Addr)
	load.Wait()
	// Every key again, through the other node.
	run(0, phase1+phase2, 1).Wait()
	if t.Failed() {
		return
	}

	// The doubles the clients saw: a key answered fresh more than once.
	var want []string
	for i, answers := range seen {
		var fr []claimSeen
		for _, s := range answers {
			if s.outcome == spent.Fresh {
				fr = append(fr, s)
			}
		}
		if len(answers) != 2 {
			t.Fatalf("key %d: got %d answers, want 2", i, len(answers))
		}
		for j := 1; j < len(fr); j++ {
			want = append(want, auditDoubleOf(fr[j-1], fr[j]).String())
		}
	}
	if cut && len(want) == 0 {
		t.Fatalf("no key was accepted twice: the failover lost nothing, so this run tests nothing")
	}

	r := Run(t, nil, "audit", "--json", auditA, auditB)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if line == "" {
			continue
		}
		var d auditDouble
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("spent audit --json: line %q: %v", line, err)
		}
		got = append(got, d.String())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("spent audit: got %d doubles %q,\nwant the %d the clients saw %q\nstderr: %s", len(got), got, len(want), want, r.Stderr)
	}
	wantCode := 0
	if len(want) > 0 {
		wantCode = 1
	}
	if r.Code != wantCode {
		t.Fatalf("spent audit: got exit %d, want %d; stderr: %s", r.Code, wantCode, r.Stderr)
	}
	t.Logf("%d keys accepted twice, all found by spent audit", len(want))

	// Which machine processed this payment: a lookup by key shows each
	// acceptance, with its node.
	for i, answers := range seen {
		if answers[0].outcome != spent.Fresh {
			continue
		}
		out := MustRun(t, nil, "audit", auditA, auditB, "--namespace", "default", "--key", fmt.Sprintf("pay-%d", i), "--data", dataA)
		for _, s := range answers {
			if s.outcome == spent.Fresh && !strings.Contains(out, fmt.Sprintf("seq %s  node %d", s.seq, s.seq.Node)) {
				t.Fatalf("spent audit --key pay-%d: got %q, want the acceptance seq %s on node %d", i, out, s.seq, s.seq.Node)
			}
		}
		break
	}
}

// auditDoubleOf is the double that two fresh answers of one key make.
func auditDoubleOf(first, second claimSeen) auditDouble {
	var d auditDouble
	d.Namespace, d.Hash = "default", first.hash.String()
	d.First.Seq, d.First.Node = first.seq.String(), first.seq.Node
	d.Second.Seq, d.Second.Node = second.seq.String(), second.seq.Node
	return d
}
