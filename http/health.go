package http

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStoreLogInterval is how often, at most, the server logs that the
// store is still failing.
const DefaultStoreLogInterval = 10 * time.Second

// stateLog logs a state that requests observe, good or failing, when it
// changes, not once per request: the first failure after a success (with
// its cause), at most one summary per interval while failures go on (with
// how many requests failed since the last line), and the first success
// after failures (with how long they lasted and how many requests failed).
type stateLog struct {
	log      *slog.Logger
	every    time.Duration
	now      func() time.Time
	down, up string // the messages of the two changes
	still    string // the message of the summary
	flag     atomic.Bool

	mu      sync.Mutex
	since   time.Time // the first failure
	last    time.Time // the last line logged
	failed  int       // failures since the first
	window  int       // failures since the last line
	failing bool
}

// fail records a failure of a request on route with cause err.
func (l *stateLog) fail(rt route, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.failing {
		l.failing, l.since, l.last, l.failed, l.window = true, now, now, 1, 0
		l.flag.Store(true)
		l.log.Warn(l.down, "route", routes[rt], "err", err)
		return
	}
	l.failed++
	l.window++
	if d := now.Sub(l.last); d >= l.every {
		l.log.Warn(l.still, "refused", l.window, "in", d.Round(time.Millisecond).String(),
			"since", l.since.UTC().Format(time.RFC3339), "err", err)
		l.last, l.window = now, 0
	}
}

// ok records a success; only the first after failures is logged.
func (l *stateLog) ok() {
	if !l.flag.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.failing {
		return
	}
	l.failing = false
	l.flag.Store(false)
	l.log.Info(l.up, "after", l.now().Sub(l.since).Round(time.Millisecond).String(), "refused", l.failed)
}
