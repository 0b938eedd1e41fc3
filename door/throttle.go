package door

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// maxTracked is the most source addresses a Throttle remembers; past it,
// the address whose last failure is oldest is forgotten.
const maxTracked = 4096

// Throttle counts refused sign-ins by source address, for every door of a
// server: it decides how long each refusal waits before it is answered
// (FirstAuthDelay, doubling with each further failure of the address within
// AuthWindow of its last, up to MaxAuthDelay) and logs them without letting
// a flood of them flood the log (the first of an address at once, then one
// line a minute per address with the count).
type Throttle struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	addrs map[netip.Prefix]*failures
	total int64
}

type failures struct {
	n        int       // failures since the window began
	last     time.Time // the last failure
	logged   time.Time // the last log line
	unlogged int       // failures since that line
}

// NewThrottle returns a throttle that logs to log (nil: nowhere).
func NewThrottle(log *slog.Logger) *Throttle {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Throttle{log: log, now: time.Now, addrs: map[netip.Prefix]*failures{}}
}

// SetClock sets the throttle's clock (tests).
func (t *Throttle) SetClock(now func() time.Time) { t.now = now }

// source is the address a failure is counted under: the IP of addr, an
// IPv6 address by its /64; the zero prefix for an address without an IP
// (a Unix socket, a pipe).
func source(addr string) netip.Prefix {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p
	}
	return netip.PrefixFrom(ip, 32)
}

// Failed records a refused sign-in at door ("resp", "http", "console")
// from remote (a host:port or an IP) with reason (logged, never sent to the
// client), and returns how long the caller waits before it answers.
func (t *Throttle) Failed(door, remote, reason string) time.Duration {
	src := source(remote)
	now := t.now()
	t.mu.Lock()
	t.total++
	f := t.addrs[src]
	switch {
	case f == nil:
		if len(t.addrs) >= maxTracked {
			t.forgetOldestLocked()
		}
		f = &failures{}
		t.addrs[src] = f
	case now.Sub(f.last) > AuthWindow:
		// A new run of failures; the ones not logged yet are told with
		// its first line.
		f.n = 0
	}
	f.n++
	f.last = now
	f.unlogged++
	var logN int
	first := f.logged.IsZero()
	if first || now.Sub(f.logged) >= AuthWindow {
		logN, f.unlogged, f.logged = f.unlogged, 0, now
	}
	n := f.n
	t.mu.Unlock()
	if logN > 0 {
		if first {
			t.log.Warn(door+": sign-in refused", "remote", remote, "reason", reason)
		} else {
			t.log.Warn(door+": sign-ins refused", "remote", remote, "since_last_line", logN, "reason_of_last", reason, "in_a_row", n)
		}
	}
	return delayOf(n)
}

// delayOf is the delay of an address's nth failure in a row.
func delayOf(n int) time.Duration {
	d := FirstAuthDelay
	for i := 1; i < n && d < MaxAuthDelay; i++ {
		d *= 2
	}
	return min(d, MaxAuthDelay)
}

// forgetOldestLocked forgets the address whose last failure is oldest.
func (t *Throttle) forgetOldestLocked() {
	var oldest netip.Prefix
	var at time.Time
	for p, f := range t.addrs {
		if at.IsZero() || f.last.Before(at) {
			oldest, at = p, f.last
		}
	}
	delete(t.addrs, oldest)
}

// Total returns how many sign-ins were refused.
func (t *Throttle) Total() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}
