package pebble

import (
	"time"

	"github.com/spentledger/spent"
)

// Held records. A fresh Early claim of a key with no record
// ([spent.ClaimOp].Early) is kept in Store.held, in memory only, instead of
// written, until its Complete (which writes the complete record), its
// Release (which forgets it) or the first other request that reports it
// (which writes it first, see materialize). A crash or a reopen loses
// them, which the Early promise allows (engine invariant 4). The filter
// counts a held key as stored (engine invariant 7), and only the decision
// goroutine touches them (engine invariant 1).

// maxHeld bounds the records the store holds in memory for fresh Early
// claims (see Store.held); beyond it, an Early claim writes its record as
// any claim does.
const maxHeld = 1 << 16

// dropHeld forgets the held record of h, which was never written, so the
// filter forgets h at once.
func (s *Store) dropHeld(h *spent.Hash) {
	delete(s.held, *h)
	s.uncounted(fingerprint(h))
}

// forgetHeld forgets the held records that expired by now (whose caller
// never completed nor released them), as a sweep does stored ones; a
// sweep calls it first. Few are held at a time: about one per request in
// flight.
func (s *Store) forgetHeld(now time.Time) {
	for h, p := range s.held {
		if !p.LiveAt(now) {
			s.dropHeld(&h)
		}
	}
}

// materialize writes the held record p of h in rd, with its index entries,
// as its claim would have: from then on it is an ordinary record.
func (s *Store) materialize(rd *round, h *spent.Hash, p *spent.Record) {
	delete(s.held, *h)
	s.put(rd, p, true)
}
