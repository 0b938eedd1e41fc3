package pebble

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
)

// The engine: how calls become rounds, and rounds become durable answers.
//
// Every call is a request queued on Store.reqs. One decision goroutine
// (decide) takes the requests in rounds: it decides each against the
// database as it stands (earlier rounds are applied, hence visible, even
// before their WAL sync) plus the round's own earlier writes (the overlay),
// and stages the round's writes. Once a sync slot is free it seals the
// round: one batch, applied with ApplyNoSyncWait, and the round goes to the
// waiter goroutine (wait), which waits for the WAL sync and only then
// answers the round's callers, while the decision goroutine already forms
// the next round.
//
// This file is the engine; a round's staged writes are in round.go, the
// records as a round sees them in records.go, and each kind of request is
// decided beside its part of request: claim.go (with held.go for Early
// claims), end.go, count.go, seq.go, sweep.go, purge.go, recover.go.
//
// # Engine invariants
//
// The engine and the decisions rely on these; comments cite them as "engine
// invariant N". They serve the design's invariants, which are numbered in
// docs/concepts.md and cited as "invariant N in docs/concepts.md".
//
//  1. Ownership. The decision goroutine alone touches the filter, the held
//     records, the overlay and the round's other maps (counters, seqs,
//     removals), the scratch buffers, sweepFrom, roundNum, and the round
//     being formed with its staged writes. It alone uses s.db without dbMu,
//     and alone replaces it (a reopen, under dbMu's write lock; the readers
//     outside the rounds, ListPending and Purge's walk, hold its read
//     lock). A sealed round and its batch belong to the waiter from the
//     moment they are sent on s.rounds. A request belongs to its caller
//     until queued, then to the engine until its done is signalled, then to
//     its caller again; one whose caller gave up waiting (gone) is never
//     recycled, as the engine may still hold it. When decide returns it
//     closes s.rounds; the waiter drains it, then closes s.done: whoever
//     has received from s.done (Close) owns what decide owned.
//  2. Written before visible. No answer leaves the store (Early answers
//     aside, engine invariant 4), whether decided in a round or read
//     outside them (ListPending), before the round holding every write it
//     could have observed is durable: its WAL sync returned and the witness
//     recorded its number. A decision may read an earlier round's writes
//     before they are durable, as pebble shows a batch once applied; what
//     it answers waits by engine invariant 3. A reader outside the rounds
//     loads s.last after reading and waits for that round: seal stores it
//     before the round's writes become visible. This is how the store keeps
//     invariant 2 in docs/concepts.md.
//  3. Answers in order. Rounds are sealed, applied, synced and answered in
//     the order they were decided, and a round's requests in the order they
//     were decided, by one waiter; the WAL is ordered, so a round's sync
//     covers every earlier round. A round is sealed only with a sync slot
//     (s.free), which the waiter gives back once the round's sync has
//     returned: with syncSlots = 1, at most one round is applied and not
//     yet durable, and whoever takes every slot (a reopen) has waited for
//     every round in flight.
//  4. Early answers. A lone Early claim ([spent.ClaimOp].Early) that
//     inserted a pending record is answered when decided, before its round
//     is durable, and leaves the round: its caller may reuse the request at
//     once, so the round keeps no pointer into it (the overlay, or the held
//     records, keep a copy of its record). The answer promises only that
//     the claim was fresh against every decision before it; a crash or a
//     reopen may forget it, as the Early contract allows. A fresh Early
//     claim of a key with no record is held in memory, not written
//     (held.go); any other answer that reports a held record (a later claim
//     of its key, a Get) writes it first, in that answer's round, so that
//     the answer waits until it is durable (engine invariant 2). Its
//     Complete writes the complete record; its Release forgets it.
//  5. A failure taints the rest. The first apply or sync that fails sets
//     s.failed (fail). From then on no round is applied, every request
//     decided is refused with ErrFailed, and every round answered, including
//     the ones decided before the failure (they may have observed its
//     writes, which are not durable), answers ErrFailed, until a reopen from
//     the files has made a synced write (recover.go). The store fails
//     closed: invariant 5 in docs/concepts.md.
//  6. One round, one view. A decision sees the database with every earlier
//     round applied, plus the overlay: the round's own earlier writes (and
//     likewise its counters and seqs), which seal clears. A record in the
//     overlay stays unchanged until its round is sealed. A key written
//     several times in a round is applied once, with its last write, unless
//     the round holds a range deletion (round.build).
//  7. The filter never forgets a stored key. It holds a fingerprint of every
//     key stored or held, so that a key it calls absent needs no read: a
//     fingerprint is inserted when its key is decided (an extra one is only
//     a false positive), and removed only once the round that deletes the
//     key has been applied, never more often than it was inserted. While no
//     filter is complete (s.filter nil: a build runs), nothing is called
//     absent. A filter loaded at Open counts the keys of every round up to
//     its save and the journal counts the rest; a built one counts its
//     snapshot's keys, and the changes logged since (filterbuild.go).
//  8. Rounds of their own. A sweep starts a round, so that the expiry index
//     it walks in the database holds every earlier write; a reopen too, so
//     that no write of its round is staged against a database it closes.
//  9. Nothing for a caller that left. A request whose context ended before
//     it was decided writes nothing.

// kind is the kind of a request: which part of it is used, and which
// decision takes it.
type kind uint8

const (
	kindClaim   kind = iota // claim.go
	kindGet                 // records.go
	kindEnd                 // end.go: Complete and Release
	kindSweep               // sweep.go
	kindCount               // count.go
	kindReserve             // seq.go
	kindPurge               // purge.go
	kindReopen              // recover.go
)

// request is one call waiting for its round: a header the engine reads, and
// the part of its kind, which holds the call's arguments and answer and
// which only that kind's decision reads. Engine invariant 1 says who owns it
// when. Requests are pooled and recycled unless their caller gave up
// waiting.
type request struct {
	kind  kind
	ctx   context.Context
	err   error         // the answer's error, or nil
	done  chan struct{} // one value per use, sent by the waiter (or early, by the decision goroutine)
	gone  bool          // queued, and the caller stopped waiting
	early bool          // answered when decided, before the round's sync (engine invariant 4)

	// The parts, one per kind. They are values, not pointers, so that a
	// pooled request carries them all and a call allocates none.
	claim   claimReq   // kindClaim
	get     getReq     // kindGet
	end     endReq     // kindEnd
	sweep   sweepReq   // kindSweep
	count   countReq   // kindCount
	reserve reserveReq // kindReserve
	purge   purgeReq   // kindPurge
}

var requests = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

func newRequest(k kind, ctx context.Context) *request {
	r := requests.Get().(*request)
	r.kind, r.ctx = k, ctx
	return r
}

// recycle returns r to the pool unless its caller gave up on it, in which
// case the store may still be using it (engine invariant 1).
func recycle(r *request) {
	if r.gone {
		return
	}
	done := r.done
	*r = request{done: done}
	requests.Put(r)
}

// size is the weight of r in a round: its number of claims, at least one.
func (r *request) size() int { return max(1, len(r.claim.ops)) }

// do queues r and waits for its answer or for ctx. When ctx ends first, r
// is marked gone: the store may still decide it.
func (s *Store) do(ctx context.Context, r *request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return spent.ErrClosed
	}
	s.reqs <- r
	s.mu.RUnlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		select {
		case <-r.done:
			return r.err
		default:
			r.gone = true
			return ctx.Err()
		}
	}
}

// decide is the decision goroutine, the owner of everything engine
// invariant 1 lists. It decides requests into the current round as they
// arrive, and seals the round when a sync slot is free (engine invariant
// 3), when the round is full, or before a sweep or a reopen (engine
// invariant 8). While the previous round syncs, requests keep being decided
// into the next one, so rounds grow with the load and each sync answers
// more callers.
func (s *Store) decide() {
	defer close(s.rounds)
	var (
		rd    *round
		size  int
		carry *request // taken from the queue for the next round
		open  = true   // the queue is not closed yet
	)
	// take decides r into rd if it fits, and reports whether it did.
	take := func(r *request) bool {
		if r.kind == kindSweep || r.kind == kindReopen || size+r.size() > s.opts.MaxBatchRound {
			// Engine invariant 8: a sweep or a reopen starts the
			// next round.
			carry = r
			return false
		}
		size += s.add(rd, r)
		return true
	}
	for {
		if rd == nil {
			r := carry
			carry = nil
			if r == nil {
				if !open {
					return
				}
				var ok bool
				if r, ok = s.next(); !ok {
					return
				}
			}
			rd, size = newRound(), 0
			size += s.add(rd, r)
		}
		// Gather until the sync slot frees, then let the callers who
		// are ready join (see gather) and seal.
		slot := false
	gather:
		for open && carry == nil && size < s.opts.MaxBatchRound {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					open = false
				} else {
					take(r)
				}
			case <-s.free:
				slot = true
				s.gather(&open, take)
				break gather
			}
		}
		if !slot {
			<-s.free
		}
		s.seal(rd)
		rd = nil
		s.tendFilter()
	}
}

// next waits for the next request, taking the filter's builds' and saves'
// reports meanwhile; ok is false once the queue is closed.
func (s *Store) next() (r *request, ok bool) {
	for {
		select {
		case r, ok = <-s.reqs:
			return r, ok
		case ev := <-s.filterEvents:
			s.filterEvent(ev)
			s.tendFilter()
		}
	}
}

// gather takes the requests that are ready before a round is sealed. When
// the queue is empty it yields once, so that callers who were just answered,
// and are runnable, can queue their next request and share this round
// instead of waiting for the next sync; it stops when a yield brings nothing
// new, and after a few yields in all, so that it costs little when the load
// is light.
func (s *Store) gather(open *bool, take func(*request) bool) {
	for yields := 0; *open; {
		select {
		case r, ok := <-s.reqs:
			if !ok {
				*open = false
				return
			}
			if !take(r) {
				return
			}
			continue
		default:
		}
		if yields == maxYields {
			return
		}
		before := len(s.reqs)
		runtime.Gosched()
		yields++
		if len(s.reqs) == before {
			return
		}
	}
}

// maxYields bounds how often gather yields before a round is sealed.
const maxYields = 4

// add decides r into rd and returns its size. A request decided early is
// answered at once and leaves the round (engine invariant 4).
func (s *Store) add(rd *round, r *request) int {
	n := r.size()
	s.decideOne(rd, r)
	if r.early {
		r.done <- struct{}{}
		return n
	}
	rd.reqs = append(rd.reqs, r)
	return n
}

// decideOne decides r within rd, with the decision of its kind.
func (s *Store) decideOne(rd *round, r *request) {
	if r.kind == kindReopen {
		r.err = s.reopenDB()
		return
	}
	if err := s.failure(); err != nil {
		// Engine invariant 5: refused until the store has reopened.
		s.refused.Add(1)
		r.err = err
		return
	}
	if err := r.ctx.Err(); err != nil {
		// Engine invariant 9: the caller has gone, nothing is written
		// for it.
		r.err = err
		return
	}
	switch r.kind {
	case kindClaim:
		r.early, r.err = s.decideClaims(rd, &r.claim)
	case kindGet:
		r.err = s.decideGet(rd, &r.get)
	case kindEnd:
		r.err = s.decideEnd(rd, &r.end)
	case kindSweep:
		r.err = s.decideSweep(rd, &r.sweep)
	case kindCount:
		r.err = s.decideCount(rd, &r.count)
	case kindReserve:
		r.err = s.decideReserve(rd, &r.reserve)
	case kindPurge:
		r.err = s.decidePurge(rd, &r.purge)
	default:
		r.err = fmt.Errorf("unknown request kind %d", r.kind)
	}
}

// seal applies the round's batch without waiting for its sync and hands the
// round to the waiter. The caller holds a sync slot, which the waiter gives
// back (engine invariant 3).
func (s *Store) seal(rd *round) {
	s.stats.rounds.Add(1)
	// Engine invariant 5: nothing is applied once the store has failed.
	if len(rd.writes) > 0 && s.failure() == nil {
		// Every round that writes records its number: the witness
		// checks on Open that the newest one it saw synced survived.
		s.roundNum++
		rd.number = s.roundNum
		rd.set(keyRounds, be64(rd.number))
		s.sealJournal(rd)
		b, err := rd.build(s.db)
		if err == nil {
			rd.batch = b
			// Engine invariant 2: stored before the writes become
			// visible, so that a reader who loads it after reading
			// waits for a round covering what it read.
			s.last.Store(rd.durable)
			err = s.apply(b)
		}
		if err != nil {
			s.fail(err)
		} else {
			rd.applied = true
			// Engine invariant 7: removals wait until the deletes
			// are applied, since a failed round leaves its keys
			// stored.
			for _, x := range s.removals {
				s.uncounted(x)
			}
		}
	}
	// Engine invariant 6: the next round starts from the database alone.
	s.removals = s.removals[:0]
	s.journal = s.journal[:0]
	clear(s.overlay)
	clear(s.counters)
	clear(s.seqs)
	s.publishFilter()
	s.rounds <- rd
}

// apply applies b without waiting for its sync. Pebble reports a commit
// that fails after an earlier WAL failure by calling its logger's Fatalf,
// which panics (options.go): that panic becomes the round's error, and the
// store then reopens the database (recover.go).
func (s *Store) apply(b *pdb.Batch) error {
	return unpanic(func() error { return s.db.ApplyNoSyncWait(b, pdb.Sync) })
}

// unpanic calls f and turns a panic of pebble's logger's Fatalf (see
// logger.Fatalf) into an error. Any other panic goes on.
func unpanic(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			msg, ok := p.(fatalPanic)
			if !ok {
				panic(p)
			}
			err = errors.New(string(msg))
		}
	}()
	return f()
}

// wait is the waiter goroutine: it answers rounds in order, each after its
// WAL sync (engine invariants 2 and 3).
func (s *Store) wait() {
	defer close(s.done)
	for rd := range s.rounds {
		if rd.applied {
			err := rd.batch.SyncWait()
			if err == nil {
				// Before anyone is answered: see witness.go.
				err = s.witness.setRounds(rd.number)
			}
			if err != nil {
				s.fail(err)
			}
			s.stats.syncs.Add(1)
		}
		if rd.batch != nil {
			rd.batch.Close()
		}
		s.free <- struct{}{}
		// Engine invariant 5: a failure anywhere so far taints this
		// round, which may have observed writes that are not durable.
		err := s.failure()
		rd.durable.err = err
		close(rd.durable.synced)
		for _, r := range rd.reqs {
			if err != nil && r.kind != kindReopen {
				// (A reopen reports its own outcome.)
				r.err = err
			}
			r.done <- struct{}{}
		}
		recycleRound(rd)
	}
}
