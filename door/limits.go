package door

import (
	"fmt"
	"time"
)

// Defaults of [Limits].
const (
	// DefaultMaxInFlight is the default budget of request bytes in flight
	// across every door: 128 MiB (the HTTP API's max_bodies).
	DefaultMaxInFlight = 128 << 20
	// DefaultMaxClients is the default number of connections one listener
	// serves at once.
	DefaultMaxClients = 10000
	// DefaultMaxUnauthenticated is the default number of a listener's
	// connections that may be open before they sign in.
	DefaultMaxUnauthenticated = 1000
	// DefaultAuthTimeout is how long a connection may stay open without
	// signing in, by default.
	DefaultAuthTimeout = 10 * time.Second
	// DefaultReadTimeout bounds, by default, how long the bytes of one
	// request may take to arrive once its first byte has.
	DefaultReadTimeout = time.Minute
	// DefaultWriteTimeout bounds, by default, how long a reply may take to
	// be written (a client that does not read).
	DefaultWriteTimeout = time.Minute
	// DefaultIdleTimeout is how long a connection may wait between two
	// requests, by default.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxAuthFailures is how many refused sign-ins one connection may
	// make, by default, before it is closed.
	DefaultMaxAuthFailures = 3
)

// Fixed bounds of the sign-in throttle and of what a connection may send
// before it signs in.
const (
	// PreAuthArgs is the most arguments of one command a RESP connection
	// may send before it signs in (AUTH, HELLO … AUTH … SETNAME …), as Redis
	// bounds unauthenticated clients.
	PreAuthArgs = 10
	// PreAuthFrame is the most bytes one command (or form, or header block)
	// may carry before its connection has signed in: 16 KiB, Redis's bound
	// on an unauthenticated client's argument.
	PreAuthFrame = 16 << 10
	// MaxHeaderBytes is the most bytes of an HTTP request's header block,
	// which every request sends before its token is checked.
	MaxHeaderBytes = 64 << 10
	// FirstAuthDelay is the delay of an address's first refused sign-in in
	// a minute; each further one doubles it, up to MaxAuthDelay.
	FirstAuthDelay = 100 * time.Millisecond
	// MaxAuthDelay is the longest delay of a refused sign-in.
	MaxAuthDelay = 5 * time.Second
	// AuthWindow is how long an address's failures are remembered after its
	// last one, and the interval of its log lines.
	AuthWindow = time.Minute
)

// Limits is the one policy every door of a server follows. Start from
// [DefaultLimits]; a zero field means its default there.
type Limits struct {
	// MaxInFlight is the budget of request bytes in flight, shared by every
	// door: HTTP bodies and RESP command arguments (the config's max_bodies).
	MaxInFlight int64
	// MaxClients is the most connections one listener serves at once.
	MaxClients int
	// MaxUnauthenticated is the most of a listener's connections that may
	// be open before they sign in (RESP: before AUTH; HTTP: before a
	// request with a valid token). At most MaxClients.
	MaxUnauthenticated int
	// AuthTimeout is how long a connection may stay open without signing
	// in (RESP), and how long an HTTP connection may wait for its first
	// request's header.
	AuthTimeout time.Duration
	// ReadTimeout bounds how long the bytes of one request (an HTTP request
	// with its body, a RESP command) may take to arrive once the first has.
	ReadTimeout time.Duration
	// WriteTimeout bounds how long a reply may take to be written.
	WriteTimeout time.Duration
	// IdleTimeout is how long a connection may wait between two requests.
	IdleTimeout time.Duration
	// MaxAuthFailures is how many refused sign-ins one connection may make
	// before it is closed.
	MaxAuthFailures int
}

// DefaultLimits returns the default policy.
func DefaultLimits() Limits {
	return Limits{
		MaxInFlight:        DefaultMaxInFlight,
		MaxClients:         DefaultMaxClients,
		MaxUnauthenticated: DefaultMaxUnauthenticated,
		AuthTimeout:        DefaultAuthTimeout,
		ReadTimeout:        DefaultReadTimeout,
		WriteTimeout:       DefaultWriteTimeout,
		IdleTimeout:        DefaultIdleTimeout,
		MaxAuthFailures:    DefaultMaxAuthFailures,
	}
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxInFlight == 0 {
		l.MaxInFlight = d.MaxInFlight
	}
	if l.MaxClients == 0 {
		l.MaxClients = d.MaxClients
	}
	if l.MaxUnauthenticated == 0 {
		l.MaxUnauthenticated = min(d.MaxUnauthenticated, l.MaxClients)
	}
	if l.AuthTimeout == 0 {
		l.AuthTimeout = d.AuthTimeout
	}
	if l.ReadTimeout == 0 {
		l.ReadTimeout = d.ReadTimeout
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = d.WriteTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxAuthFailures == 0 {
		l.MaxAuthFailures = d.MaxAuthFailures
	}
	return l
}

// Validate refuses limits that cannot work: negative values, a share of
// unauthenticated connections larger than MaxClients, timeouts under a
// second or over a day.
func (l Limits) Validate() error {
	switch {
	case l.MaxInFlight < 0:
		return fmt.Errorf("door: max in flight %d: must not be negative", l.MaxInFlight)
	case l.MaxClients < 0 || l.MaxClients > 1<<20:
		return fmt.Errorf("door: max_clients %d: want 1 to %d", l.MaxClients, 1<<20)
	case l.MaxUnauthenticated < 0 || l.MaxClients > 0 && l.MaxUnauthenticated > l.MaxClients:
		return fmt.Errorf("door: max_unauthenticated %d: want 1 to max_clients (%d)", l.MaxUnauthenticated, l.MaxClients)
	case l.MaxAuthFailures < 0 || l.MaxAuthFailures > 1000:
		return fmt.Errorf("door: max_auth_failures %d: want 1 to 1000", l.MaxAuthFailures)
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"auth_timeout", l.AuthTimeout}, {"read_timeout", l.ReadTimeout}, {"write_timeout", l.WriteTimeout}, {"idle_timeout", l.IdleTimeout}} {
		if t.d != 0 && (t.d < time.Second || t.d > 24*time.Hour) {
			return fmt.Errorf("door: %s %v: want 1s to 24h", t.name, t.d)
		}
	}
	return nil
}
