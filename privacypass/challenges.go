package privacypass

import (
	"sync"
	"time"
)

// Defaults of a ChallengeSet.
const (
	// DefaultChallengeTTL is how long an issued challenge is accepted: the
	// time a client has to fetch a token and present it.
	DefaultChallengeTTL = 10 * time.Minute
	// DefaultMaxChallenges bounds the challenges remembered (about 80
	// bytes each).
	DefaultMaxChallenges = 1 << 20
)

// ChallengeSet remembers the digests of the challenges origins issued, so
// that an origin accepts only tokens that answer one of them. It is
// bounded: a challenge is forgotten after its TTL, and when the set is full
// the oldest is forgotten first. Several origins in one process may share
// one set, so that a token fetched for a challenge of one is accepted by
// all. It is safe for concurrent use.
type ChallengeSet struct {
	ttl time.Duration
	max int

	mu   sync.Mutex
	m    map[[DigestSize]byte]time.Time // digest → expiry
	ring [][DigestSize]byte             // insertion order, which is expiry order
	head int                            // oldest entry of ring
	n    int                            // entries in ring
}

// NewChallengeSet returns a set that remembers at most max challenges for
// ttl each. Zero values take DefaultMaxChallenges and DefaultChallengeTTL.
func NewChallengeSet(max int, ttl time.Duration) *ChallengeSet {
	if max <= 0 {
		max = DefaultMaxChallenges
	}
	if ttl <= 0 {
		ttl = DefaultChallengeTTL
	}
	return &ChallengeSet{ttl: ttl, max: max, m: map[[DigestSize]byte]time.Time{}}
}

// TTL returns how long a challenge is remembered.
func (s *ChallengeSet) TTL() time.Duration { return s.ttl }

// Len returns the number of challenges remembered, expired ones not yet
// dropped included.
func (s *ChallengeSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// add remembers digest d, issued at now.
func (s *ChallengeSet) add(d [DigestSize]byte, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ring == nil {
		s.ring = make([][DigestSize]byte, min(s.max, 1024))
	}
	// Drop what has expired, then the oldest if still full.
	for s.n > 0 {
		old := s.ring[s.head]
		exp, ok := s.m[old]
		if ok && now.Before(exp) && s.n < s.max {
			break
		}
		if ok {
			delete(s.m, old)
		}
		s.head = (s.head + 1) % len(s.ring)
		s.n--
	}
	if _, dup := s.m[d]; dup {
		s.m[d] = now.Add(s.ttl)
		return
	}
	if s.n == len(s.ring) {
		// Grow the ring (up to max), keeping the order.
		grown := make([][DigestSize]byte, min(s.max, 2*len(s.ring)))
		for i := range s.n {
			grown[i] = s.ring[(s.head+i)%len(s.ring)]
		}
		s.ring, s.head = grown, 0
	}
	s.ring[(s.head+s.n)%len(s.ring)] = d
	s.n++
	s.m[d] = now.Add(s.ttl)
}

// check reports whether d was issued (known) and, if so, whether it is
// still live at now.
func (s *ChallengeSet) check(d [DigestSize]byte, now time.Time) (known, live bool) {
	s.mu.Lock()
	exp, ok := s.m[d]
	s.mu.Unlock()
	if !ok {
		return false, false
	}
	return true, now.Before(exp)
}
