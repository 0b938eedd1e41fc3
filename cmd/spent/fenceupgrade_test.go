package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	spentcmd "github.com/spentledger/spent/cmd/spent"
	"github.com/spentledger/spent/internal/crashpoint"
	"github.com/spentledger/spent/internal/redistest"
	"github.com/spentledger/spent/pebble"
)

// v1CanaryKey is the store key a version 1 fence gave canary n of node in
// generation gen (a fact of that version's file format, restated here).
func v1CanaryKey(gen uint64, node uint32, n uint64) spent.Hash {
	var b [20]byte
	binary.BigEndian.PutUint64(b[:], gen)
	binary.BigEndian.PutUint32(b[8:], node)
	binary.BigEndian.PutUint64(b[12:], n)
	sum := sha256.Sum256(append([]byte("spent: fence canary v1\x00"), b[:]...))
	var h spent.Hash
	copy(h[:], sum[:])
	return h
}

// TestFenceUpgrade starts a server on the data directory of an older one,
// whose fence file is version 1 and whose canary carries no proof: the fence
// is checked, upgraded, and its old canary released; a version 1 fence whose
// canary is gone is refused.
func TestFenceUpgrade(t *testing.T) {
	data := t.TempDir()
	cfg := WriteConfig(t, twoNamespaces)
	s := MustServe(t, data, nil, nil, "--config", cfg)
	ClaimBoth(t, s.Addr)
	s.Stop()

	// What a version 1 server left: canary 7 of generation 1, and a fence
	// file naming it.
	key := v1CanaryKey(1, 1, 7)
	st, err := pebble.Open(filepath.Join(data, "pebble"), pebble.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ctr, err := st.ReserveSeq(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	seq := spent.Seq{Node: 1, Counter: ctr}
	if _, err := st.Claim(ctx, spent.ClaimOp{Now: now, Record: spent.Record{
		Namespace: spent.ReservedPrefix + "fence", Hash: key, FirstSeen: now, Place: "fence", State: spent.StatePending,
		ExpiresAt: now.Add(100 * 365 * 24 * time.Hour), LeaseUntil: now.Add(50 * 365 * 24 * time.Hour), Seq: seq,
	}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	v1 := fmt.Sprintf(`{"version":1,"generation":1,"node":1,"canary":7,"seq":"%s"}`+"\n", seq)
	fencePath := filepath.Join(data, "fence")
	if err := os.WriteFile(fencePath, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}

	// A crash right after the upgraded file is written: the restart goes
	// on with it.
	if r := RunBinary(t, []string{crashpoint.EnvVar + "=fence.upgraded"}, "serve", "--listen", "127.0.0.1:0", "--data", data, "--config", cfg); !r.Killed() {
		t.Fatalf("serve with %s=fence.upgraded: got %v, want killed by SIGKILL; stderr:\n%s", crashpoint.EnvVar, r.Err, r.Stderr)
	}
	s = MustServe(t, data, nil, nil, "--config", cfg)
	AssertRepeats(t, s.Addr)
	s.Stop()
	b, err := os.ReadFile(fencePath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"version":2`) || !strings.Contains(string(b), `"id":"`) {
		t.Fatalf("fence after a start on a version 1 fence: got %s, want version 2 with an id", b)
	}
	st, err = pebble.Open(filepath.Join(data, "pebble"), pebble.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, key, time.Now()); !errors.Is(err, spent.ErrNotFound) {
		t.Fatalf("the version 1 canary after the upgrade: got %v, want it released", err)
	}
	st.Close()
	MustServe(t, data, nil, nil, "--config", cfg).Stop()

	// A version 1 fence whose canary the store lacks is a store gone back.
	if err := os.WriteFile(fencePath, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, r := TryServe(t, data, nil, nil, "--config", cfg); s != nil || !strings.Contains(r.Stderr, "the store went backwards") {
		t.Fatalf("a version 1 fence naming a canary the store lacks: exit %d, stderr %q; want a refusal", r.Code, r.Stderr)
	}
}

// TestFenceCrashShared kills the server at the steps of its start on a
// shared store, the node lease's among them: a restart takes its own lease
// over at once and answers every key claimed before as a repeat.
func TestFenceCrashShared(t *testing.T) {
	url := redistest.Start(t).URL()
	data := t.TempDir()
	cfg := WriteConfig(t, twoNamespaces)
	s := MustServe(t, data, nil, nil, "--store", url, "--config", cfg)
	ClaimBoth(t, s.Addr)
	s.Stop()
	for _, point := range []string{"fence.lease-taken", "fence.seq-reserved", "fence.lease-renewed", "fence.canary-written", "atomicfile:fence:synced", "fence.file-written"} {
		t.Run(point, func(t *testing.T) {
			r := RunBinary(t, []string{crashpoint.EnvVar + "=" + point}, "serve", "--listen", "127.0.0.1:0", "--data", data, "--store", url, "--config", cfg)
			if !r.Killed() {
				t.Fatalf("serve with %s=%s: got %v, want killed by SIGKILL at that point; stderr:\n%s", crashpoint.EnvVar, point, r.Err, r.Stderr)
			}
			s, res := TryServe(t, data, nil, nil, "--store", url, "--config", cfg)
			if s == nil {
				t.Fatalf("restart after a crash at %s: exit %d, want a start; stderr:\n%s", point, res.Code, res.Stderr)
			}
			AssertRepeats(t, s.Addr)
			AssertNoTempFiles(t, data)
			if code := s.Stop(); code != 0 {
				t.Fatalf("serve exit: got %d, want 0; stderr:\n%s", code, s.Stderr)
			}
		})
	}
}

// TestNodeLeaseFault fails the renewal of the node lease once, after the
// store wrote it: the server keeps its node, warns once, and restarts.
func TestNodeLeaseFault(t *testing.T) {
	url := redistest.Start(t).URL()
	data := t.TempDir()
	cfg := WriteConfig(t, twoNamespaces)
	fs := &FaultyStore{Method: "ClaimAfter", Namespace: spent.ReservedPrefix + "node"}
	s := MustServe(t, data, nil, func(m *spentcmd.Main) {
		m.WrapStore = func(st spent.Store) spent.Store { fs.Store = st; return fs }
	}, "--store", url, "--config", cfg)
	ClaimBoth(t, s.Addr)
	_, c := FenceCanary(t, data)
	fs.Arm()
	WaitFence(t, data, WaitFence(t, data, c))
	if fs.Fired() != 1 {
		t.Fatalf("injected faults: got %d, want 1", fs.Fired())
	}
	s.Stop()
	if n := countLines(s.Stderr.String(), "level=WARN", `msg="fence:`); n != 1 {
		t.Fatalf("fence warnings: got %d, want 1; stderr:\n%s", n, s.Stderr)
	}
	s = MustServe(t, data, nil, nil, "--store", url, "--config", cfg)
	AssertRepeats(t, s.Addr)
}
