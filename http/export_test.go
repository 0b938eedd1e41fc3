package http

import "time"

// SetClock makes s read the time of its log lines from now. For tests.
func SetClock(s *Server, now func() time.Time) {
	s.health.now = now
	s.readiness.now = now
}
