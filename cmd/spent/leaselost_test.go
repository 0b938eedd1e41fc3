package main_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spentledger/spent/internal/redistest"
)

// TestLeaseLostStops stops a server on a shared Redis (SIGSTOP) for longer
// than its node lease, starts a second server with the same node, which
// takes the lease, and resumes the first: at its next fence advance the
// first finds the lease taken, shuts down and exits non-zero with a message
// that names the cause and the way out, while the second serves on.
func TestLeaseLostStops(t *testing.T) {
	url := redistest.Start(t).URL()
	dataA, dataB := t.TempDir(), t.TempDir()
	cfg := WriteConfig(t, twoNamespaces) // fence_interval 1s: a lease of 3s
	a := StartBinary(t, nil, "--data", dataA, "--store", url, "--config", cfg)
	ClaimBoth(t, a.Addr)
	WaitFence(t, dataA, 2)
	copySecret(t, dataA, dataB)

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	time.Sleep(4 * time.Second) // past the lease of 3 fence intervals
	b := MustServe(t, dataB, nil, nil, "--store", url, "--config", cfg, "--new-fence")
	a.cmd.Process.Signal(syscall.SIGCONT)
	resumed = true

	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the server whose lease was taken still runs 30 s after it resumed; stderr:\n%s", a.Stderr)
	}
	if code := a.cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatalf("the server whose lease was taken exited 0; stderr:\n%s", a.Stderr)
	}
	for _, want := range []string{"node 1 lost its lease", "must stop", "node 1 is in use", dataB, "its own node"} {
		if !strings.Contains(a.Stderr.String(), want) {
			t.Errorf("stderr of the server whose lease was taken lacks %q:\n%s", want, a.Stderr)
		}
	}
	AssertRepeats(t, b.Addr)
	if code := b.Stop(); code != 0 {
		t.Fatalf("the server that took the lease: exit %d; stderr:\n%s", code, b.Stderr)
	}
}
