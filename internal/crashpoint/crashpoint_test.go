package crashpoint_test

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/spentledger/spent/internal/crashpoint"
)

// TestHelperProcess is not a test: run by TestHit in a child process, it
// hits the point named by CRASHPOINT_TEST_HIT and exits 0 if it survives.
func TestHelperProcess(t *testing.T) {
	name := os.Getenv("CRASHPOINT_TEST_HIT")
	if name == "" {
		t.Skip("helper process for TestHit")
	}
	crashpoint.Hit(name)
	os.Exit(0)
}

func TestHit(t *testing.T) {
	cases := []struct {
		name, env, hit string
		killed         bool
	}{
		{"UnsetDoesNothing", "", "fence.canary-written", false},
		{"OtherPointDoesNothing", "fence.file-written", "fence.canary-written", false},
		{"NamedPointKills", "fence.canary-written", "fence.canary-written", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
			cmd.Env = append(os.Environ(), "CRASHPOINT_TEST_HIT="+tc.hit, crashpoint.EnvVar+"="+tc.env)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() &&
				ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
			if killed != tc.killed {
				t.Fatalf("%s=%q, Hit(%q): got killed %v (%v), want %v; output:\n%s", crashpoint.EnvVar, tc.env, tc.hit, killed, err, tc.killed, out)
			}
			if !tc.killed && err != nil {
				t.Fatalf("helper: %v; output:\n%s", err, out)
			}
		})
	}
}

func BenchmarkHitMiss(b *testing.B) {
	for b.Loop() {
		crashpoint.Hit("fence.canary-written")
	}
}
