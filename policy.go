package spent

import (
	"fmt"
	"time"
)

// Mode says how a namespace answers a repeated key.
type Mode string

// The modes of a namespace.
const (
	// ModeEcho answers a repeat with the same fingerprint with the stored result,
	// byte for byte, flagged replayed; a repeat with another fingerprint is a
	// mismatch, final. Payment APIs and issuers use it.
	ModeEcho Mode = "echo"
	// ModeRefuse refuses every repeat and says when and where the key was first
	// seen. Ticket gates and token redemption use it.
	ModeRefuse Mode = "refuse"
)

// LeaseExpiry says what happens when a pending claim outlives its lease.
type LeaseExpiry string

// The lease-expiry rules, prefixed with their type as the modes are.
const (
	// LeaseExpiryRetake lets the next claim take the key over: at-least-once,
	// only for side effects that are themselves idempotent.
	LeaseExpiryRetake LeaseExpiry = "retake"
	// LeaseExpiryHold keeps the record pending as an unknown outcome until an
	// operator resolves it: at-most-once, the payment rule (state before side
	// effect).
	LeaseExpiryHold LeaseExpiry = "hold"
)

// Policy is a namespace's behaviour. It is data, not code.
type Policy struct {
	// Mode is echo or refuse.
	Mode Mode `json:"mode" toml:"mode"`
	// Retention is how long a record is remembered when the claim does not
	// carry its own expires_at.
	Retention time.Duration `json:"retention" toml:"retention"`
	// Lease is how long a pending two-step claim blocks others.
	Lease time.Duration `json:"lease" toml:"lease"`
	// OnLeaseExpiry is retake or hold.
	OnLeaseExpiry LeaseExpiry `json:"on_lease_expiry" toml:"on_lease_expiry"`
	// StoreRawKey keeps the raw key in the record so that operators can read it
	// when resolving an unknown outcome. Echo namespaces only; never set it for
	// token namespaces.
	StoreRawKey bool `json:"store_raw_key,omitempty" toml:"store_raw_key"`
	// MaxExpiry is the furthest a claim's own expires_at may lie from now.
	// A claim asking to be remembered longer is refused (EExpiryTooLong),
	// never clamped: clamping would forget a key while its credential can
	// still be presented, which is the double-spend hole. Zero means
	// Retention; see [Policy.ExpiryLimit]. It is never shorter than
	// Retention, so that a claim without expires_at is always accepted.
	MaxExpiry time.Duration `json:"max_expiry,omitempty" toml:"max_expiry"`
	// MinExpiry is the shortest life a record may have when its claim asks
	// for its own expiry: a shorter one is raised to it (see
	// [Policy.ExpiresAt]), so that a client's wrong constant cannot make the
	// ledger forget a key while it can still be presented. Zero means no
	// minimum; at most Retention.
	MinExpiry time.Duration `json:"min_expiry,omitempty" toml:"min_expiry"`
}

// ExpiryLimit returns how far from now a claim's expires_at may lie in this
// namespace: MaxExpiry, or Retention when MaxExpiry is zero.
func (p Policy) ExpiryLimit() time.Duration {
	if p.MaxExpiry == 0 {
		return p.Retention
	}
	return p.MaxExpiry
}

// DefaultPolicy is the policy of the "default" namespace: echo, 24 h
// retention (Stripe's), a 30 s lease, hold on lease expiry.
func DefaultPolicy() Policy {
	return Policy{Mode: ModeEcho, Retention: 24 * time.Hour, Lease: 30 * time.Second, OnLeaseExpiry: LeaseExpiryHold}
}

// Validate refuses unusable or unsafe policies.
func (p Policy) Validate() error {
	switch p.Mode {
	case ModeEcho, ModeRefuse:
	default:
		return fmt.Errorf("mode %q: want echo or refuse", p.Mode)
	}
	switch p.OnLeaseExpiry {
	case LeaseExpiryRetake, LeaseExpiryHold:
	default:
		return fmt.Errorf("on_lease_expiry %q: want retake or hold", p.OnLeaseExpiry)
	}
	if p.Retention <= 0 {
		return fmt.Errorf("retention %v: must be positive", p.Retention)
	}
	if p.Lease <= 0 {
		return fmt.Errorf("lease %v: must be positive", p.Lease)
	}
	if p.Lease > p.Retention {
		return fmt.Errorf("lease %v longer than retention %v", p.Lease, p.Retention)
	}
	if p.MaxExpiry < 0 {
		return fmt.Errorf("max_expiry %v: must not be negative (zero means the retention)", p.MaxExpiry)
	}
	if p.MaxExpiry != 0 && p.MaxExpiry < p.Retention {
		return fmt.Errorf("max_expiry %v shorter than retention %v: a claim without expires_at would be refused; raise max_expiry or leave it out", p.MaxExpiry, p.Retention)
	}
	if p.MinExpiry < 0 || p.MinExpiry > p.Retention {
		return fmt.Errorf("min_expiry %v: want 0 (none) to the retention, %v", p.MinExpiry, p.Retention)
	}
	if p.StoreRawKey && p.Mode != ModeEcho {
		return fmt.Errorf("store_raw_key is only allowed in echo namespaces")
	}
	return nil
}

// Outcome is the answer to a claim.
type Outcome string

// The outcomes of a claim.
const (
	// Fresh: you are first. For a two-step claim you now hold the lease.
	Fresh Outcome = "fresh"
	// Replayed: the stored result is returned (echo mode).
	Replayed Outcome = "replayed"
	// InProgress: a two-step claim holds the key; retry later.
	InProgress Outcome = "in_progress"
	// Refused: the key was seen before (refuse mode); the record says when and
	// where.
	Refused Outcome = "refused"
	// Mismatch: the same key with another fingerprint (echo mode), final.
	Mismatch Outcome = "mismatch"
)

// Valid reports whether o is one of the five outcomes.
func (o Outcome) Valid() bool {
	switch o {
	case Fresh, Replayed, InProgress, Refused, Mismatch:
		return true
	}
	return false
}
