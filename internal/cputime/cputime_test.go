//go:build unix

package cputime

import (
	"runtime"
	"testing"
	"time"
)

// TestUsedCountsWork spins for 50 ms and checks that Used grew by at least
// a fifth of that (the spin may be descheduled on a busy machine), and by no
// more than the wall time on every core (plus a clock tick).
func TestUsedCountsWork(t *testing.T) {
	before := Used()
	if before <= 0 {
		t.Fatalf("Used: %v before any work", before)
	}
	start := time.Now()
	x := uint64(1)
	for time.Since(start) < 50*time.Millisecond {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	wall := time.Since(start)
	got := Used() - before
	if got < 10*time.Millisecond {
		t.Fatalf("Used grew by %v over %v of spinning (x=%d)", got, wall, x)
	}
	if most := wall*time.Duration(runtime.NumCPU()) + 10*time.Millisecond; got > most {
		t.Fatalf("Used grew by %v over %v of wall time on %d cores", got, wall, runtime.NumCPU())
	}
}
