package main_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spentledger/spent"
	spentcmd "github.com/spentledger/spent/cmd/spent"
	"github.com/spentledger/spent/internal/crashpoint"
)

// advancePoints are the crash points between the steps of a fence advance
// on the embedded store, in order.
var advancePoints = []string{
	"fence.seq-reserved",
	"fence.canary-written",
	"atomicfile:fence:synced",
	"atomicfile:fence:renamed",
	"fence.file-written",
	"fence.released",
}

// TestFenceCrash kills the server at each step of the fence's advance (the
// one at start): a plain restart then succeeds, answers every key claimed
// before as a repeat, and leaves neither a temporary file nor an extra canary.
func TestFenceCrash(t *testing.T) {
	for _, point := range advancePoints {
		t.Run(point, func(t *testing.T) {
			data := t.TempDir()
			cfg := WriteConfig(t, twoNamespaces)
			s := MustServe(t, data, nil, nil, "--config", cfg)
			ClaimBoth(t, s.Addr)
			s.Stop()

			r := RunBinary(t, []string{crashpoint.EnvVar + "=" + point}, "serve", "--listen", "127.0.0.1:0", "--data", data, "--config", cfg)
			if !r.Killed() {
				t.Fatalf("serve with %s=%s: got %v, want killed by SIGKILL at that point; stderr:\n%s", crashpoint.EnvVar, point, r.Err, r.Stderr)
			}

			s, res := TryServe(t, data, nil, nil, "--config", cfg)
			if s == nil {
				t.Fatalf("restart after a crash at %s: exit %d, want a start; stderr:\n%s", point, res.Code, res.Stderr)
			}
			AssertRepeats(t, s.Addr)
			AssertNoTempFiles(t, data)
			if code := s.Stop(); code != 0 {
				t.Fatalf("serve exit: got %d, want 0; stderr:\n%s", code, s.Stderr)
			}
			if n := LiveCanaries(t, filepath.Join(data, "pebble")); n != 1 {
				t.Fatalf("live canaries after a crash at %s and a restart: got %d, want 1", point, n)
			}
		})
	}
}

// TestFenceFaults fails one step of a running server's fence advance once:
// the server keeps serving, logs one warning, the next advance succeeds, and
// so does the next start.
func TestFenceFaults(t *testing.T) {
	cases := []struct {
		name  string
		store *FaultyStore // nil: the fence file write fails
	}{
		{"FenceFileWriteFails", nil},
		{"ReserveSeqFails", &FaultyStore{Method: "ReserveSeq"}},
		{"CanaryClaimFails", &FaultyStore{Method: "Claim", Namespace: spent.ReservedPrefix + "fence"}},
		{"CanaryClaimFailsAfterWriting", &FaultyStore{Method: "ClaimAfter", Namespace: spent.ReservedPrefix + "fence"}},
		{"ReleaseFails", &FaultyStore{Method: "Release"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			cfg := WriteConfig(t, twoNamespaces)
			fw := &FaultyWrite{Base: "fence"}
			s := MustServe(t, data, nil, func(m *spentcmd.Main) {
				m.WriteFile = fw.WriteFile
				if tc.store != nil {
					m.WrapStore = func(st spent.Store) spent.Store { tc.store.Store = st; return tc.store }
				}
			}, "--config", cfg)
			ClaimBoth(t, s.Addr)
			_, before := FenceCanary(t, data)
			if tc.store != nil {
				tc.store.Arm()
			} else {
				fw.Arm()
			}
			// Two advances after the failed one.
			c := WaitFence(t, data, before)
			c = WaitFence(t, data, c)
			WaitFence(t, data, c)
			fired := fw.Fired()
			if tc.store != nil {
				fired = tc.store.Fired()
			}
			if fired != 1 {
				t.Fatalf("injected faults: got %d, want 1", fired)
			}
			AssertRepeats(t, s.Addr)
			if code := s.Stop(); code != 0 {
				t.Fatalf("serve exit: got %d, want 0; stderr:\n%s", code, s.Stderr)
			}
			log := s.Stderr.String()
			if n := countLines(log, "level=WARN", "fence"); n != 1 {
				t.Fatalf("fence warnings: got %d, want 1; stderr:\n%s", n, log)
			}
			if !strings.Contains(log, "injected fault") && !strings.Contains(log, "no space left on device") {
				t.Fatalf("the warning does not name the fault; stderr:\n%s", log)
			}

			s, res := TryServe(t, data, nil, nil, "--config", cfg)
			if s == nil {
				t.Fatalf("restart after a fault: exit %d, want a start; stderr:\n%s", res.Code, res.Stderr)
			}
			AssertRepeats(t, s.Addr)
			s.Stop()
			if n := LiveCanaries(t, filepath.Join(data, "pebble")); n != 1 {
				t.Fatalf("live canaries after the fault and a restart: got %d, want 1", n)
			}
		})
	}
}
