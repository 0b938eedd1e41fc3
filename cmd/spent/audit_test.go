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
	"github.com/spentledger/spent/audit"
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
// second phase of claims, so the replica misses them. Two control runs must
// find no double: "ControlCaughtUp" fails over once the replica has caught
// up, "ControlNoFailover" keeps the primary.
func TestAuditAfterFailover(t *testing.T) {
	for _, c := range []struct {
		name string
		mode failoverMode
	}{{"Failover", lagging}, {"ControlCaughtUp", caughtUp}, {"ControlNoFailover", noFailover}} {
		t.Run(c.name, func(t *testing.T) { runFailover(t, c.mode) })
	}
}

// failoverMode says how a run of runFailover fails over.
type failoverMode int

const (
	lagging    failoverMode = iota // cut the link, kill the primary under load
	caughtUp                       // kill the primary once the replica has everything
	noFailover                     // keep the primary
)

// claimSeen is one answer a client received.
type claimSeen struct {
	outcome spent.Outcome
	seq     spent.Seq
	hash    spent.Hash
}

func runFailover(t *testing.T, mode failoverMode) {
	cut := mode == lagging
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
	}
	if mode != noFailover {
		if !cut {
			primary.Kill(t)
		}
		replica.Promote(t)
		front.Repoint(replica.Addr)
	}
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

// TestAuditCommand runs spent audit on the logs of an embedded-store
// server: its exit statuses, its lookups and its refusals.
func TestAuditCommand(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(t.TempDir(), "audit")
	cfg := WriteConfig(t, fmt.Sprintf("[audit]\ndir = %q\nmax_file_size = 65536\n", dir))
	s := MustServe(t, data, nil, nil, "--config", cfg)
	c := sphttp.NewClient(s.Addr, sphttp.ClientConfig{})
	ctx := context.Background()
	first, err := c.Claim(ctx, spent.Claim{Namespace: "default", Key: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, spent.Release{Namespace: "default", Key: "order-1", Seq: first.Record.Seq}); err != nil {
		t.Fatal(err)
	}
	again, err := c.Claim(ctx, spent.Claim{Namespace: "default", Key: "order-1", Result: []byte("ok")})
	if err != nil || again.Outcome != spent.Fresh {
		t.Fatalf("claim after release: got %v, %v, want fresh", again.Outcome, err)
	}
	if code := s.Stop(); code != 0 {
		t.Fatalf("serve: exit %d", code)
	}

	t.Run("ReleaseThenClaimIsNoDouble", func(t *testing.T) {
		r := Run(t, nil, "audit", dir)
		if r.Code != 0 || !strings.Contains(r.Stdout, "no double acceptance in 3 events") {
			t.Fatalf("spent audit: got exit %d, stdout %q, want 0 and no double in 3 events; stderr %s", r.Code, r.Stdout, r.Stderr)
		}
	})
	t.Run("LookupByKey", func(t *testing.T) {
		out := MustRun(t, nil, "audit", dir, "-n", "default", "--key", "order-1", "--data", data)
		for _, want := range []string{
			fmt.Sprintf("accepted  seq %s  node 1", first.Record.Seq), fmt.Sprintf("released  seq %s  node 1", first.Record.Seq),
			fmt.Sprintf("accepted  seq %s  node 1", again.Record.Seq),
		} {
			if !strings.Contains(out, want) {
				t.Fatalf("lookup: got %q, want a line with %q", out, want)
			}
		}
	})
	t.Run("LookupByHash", func(t *testing.T) {
		out := MustRun(t, nil, "audit", dir, "--hash", first.Record.Hash.String(), "--json")
		if n := strings.Count(out, "\n"); n != 3 {
			t.Fatalf("lookup --json: got %d lines %q, want 3", n, out)
		}
	})
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"UnknownKey", []string{"audit", dir, "-n", "default", "--key", "order-2", "--data", data}, 7, "no event of hash"},
		{"KeyWithoutNamespace", []string{"audit", dir, "--key", "order-1"}, 2, "--key needs --namespace"},
		{"KeyWithoutSecret", []string{"audit", dir, "-n", "default", "--key", "order-1", "--data", t.TempDir()}, 2, "cannot read the secret"},
		{"BadHash", []string{"audit", dir, "--hash", "xyz"}, 2, "--hash"},
		{"NoPath", []string{"audit"}, 2, "missing an audit log"},
		{"MissingPath", []string{"audit", filepath.Join(dir, "nope")}, 3, "cannot read"},
		{"EmptyDirectory", []string{"audit", t.TempDir()}, 3, "holds no audit log"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Run(t, nil, c.args...)
			if r.Code != c.code || !strings.Contains(r.Stderr, c.msg) {
				t.Fatalf("spent %s: got exit %d, stderr %q, want %d and %q", strings.Join(c.args, " "), r.Code, r.Stderr, c.code, c.msg)
			}
		})
	}
	t.Run("DamagedLog", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		if len(files) != 1 {
			t.Fatalf("log files: got %q, want 1", files)
		}
		b, _ := os.ReadFile(files[0])
		b[1] = '#'
		damaged := filepath.Join(t.TempDir(), filepath.Base(files[0]))
		if err := os.WriteFile(damaged, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r := Run(t, nil, "audit", damaged)
		if r.Code != 3 || !strings.Contains(r.Stderr, damaged) || !strings.Contains(r.Stderr, "offset 0") {
			t.Fatalf("spent audit on a damaged log: got exit %d, stderr %q, want 3 naming %s at offset 0", r.Code, r.Stderr, damaged)
		}
	})
	t.Run("TornTail", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		b, _ := os.ReadFile(files[0])
		torn := filepath.Join(t.TempDir(), filepath.Base(files[0]))
		if err := os.WriteFile(torn, append(b, `{"kind":"acc`...), 0o600); err != nil {
			t.Fatal(err)
		}
		r := Run(t, nil, "audit", torn)
		if r.Code != 0 || !strings.Contains(r.Stderr, fmt.Sprintf("%s: offset %d: last line torn", torn, len(b))) {
			t.Fatalf("spent audit on a torn log: got exit %d, stderr %q, want 0 and a warning at offset %d", r.Code, r.Stderr, len(b))
		}
	})
}

// TestAuditConfig: the [audit] table is checked at start.
func TestAuditConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, conf, msg string
		code            int
	}{
		{"SizeWithoutDir", "[audit]\nmax_file_size = 1000000\n", "max_file_size without dir", 2},
		{"TinyFile", "[audit]\ndir = \"x\"\nmax_file_size = 10\n", "max file size 10", 2},
		{"DirIsAFile", fmt.Sprintf("[audit]\ndir = %q\n", file), "[audit] dir must be a writable directory", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--config", WriteConfig(t, c.conf))
			if r.Code != c.code || !strings.Contains(r.Stderr, c.msg) {
				t.Fatalf("serve with %q: got exit %d, stderr %q, want %d and %q", c.conf, r.Code, r.Stderr, c.code, c.msg)
			}
		})
	}
}

// TestOperationsAuditCommands runs the spent audit commands of
// docs/operations.md ("After a failover: run the audit") as written, on logs
// holding the double the page shows, and checks the page's sample output.
func TestOperationsAuditCommands(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "## After a failover: run the audit")
	sec, _, ok2 := strings.Cut(sec, "\n## ")
	if !ok || !ok2 {
		t.Fatal(`docs/operations.md has no section "After a failover: run the audit"`)
	}
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data")
	secret := make([]byte, spent.MinSecretLen)
	for i := range secret {
		secret[i] = byte(i)
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "secret"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	h := spent.KeyHash(secret, "payments", "order-8400017")
	for node, ev := range map[uint32]struct {
		seq   uint64
		at    string
		place string
	}{1: {8400017, "2026-12-03T02:55:01.12Z", "api-3"}, 2: {130442, "2026-12-03T02:55:09.8Z", "api-1"}} {
		at, err := time.Parse(time.RFC3339Nano, ev.at)
		if err != nil {
			t.Fatal(err)
		}
		l, err := audit.Open(audit.Config{Dir: filepath.Join(tmp, fmt.Sprintf("node%d-audit", node)), Node: node})
		if err != nil {
			t.Fatal(err)
		}
		err = l.Append(context.Background(), []spent.AuditEvent{{Kind: spent.AuditAccepted, Time: at, Node: node, Namespace: "payments", Hash: h,
			Seq: spent.Seq{Node: node, Counter: ev.seq}, Place: ev.place, State: spent.StateComplete, ExpiresAt: at.Add(24 * time.Hour)}})
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	paths := strings.NewReplacer("node1-audit/", filepath.Join(tmp, "node1-audit")+"/", "node2-audit/", filepath.Join(tmp, "node2-audit")+"/", "/var/lib/spent", data)
	var cmds int
	for _, line := range strings.Split(sec, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "spent audit ") {
			continue
		}
		line, _, _ = strings.Cut(line, "#")
		args := strings.Fields(paths.Replace(line))[1:]
		cmds++
		t.Run(fmt.Sprintf("Command%d", cmds), func(t *testing.T) {
			r := Run(t, nil, args...)
			want := 1
			if strings.Contains(line, "--key") || strings.Contains(line, "--hash") {
				want = 0
			}
			if r.Code != want || !strings.Contains(r.Stdout, "node 1") && !strings.Contains(r.Stdout, `"node":1`) {
				t.Fatalf("%s: got exit %d, stdout %q, stderr %q, want exit %d and node 1 named", line, r.Code, r.Stdout, r.Stderr, want)
			}
			if strings.HasPrefix(r.Stdout, "double") {
				// The page shows the output inside a list item, indented.
				shown := "   " + strings.ReplaceAll(strings.TrimSuffix(r.Stdout, "\n"), "\n", "\n   ")
				if !strings.Contains(sec, shown) {
					t.Fatalf("%s: got\n%s\nwhich docs/operations.md does not show as its output", line, r.Stdout)
				}
			}
		})
	}
	if cmds != 4 {
		t.Fatalf("spent audit commands in the section: got %d, want 4", cmds)
	}
}
