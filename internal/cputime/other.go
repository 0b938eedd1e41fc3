//go:build !unix

package cputime

import "time"

// Used returns 0: this system has no getrusage.
func Used() time.Duration { return 0 }
