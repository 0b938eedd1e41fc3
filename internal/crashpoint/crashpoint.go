// Package crashpoint is a test hook that kills the process at a named point,
// so that tests can check what a crash at that point leaves behind.
//
// Call [Hit] between two steps whose order matters for recovery:
//
//	crashpoint.Hit("fence.canary-written")
//
// In production SPENT_CRASHPOINT is unset and Hit does nothing: it compares
// one string, read from the environment once at start, and returns.
//
// # Caveats
//
// Hit is for tests only. A process started with SPENT_CRASHPOINT set to a
// name it reaches dies with SIGKILL, as after kill -9: nothing is flushed and
// no deferred function runs.
package crashpoint

import (
	"os"
	"syscall"
	"time"
)

// EnvVar is the environment variable that names the point at which the
// process kills itself.
const EnvVar = "SPENT_CRASHPOINT"

// target is the point named by EnvVar when the process started, or "".
var target = os.Getenv(EnvVar)

// Hit kills the process with SIGKILL if name is the point SPENT_CRASHPOINT
// named when the process started, and otherwise does nothing. It is a test
// hook: see the package documentation.
func Hit(name string) {
	if target == "" || name != target {
		return
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	// The signal is delivered before Kill returns to this thread, at the
	// latest when it next enters the kernel; never go on past the point.
	for {
		time.Sleep(time.Hour)
	}
}
