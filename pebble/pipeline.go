package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/reccodec"
)

// The write path. Callers queue requests on Store.reqs. One decision
// goroutine takes them in rounds: it decides each request against the
// database as it stands (earlier rounds are applied, hence visible, even
// before their WAL sync) plus the round's own earlier writes (the overlay),
// and puts the round's writes into one batch. It applies that batch with
// ApplyNoSyncWait and hands the round to the waiter goroutine, which waits
// for the WAL sync and only then answers the round's callers, while the
// decision goroutine already forms the next round. The WAL is ordered and
// rounds are answered in order, so no answer leaves before everything it
// observed is durable.

type kind uint8

const (
	kindClaim kind = iota
	kindGet
	kindComplete
	kindRelease
	kindSweep
	kindReserve
	kindCount
	kindPurge  // see purge.go
	kindReopen // see recover.go
)

// request is one call waiting for its round. The caller owns it until it is
// queued, then the decision goroutine and the waiter own it until the waiter
// signals done, and the caller again after that. Requests are recycled
// unless their caller gave up waiting.
type request struct {
	kind kind
	ctx  context.Context

	// kindClaim
	claims  []spent.ClaimOp
	results []spent.ClaimResult
	one     [1]spent.ClaimOp
	oneRes  [1]spent.ClaimResult

	key    spent.Hash // kindGet, kindComplete, kindRelease
	seq    spent.Seq
	result []byte
	now    time.Time // also kindSweep
	limit  int       // kindSweep
	node   uint32    // kindReserve
	n      uint64
	count1 spent.CountOp // kindCount
	purge  purgeOp       // kindPurge

	// Answers.
	rec     spent.Record
	count   int
	first   uint64
	counted spent.CountResult
	err     error

	done  chan struct{} // one value per use, sent by the waiter (or early, by the decision goroutine)
	gone  bool          // queued, and the caller stopped waiting
	early bool          // answered when decided, before the round's sync (see add)
}

var requests = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

func newRequest(k kind, ctx context.Context) *request {
	r := requests.Get().(*request)
	r.kind, r.ctx = k, ctx
	return r
}

// recycle returns r to the pool unless its caller gave up on it, in which
// case the store may still be using it.
func recycle(r *request) {
	if r.gone {
		return
	}
	done := r.done
	*r = request{done: done}
	requests.Put(r)
}

// round is the unit of group commit: one batch, one WAL sync. Its writes are
// staged in the order they are decided and copied into a pebble batch when
// the round is sealed. Rounds are recycled once answered.
type round struct {
	number   uint64 // its number, when it writes (see witness.go)
	reqs     []*request
	buf      []byte  // staged keys and values
	writes   []write // staged writes, in decision order
	rangeDel bool
	batch    *pdb.Batch
	applied  bool
	durable  *syncPoint
}

// syncPoint says when a round is durable. Readers outside the rounds wait on
// it (see Store.last).
type syncPoint struct {
	err    error         // set before synced is closed
	synced chan struct{} // closed once the round is durable or failed
}

var rounds = sync.Pool{New: func() any { return new(round) }}

func newRound() *round {
	rd := rounds.Get().(*round)
	rd.durable = &syncPoint{synced: make(chan struct{})}
	return rd
}

func recycleRound(rd *round) {
	clear(rd.reqs)
	*rd = round{reqs: rd.reqs[:0], buf: rd.buf[:0], writes: rd.writes[:0]}
	rounds.Put(rd)
}

type writeKind uint8

const (
	writeSet writeKind = iota
	writeDelete
	writeDeleteRange // key is the start, value the end
)

// write is a staged write: its key and value are buf[k:v] and buf[v:end].
type write struct {
	kind      writeKind
	k, v, end int
}

func (rd *round) stage(kind writeKind, key, value []byte) {
	w := write{kind: kind, k: len(rd.buf)}
	rd.buf = append(rd.buf, key...)
	w.v = len(rd.buf)
	rd.buf = append(rd.buf, value...)
	w.end = len(rd.buf)
	rd.writes = append(rd.writes, w)
}

func (rd *round) set(key, value []byte) { rd.stage(writeSet, key, value) }

func (rd *round) del(key []byte) { rd.stage(writeDelete, key, nil) }

func (rd *round) delRange(start, end []byte) {
	rd.stage(writeDeleteRange, start, end)
	rd.rangeDel = true
}

func (rd *round) key(w *write) []byte { return rd.buf[w.k:w.v:w.v] }

func (rd *round) value(w *write) []byte { return rd.buf[w.v:w.end:w.end] }

// build copies the staged writes into a pebble batch. Unless the round holds
// a range deletion, the writes are sorted by key first (writes of one key
// keep their order): pebble inserts a sorted batch into its memtable much
// faster, as each insert starts from where the previous one ended.
func (rd *round) build(db *pdb.DB) (*pdb.Batch, error) {
	if !rd.rangeDel {
		slices.SortFunc(rd.writes, func(a, b write) int {
			if c := bytes.Compare(rd.key(&a), rd.key(&b)); c != 0 {
				return c
			}
			return a.k - b.k // staging order
		})
	}
	b := db.NewBatchWithSize(len(rd.buf) + 8*len(rd.writes) + 64)
	for i := range rd.writes {
		w := &rd.writes[i]
		if !rd.rangeDel && i+1 < len(rd.writes) && bytes.Equal(rd.key(w), rd.key(&rd.writes[i+1])) {
			// A later write of the same key in this round shadows
			// this one (a record completed in the round it was
			// claimed in, say): only the last is applied.
			continue
		}
		var err error
		switch w.kind {
		case writeSet:
			err = b.Set(rd.key(w), rd.value(w), nil)
		case writeDelete:
			err = b.Delete(rd.key(w), nil)
		case writeDeleteRange:
			err = b.DeleteRange(rd.key(w), rd.value(w), nil)
		}
		if err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

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

// decide is the decision goroutine. It decides requests into the current
// round as they arrive, and seals the round when the sync slot is free (see
// Store.free), when the round is full, or before a sweep. While the previous
// round syncs, requests keep being decided into the next one, so rounds grow
// with the load and each sync answers more callers.
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
			// A sweep starts its own round, so that the expiry
			// index it walks holds every earlier write; a reopen
			// too, so that no earlier write of its round is
			// staged against the database it closes.
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
				if r, ok = <-s.reqs; !ok {
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

// size is the weight of r in a round: its number of claims, at least one.
func (r *request) size() int { return max(1, len(r.claims)) }

// add decides r into rd and returns its size. A request decided early (a
// fresh Early claim, see spent.ClaimOp) is answered at once and leaves the
// round: its caller may recycle it as soon as it is answered, and the
// round keeps nothing of it (the overlay, or Store.held, holds a copy of
// its record).
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

// seal applies the round's batch without waiting for its sync and hands the
// round to the waiter. The caller holds a sync slot, which the waiter gives
// back.
func (s *Store) seal(rd *round) {
	s.stats.rounds.Add(1)
	if len(rd.writes) > 0 && s.failure() == nil {
		// Every round that writes records its number: the witness
		// checks on Open that the newest one it saw synced survived.
		s.roundNum++
		rd.number = s.roundNum
		rd.set(keyRounds, be64(rd.number))
		b, err := rd.build(s.db)
		if err == nil {
			rd.batch = b
			// Stored before the writes become visible, so that a
			// reader who loads it after reading waits for a round
			// covering what it read.
			s.last.Store(rd.durable)
			err = s.apply(b)
		}
		if err != nil {
			s.fail(err)
		} else {
			rd.applied = true
			// Removals wait until the deletes are applied: a failed
			// round leaves its keys stored, and the filter must still
			// know them. (Inserts were made at once; an extra entry is
			// only a false positive.)
			for _, x := range s.removals {
				s.filter.remove(x)
			}
		}
	}
	s.removals = s.removals[:0]
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
// WAL sync.
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
		// A failure anywhere so far taints this round: it may have
		// observed writes that are not durable.
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

// decideOne decides r within rd.
func (s *Store) decideOne(rd *round, r *request) {
	if r.kind == kindReopen {
		r.err = s.reopenDB()
		return
	}
	if err := s.failure(); err != nil {
		s.refused.Add(1)
		r.err = err
		return
	}
	if err := r.ctx.Err(); err != nil {
		// The caller has gone: nothing is written for it.
		r.err = err
		return
	}
	switch r.kind {
	case kindClaim:
		var claims, inserted uint64
		for i := range r.claims {
			res, err := s.claim(rd, &r.claims[i], len(r.claims) == 1 && r.claims[i].Early)
			if err != nil {
				r.err = err
				break
			}
			r.results[i] = res
			claims++
			if res.Inserted {
				inserted++
			}
		}
		s.stats.claims.Add(claims)
		s.stats.inserted.Add(inserted)
		r.early = r.err == nil && len(r.claims) == 1 && r.claims[0].Early && r.results[0].Inserted &&
			r.claims[0].Record.State == spent.StatePending
	case kindGet:
		if p, ok := s.held[r.key]; ok {
			// The answer reports it: it must be durable first.
			s.materialize(rd, &r.key, p)
		}
		cur, found, shared, err := s.lookup(&r.key)
		switch {
		case err != nil:
			r.err = err
		case !found || !cur.LiveAt(r.now):
			r.err = spent.ErrNotFound
		default:
			if shared {
				cur = cloneRecord(&cur)
			}
			r.rec = cur
		}
	case kindComplete:
		r.rec, r.err = s.complete(rd, r)
	case kindRelease:
		r.err = s.release(rd, r)
	case kindSweep:
		r.count, r.err = s.sweep(rd, r.now, r.limit)
		if r.err == nil && r.count < r.limit {
			var n int
			n, r.err = s.sweepCounters(rd, r.now, r.limit-r.count)
			r.count += n
		}
	case kindReserve:
		r.first, r.err = s.reserve(rd, r.node, r.n)
	case kindCount:
		r.counted, r.err = s.countOne(rd, &r.count1)
	case kindPurge:
		r.count, r.err = s.purgeKeys(rd, &r.purge)
	default:
		r.err = fmt.Errorf("unknown request kind %d", r.kind)
	}
}

// lookup returns the record stored under h as this round sees it. shared
// reports that the record belongs to the overlay and must be cloned before
// it is handed out.
func (s *Store) lookup(h *spent.Hash) (rec spent.Record, found, shared bool, err error) {
	rec, _, found, shared, err = s.lookupLimit(h, 0)
	return rec, found, shared, err
}

// lookupLimit is lookup that, when limit is positive, decodes a stored
// record without a result longer than limit, never copying it out of the
// engine; omitted is then the result's length. A record of the overlay
// comes whole (its caller limits it before cloning).
func (s *Store) lookupLimit(h *spent.Hash, limit int) (rec spent.Record, omitted int, found, shared bool, err error) {
	if p, ok := s.overlay[*h]; ok {
		if p == nil {
			return rec, 0, false, false, nil
		}
		return *p, 0, true, true, nil
	}
	if !s.filter.contains(fingerprint(h)) {
		s.stats.filterSkips.Add(1)
		return rec, 0, false, false, nil
	}
	s.stats.reads.Add(1)
	s.kbuf = appendRecordKey(s.kbuf[:0], h)
	v, closer, err := s.db.Get(s.kbuf)
	if errors.Is(err, pdb.ErrNotFound) {
		return rec, 0, false, false, nil
	} else if err != nil {
		return rec, 0, false, false, err
	}
	rec, omitted, err = reccodec.DecodeLimit(*h, v, limit)
	closer.Close()
	if err != nil {
		return rec, 0, false, false, fmt.Errorf("%w: record %s: %w", ErrCorrupt, *h, err)
	}
	return rec, omitted, true, false, nil
}

// maxHeld bounds the records the store holds in memory for fresh Early
// claims (see Store.held); beyond it, an Early claim writes its record as
// any claim does.
const maxHeld = 1 << 16

// claim decides one claim. With hold set (a lone Early claim), a fresh
// claim of a key that has no record is held in memory instead of written.
func (s *Store) claim(rd *round, op *spent.ClaimOp, hold bool) (spent.ClaimResult, error) {
	h := &op.Record.Key
	counted := false // the filter counts h already
	if p, ok := s.held[*h]; ok {
		if spent.FreeAt(p, op.Now, op.Retake) {
			// Never written: forgetting it is enough.
			delete(s.held, *h)
			counted = true
		} else {
			// This answer reports the held record, so it must be
			// durable first: write it in this round.
			s.materialize(rd, h, p)
		}
	}
	cur, omitted, found, shared, err := s.lookupLimit(h, op.ResultLimit)
	if err != nil {
		return spent.ClaimResult{}, err
	}
	if found && !spent.FreeAt(&cur, op.Now, op.Retake) {
		// A result over op's limit is left out before the clone, so it
		// is never copied.
		res := spent.LimitResult(spent.ClaimResult{Record: cur}, op.ResultLimit)
		if shared {
			res.Record = cloneRecord(&res.Record)
		}
		if omitted > 0 {
			res.ResultOmitted, res.ResultLen = true, omitted
		}
		return res, nil
	}
	if found {
		// An expired record, or a pending one retaken: replace it.
		s.unindex(rd, &cur)
	} else if !counted {
		s.filter.insert(fingerprint(h))
	}
	if hold && !found && op.Record.State == spent.StatePending && len(s.held) < maxHeld {
		c := cloneRecord(&op.Record)
		s.held[*h] = &c
		s.stats.held.Add(1)
		return spent.ClaimResult{Inserted: true, Record: op.Record}, nil
	}
	rec := &op.Record
	if op.Early {
		// Its caller may be answered, and reuse op, before the round
		// is sealed: the overlay keeps a copy.
		c := cloneRecord(rec)
		rec = &c
	}
	s.put(rd, rec, true)
	return spent.ClaimResult{Inserted: true, Record: op.Record}, nil
}

// dropHeld forgets the held record of h, which was never written, so the
// filter forgets h at once.
func (s *Store) dropHeld(h *spent.Hash) {
	delete(s.held, *h)
	s.filter.remove(fingerprint(h))
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

// heldPending returns the held record of key if there is one, with the
// error Complete or Release gets for it (see Store.pending). An expired one
// is forgotten.
func (s *Store) heldPending(key *spent.Hash, seq spent.Seq, now time.Time) (*spent.Record, bool, error) {
	p, ok := s.held[*key]
	switch {
	case !ok:
		return nil, false, nil
	case !p.LiveAt(now):
		s.dropHeld(key)
		return p, true, spent.ErrNotFound
	case p.Seq != seq:
		return p, true, spent.ErrSeqMismatch
	}
	return p, true, nil
}

// put writes rec and its index entries (the expiry entry only when
// withExpiry is set) and records it in the overlay. rec must stay unchanged
// until the round is sealed.
func (s *Store) put(rd *round, rec *spent.Record, withExpiry bool) {
	h := &rec.Key
	s.kbuf = appendRecordKey(s.kbuf[:0], h)
	s.vbuf = appendRecord(s.vbuf[:0], rec)
	rd.set(s.kbuf, s.vbuf)
	if withExpiry {
		s.kbuf = appendExpiryKey(s.kbuf[:0], rec.ExpiresAt, h)
		rd.set(s.kbuf, nil)
		if bytes.Compare(s.kbuf, s.sweepFrom) < 0 {
			s.sweepFrom = append(s.sweepFrom[:0], s.kbuf...)
		}
	}
	if rec.State == spent.StatePending {
		s.kbuf = appendPendingKey(s.kbuf[:0], rec.LeaseUntil, rec.Seq, h)
		rd.set(s.kbuf, []byte(rec.Namespace))
	}
	s.overlay[*h] = rec
}

// unindex deletes the index entries of the stored record cur.
func (s *Store) unindex(rd *round, cur *spent.Record) {
	s.kbuf = appendExpiryKey(s.kbuf[:0], cur.ExpiresAt, &cur.Key)
	rd.del(s.kbuf)
	if cur.State == spent.StatePending {
		s.kbuf = appendPendingKey(s.kbuf[:0], cur.LeaseUntil, cur.Seq, &cur.Key)
		rd.del(s.kbuf)
	}
}

// remove deletes the stored record cur with its pending-index entry, and
// its expiry-index entry unless withExpiry is false (a sweep drops those with
// one range deletion); the filter forgets the key once the round applies.
func (s *Store) remove(rd *round, cur *spent.Record, withExpiry bool) {
	s.kbuf = appendRecordKey(s.kbuf[:0], &cur.Key)
	rd.del(s.kbuf)
	if withExpiry {
		s.unindex(rd, cur)
	} else if cur.State == spent.StatePending {
		s.kbuf = appendPendingKey(s.kbuf[:0], cur.LeaseUntil, cur.Seq, &cur.Key)
		rd.del(s.kbuf)
	}
	s.overlay[cur.Key] = nil
	s.removals = append(s.removals, fingerprint(&cur.Key))
}

// pending finds the live pending record of key written with seq, as
// Complete and Release need it. A complete record is ErrNotPending whatever
// its seq, as the ledger answers (it checks the state before the seq): a
// completion that raced with a retake of its key must report the key as
// complete, not as taken by another claim.
func (s *Store) pending(key *spent.Hash, seq spent.Seq, now time.Time) (spent.Record, bool, error) {
	cur, found, shared, err := s.lookup(key)
	switch {
	case err != nil:
		return cur, false, err
	case !found || !cur.LiveAt(now):
		return cur, false, spent.ErrNotFound
	case cur.State != spent.StatePending:
		return cur, shared, spent.ErrNotPending
	case cur.Seq != seq:
		return cur, shared, spent.ErrSeqMismatch
	}
	return cur, shared, nil
}

func (s *Store) complete(rd *round, r *request) (spent.Record, error) {
	if p, ok, err := s.heldPending(&r.key, r.seq, r.now); ok {
		if err != nil {
			return spent.Record{}, err
		}
		// Nothing was written for it: write the complete record with
		// its expiry entry.
		delete(s.held, r.key)
		rec := p
		rec.State = spent.StateComplete
		rec.Result = append(make([]byte, 0, len(r.result)), r.result...)
		rec.LeaseUntil = time.Time{}
		s.put(rd, rec, true)
		return cloneRecord(rec), nil
	}
	cur, shared, err := s.pending(&r.key, r.seq, r.now)
	if errors.Is(err, spent.ErrNotPending) && cur.Seq == r.seq && bytes.Equal(cur.Result, r.result) {
		// A retried completion: already done, with these very bytes.
		if shared {
			cur = cloneRecord(&cur)
		}
		return cur, nil
	}
	if err != nil {
		return spent.Record{}, err
	}
	old := cur
	rec := &spent.Record{}
	*rec = cur
	if shared {
		*rec = cloneRecord(&cur)
	}
	rec.State = spent.StateComplete
	rec.Result = append(make([]byte, 0, len(r.result)), r.result...)
	rec.LeaseUntil = time.Time{}
	s.kbuf = appendPendingKey(s.kbuf[:0], old.LeaseUntil, old.Seq, &old.Key)
	rd.del(s.kbuf)
	// The expiry entry stays: expires_at does not change.
	s.put(rd, rec, false)
	return cloneRecord(rec), nil
}

func (s *Store) release(rd *round, r *request) error {
	if _, ok, err := s.heldPending(&r.key, r.seq, r.now); ok {
		if err != nil {
			return err
		}
		// Never written: forgetting it is enough.
		s.dropHeld(&r.key)
		return nil
	}
	cur, _, err := s.pending(&r.key, r.seq, r.now)
	if err != nil {
		return err
	}
	s.remove(rd, &cur, true)
	return nil
}

// sweep removes up to limit records with expires_at <= now, walking the
// expiry index from s.sweepFrom, and drops the walked span of the index with
// one range deletion. It is the first request of its round.
func (s *Store) sweep(rd *round, now time.Time, limit int) (int, error) {
	s.forgetHeld(now)
	upper := expiryBound(now)
	if bytes.Compare(s.sweepFrom, upper) >= 0 {
		return 0, nil
	}
	it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: s.sweepFrom, UpperBound: upper})
	if err != nil {
		return 0, err
	}
	var first, last []byte
	removed := 0
	ok := it.First()
	for ; ok && removed < limit; ok = it.Next() {
		k := it.Key()
		h, exp, err := parseExpiryKey(k)
		if err != nil {
			it.Close()
			return 0, err
		}
		if first == nil {
			first = append([]byte(nil), k...)
		}
		last = append(last[:0], k...)
		cur, found, _, err := s.lookup(&h)
		if err != nil {
			it.Close()
			return 0, err
		}
		var enc [timeLen]byte
		putTime(enc[:], cur.ExpiresAt)
		if !found || !bytes.Equal(enc[:], exp) {
			continue // a stale entry: the range deletion drops it
		}
		s.remove(rd, &cur, false)
		removed++
	}
	exhausted := !ok
	if err := it.Close(); err != nil {
		return 0, err
	}
	if first != nil {
		end := append(last, 0)
		rd.delRange(first, end)
		s.sweepFrom = append(s.sweepFrom[:0], end...)
	}
	if exhausted {
		s.sweepFrom = append(s.sweepFrom[:0], upper...)
	}
	s.stats.swept.Add(uint64(removed))
	return removed, nil
}

// lookupCounter returns the counter h as this round sees it.
func (s *Store) lookupCounter(h *spent.Hash) (c spent.CountResult, found bool, err error) {
	if p, ok := s.counters[*h]; ok {
		if p == nil {
			return c, false, nil
		}
		return *p, true, nil
	}
	s.kbuf = appendCounterKey(s.kbuf[:0], h)
	v, closer, err := s.db.Get(s.kbuf)
	if errors.Is(err, pdb.ErrNotFound) {
		return c, false, nil
	} else if err != nil {
		return c, false, err
	}
	c, err = decodeCounter(v)
	closer.Close()
	return c, err == nil, err
}

// countOne decides one Count.
func (s *Store) countOne(rd *round, op *spent.CountOp) (spent.CountResult, error) {
	h := &op.Key
	cur, found, err := s.lookupCounter(h)
	if err != nil {
		return spent.CountResult{}, err
	}
	if found && !op.Now.Before(cur.ExpiresAt) {
		// Expired: start again from zero with the new expiry.
		s.kbuf = appendCounterExpiryKey(s.kbuf[:0], cur.ExpiresAt, h)
		rd.del(s.kbuf)
		found = false
	}
	if !found {
		cur = spent.CountResult{ExpiresAt: op.ExpiresAt}
	}
	if cur.Value >= op.Limit {
		return cur, nil
	}
	cur.Value++
	cur.Added = true
	s.kbuf = appendCounterKey(s.kbuf[:0], h)
	s.vbuf = appendCounter(s.vbuf[:0], &cur)
	rd.set(s.kbuf, s.vbuf)
	if !found {
		s.kbuf = appendCounterExpiryKey(s.kbuf[:0], cur.ExpiresAt, h)
		rd.set(s.kbuf, nil)
	}
	c := cur
	c.Added = false
	s.counters[*h] = &c
	return cur, nil
}

// sweepCounters forgets up to limit counters with expires_at <= now. Counters
// are few (one per client and epoch), so the walk of their index starts at
// its beginning each time; entries are deleted one by one.
func (s *Store) sweepCounters(rd *round, now time.Time, limit int) (int, error) {
	upper := make([]byte, len(prefixCExpiry)+timeLen)
	copy(upper, prefixCExpiry)
	putTime(upper[len(prefixCExpiry):], now.Add(time.Nanosecond))
	it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: []byte(prefixCExpiry), UpperBound: upper})
	if err != nil {
		return 0, err
	}
	removed := 0
	for ok := it.First(); ok && removed < limit; ok = it.Next() {
		k := it.Key()
		if len(k) != len(prefixCExpiry)+timeLen+spent.HashSize {
			it.Close()
			return 0, fmt.Errorf("%w: counter expiry key %x", ErrCorrupt, k)
		}
		var h spent.Hash
		copy(h[:], k[len(prefixCExpiry)+timeLen:])
		rd.del(k)
		cur, found, err := s.lookupCounter(&h)
		if err != nil {
			it.Close()
			return 0, err
		}
		if !found || now.Before(cur.ExpiresAt) {
			continue // a stale entry
		}
		s.kbuf = appendCounterKey(s.kbuf[:0], &h)
		rd.del(s.kbuf)
		s.counters[h] = nil
		removed++
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	return removed, nil
}

// reserve reserves n seq counters for node: the stored value is the last
// counter handed out, so the first block starts at 1.
func (s *Store) reserve(rd *round, node uint32, n uint64) (uint64, error) {
	last, ok := s.seqs[node]
	if !ok {
		v, closer, err := s.db.Get(seqKey(node))
		switch {
		case errors.Is(err, pdb.ErrNotFound):
		case err != nil:
			return 0, err
		default:
			if len(v) != 8 {
				closer.Close()
				return 0, fmt.Errorf("%w: seq of node %d", ErrCorrupt, node)
			}
			last = binary.BigEndian.Uint64(v)
			closer.Close()
		}
	}
	first := last + 1
	if first == 0 || (n > 0 && n-1 > math.MaxUint64-first) {
		return 0, fmt.Errorf("seq counters of node %d exhausted", node)
	}
	if n == 0 {
		return first, nil
	}
	last = first + n - 1
	rd.set(seqKey(node), be64(last))
	s.seqs[node] = last
	return first, nil
}
