package spent

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HashSize is the size in bytes of a stored key.
const HashSize = 16

// Hash is the stored form of a key: HMAC-SHA256(secret, len(namespace) ‖
// namespace ‖ key) truncated to [HashSize] bytes. Stores see only hashes, so
// clients can never shape the storage layout.
type Hash [HashSize]byte

// String returns the hash in lowercase hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// MarshalText encodes the hash as lowercase hex.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText decodes a hash from hex.
func (h *Hash) UnmarshalText(b []byte) error {
	p, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// IsZero reports whether h is all zero bytes, which no real key hashes to in
// practice; it marks "no hash given".
func (h Hash) IsZero() bool { return h == Hash{} }

// ParseHash decodes a hash written by [Hash.String].
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*HashSize {
		return h, fmt.Errorf("spent: hash must be %d hex digits, got %d", 2*HashSize, len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("spent: hash: %w", err)
	}
	return h, nil
}

// Seq identifies a write: the node that made it and a counter that increases on
// that node. It is unique across the ledger, and every write carries one, so
// that after an ambiguous store error the writer can recognise its own record.
// Its text form is "node:counter".
type Seq struct {
	Node    uint32
	Counter uint64
}

// IsZero reports whether s is the zero Seq, which no write carries.
func (s Seq) IsZero() bool { return s == Seq{} }

// Less reports whether s orders before o (by node, then counter).
func (s Seq) Less(o Seq) bool {
	if s.Node != o.Node {
		return s.Node < o.Node
	}
	return s.Counter < o.Counter
}

// String returns "node:counter".
func (s Seq) String() string {
	return strconv.FormatUint(uint64(s.Node), 10) + ":" + strconv.FormatUint(s.Counter, 10)
}

// MarshalText encodes the seq as "node:counter".
func (s Seq) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes "node:counter".
func (s *Seq) UnmarshalText(b []byte) error {
	p, err := ParseSeq(string(b))
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// ParseSeq decodes the text form written by [Seq.String].
func ParseSeq(str string) (Seq, error) {
	n, c, ok := strings.Cut(str, ":")
	if !ok {
		return Seq{}, fmt.Errorf("spent: seq %s: want node:counter", QuoteInput(str))
	}
	node, err := strconv.ParseUint(n, 10, 32)
	if err != nil {
		return Seq{}, fmt.Errorf("spent: seq node: %w", err)
	}
	ctr, err := strconv.ParseUint(c, 10, 64)
	if err != nil {
		return Seq{}, fmt.Errorf("spent: seq counter: %w", err)
	}
	return Seq{Node: uint32(node), Counter: ctr}, nil
}

// State is the state of a record.
type State uint8

// The states of a record. A pending record belongs to a two-step claim that has
// not yet completed; a complete record holds its final result.
const (
	StatePending  State = 1
	StateComplete State = 2
)

// String returns "pending" or "complete".
func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateComplete:
		return "complete"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText encodes the state as its name.
func (s State) MarshalText() ([]byte, error) {
	if s != StatePending && s != StateComplete {
		return nil, fmt.Errorf("spent: invalid state %d", s)
	}
	return []byte(s.String()), nil
}

// UnmarshalText decodes a state name.
func (s *State) UnmarshalText(b []byte) error {
	switch string(b) {
	case "pending":
		*s = StatePending
	case "complete":
		*s = StateComplete
	default:
		return fmt.Errorf("spent: unknown state %s", QuoteInput(string(b)))
	}
	return nil
}

// Record is what the ledger remembers about a claimed key.
type Record struct {
	// Namespace is the namespace the key was claimed in.
	Namespace string `json:"namespace"`
	// Hash is the keyed hash of the claimed key; the raw key is never stored
	// unless the namespace opts in (see RawKey).
	Hash Hash `json:"hash"`
	// RawKey is the raw key, kept only in echo namespaces whose policy sets
	// StoreRawKey, so that operators can read it when resolving an unknown
	// outcome. Empty otherwise.
	RawKey string `json:"key,omitempty"`
	// FirstSeen is the server time of the first claim.
	FirstSeen time.Time `json:"first_seen"`
	// Place says who saw the key first: a gate, a node, a relay.
	Place string `json:"place"`
	// Fingerprint is the SHA-256 of the canonical request bytes, or empty.
	Fingerprint []byte `json:"fingerprint,omitempty"`
	// State is pending (a two-step claim holds the key) or complete.
	State State `json:"state"`
	// Result holds the stored result bytes of a complete record.
	Result []byte `json:"result,omitempty"`
	// ExpiresAt is the instant the record is forgotten: it is remembered at
	// ExpiresAt - 1ns and gone at ExpiresAt.
	ExpiresAt time.Time `json:"expires_at"`
	// LeaseUntil is the end of a pending record's lease; zero when complete.
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// Seq identifies the write that created the record.
	Seq Seq `json:"seq"`
}

// Clone returns a copy of r that shares no memory with it: its Fingerprint
// and Result are copied (a nil slice stays nil, an empty one stays empty).
func (r *Record) Clone() Record {
	c := *r
	if r.Fingerprint != nil {
		c.Fingerprint = append([]byte(nil), r.Fingerprint...)
	}
	if r.Result != nil {
		c.Result = append(make([]byte, 0, len(r.Result)), r.Result...)
	}
	return c
}

// LiveAt reports whether the record is still remembered at now.
func (r *Record) LiveAt(now time.Time) bool { return now.Before(r.ExpiresAt) }

// LeaseExpiredAt reports whether r is pending and its lease has run out at now.
func (r *Record) LeaseExpiredAt(now time.Time) bool {
	return r.State == StatePending && !now.Before(r.LeaseUntil)
}

// Validate checks the fields a store relies on. Stores call it before writing.
func (r *Record) Validate() error {
	switch {
	case r.Seq.IsZero():
		return errors.New("spent: record without seq")
	case r.State != StatePending && r.State != StateComplete:
		return fmt.Errorf("spent: record state %d", r.State)
	case r.ExpiresAt.IsZero():
		return errors.New("spent: record without expires_at")
	case r.State == StatePending && r.LeaseUntil.IsZero():
		return errors.New("spent: pending record without lease")
	}
	return nil
}
