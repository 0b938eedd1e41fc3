package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
)

// TestClonedFilterFileIsRefused is issue 31, finding 1, end to end: a
// SPENT-FILTER saved by a copy of the data directory, put in place of the
// store's own after a kill -9, must not make an acknowledged key fresh.
//
// Data directory A holds 100,000 records and is stopped; cp -a A B; B
// claims one key and stops, saving its filter. A starts, claims victim
// (fresh, then a repeat), claims more keys so that its rounds pass the one
// B's file covers, lets its fence advance (the issue kept A running 25 s
// for both), and is killed with SIGKILL. B's SPENT-FILTER is copied over
// A's and A starts again: it must refuse the file (a rebuild, logged), and
// victim must be a repeat.
//
// The fence's canary is read through the same filter: had A's newest
// canary been written before the round B's file covers, a spent that
// trusted the file would refuse to start (the store went backwards), and
// victim would never be asked; written after it, it is in the journal, the
// start passes, and victim is answered from the file alone.
func TestClonedFilterFileIsRefused(t *testing.T) {
	base := t.TempDir()
	dataA, dataB := filepath.Join(base, "A"), filepath.Join(base, "B")
	cfg := WriteConfig(t, "fence_interval = \"1s\"\n")
	MustServe(t, dataA, nil, nil, "--config", cfg).Stop()

	secret, err := os.ReadFile(filepath.Join(dataA, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	keyHash := func(key string) spent.Hash { return spent.KeyHash(secret, "default", key) }
	const later = 30 // keys A claims after victim
	var shielded []spent.Hash
	shielded = append(shielded, keyHash("victim"))
	for i := range later {
		shielded = append(shielded, keyHash(fmt.Sprintf("later-%d", i)))
	}
	fillPebble(t, filepath.Join(dataA, "pebble"), 100_000, shielded)

	if out, err := exec.Command("cp", "-a", dataA, dataB).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	b := StartBinary(t, nil, "--data", dataB, "--config", cfg)
	if got := ClaimOutcome(t, b.Addr, "default", "only-in-b"); got != "fresh" {
		t.Fatalf("B's claim: got %s, want fresh", got)
	}
	b.Stop()

	a := StartBinary(t, nil, "--data", dataA, "--config", cfg)
	if got := ClaimOutcome(t, a.Addr, "default", "victim"); got != "fresh" {
		t.Fatalf("first claim of victim: got %s, want fresh", got)
	}
	if got := ClaimOutcome(t, a.Addr, "default", "victim"); got != "replayed" {
		t.Fatalf("second claim of victim: got %s, want replayed", got)
	}
	for i := range later {
		if got := ClaimOutcome(t, a.Addr, "default", fmt.Sprintf("later-%d", i)); got != "fresh" {
			t.Fatalf("claim of later-%d: got %s, want fresh", i, got)
		}
	}
	_, canary := FenceCanary(t, dataA)
	WaitFence(t, dataA, canary)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.done

	// The saved filter, in the store's directory.
	const filterFile = "SPENT-FILTER"
	foreign, err := os.ReadFile(filepath.Join(dataB, "pebble", filterFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataA, "pebble", filterFile), foreign, 0o600); err != nil {
		t.Fatal(err)
	}
	a = StartBinary(t, nil, "--data", dataA, "--config", cfg)
	if got := ClaimOutcome(t, a.Addr, "default", "victim"); got != "replayed" {
		t.Fatalf("claim of victim with B's SPENT-FILTER in place: got %s, want replayed (stderr:\n%s)", got, a.Stderr)
	}
	for i := range later {
		if got := ClaimOutcome(t, a.Addr, "default", fmt.Sprintf("later-%d", i)); got != "replayed" {
			t.Fatalf("claim of later-%d with B's SPENT-FILTER in place: got %s, want replayed", i, got)
		}
	}
	log := a.Stderr.String()
	if !strings.Contains(log, "cannot be trusted") || !strings.Contains(log, "not this store's own latest save") ||
		strings.Contains(log, "existence filter loaded") {
		t.Fatalf("A's log with B's SPENT-FILTER in place does not say it refused the file:\n%s", log)
	}
}

// fillPebble claims n random keys, and the 100 keys just below each of
// shielded (read as big-endian numbers), in the stopped pebble store at
// dir. A saved filter that lacks a shielded key passes the sample of stored
// keys a load checks for certain: the sample reads runs of 64 keys from
// random places, and reaches a shielded key only from one of the 100 values
// just below it (see pebble's filterswap_test.go).
func fillPebble(t *testing.T, dir string, n int, shielded []spent.Hash) {
	t.Helper()
	st, err := pebble.Open(dir, pebble.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(31, 1))
	var keys []spent.Hash
	for range n {
		var h spent.Hash
		for i := range h {
			h[i] = byte(rng.Uint32())
		}
		keys = append(keys, h)
	}
	for _, h := range shielded {
		for range 100 {
			for i := len(h) - 1; i >= 0; i-- {
				h[i]--
				if h[i] != 0xff {
					break
				}
			}
			keys = append(keys, h)
		}
	}
	now := time.Now()
	ops := make([]spent.ClaimOp, 0, 1000)
	for i, h := range keys {
		ops = append(ops, spent.ClaimOp{Now: now, Record: spent.Record{
			Namespace: "default", Hash: h, FirstSeen: now, Place: "fill", State: spent.StateComplete,
			Result: []byte("ok"), ExpiresAt: now.Add(24 * time.Hour), Seq: spent.Seq{Node: 9999, Counter: uint64(i + 1)},
		}})
		if len(ops) == cap(ops) || i == len(keys)-1 {
			if _, err := st.ClaimBatch(context.Background(), ops); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
