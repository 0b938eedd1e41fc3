//go:build unix

// Package cputime reads the CPU time the process has used, which the
// benchmarks report per operation: on a machine shared with other jobs, a
// steadier measure of cost than wall time, and with the wall time the share
// of the cores a run kept busy.
package cputime

import (
	"syscall"
	"time"
)

// Used returns the user and system CPU time this process has used so far,
// or 0 if the system cannot say.
func Used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
