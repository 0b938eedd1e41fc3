package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/purgecursor"
)

// Store is the embedded durable store. Open it with [Open]; it is safe for
// concurrent use by many goroutines, within one process.
type Store struct {
	db      *pdb.DB
	opts    Options
	dir     string
	fs      vfs.FS
	log     *slog.Logger
	witness *witness // see witness.go

	// mu guards closed and the send side of reqs.
	mu     sync.RWMutex
	closed bool
	reqs   chan *request
	// dbMu guards db for the readers outside the rounds (ListPending and
	// Purge, under its read lock): a reopen swaps db under its write lock
	// (recover.go). The decision goroutine uses db without it.
	dbMu    sync.RWMutex
	closing chan struct{} // closed when Close begins: stops the recovery
	refused atomic.Uint64 // calls refused since the store failed

	// Owned by the decision goroutine (engine invariant 1, engine.go).
	filter     *filter // nil while none counts every stored key (filterbuild.go)
	flog       []filterOp
	build      *filterBuild
	save       *filterSave
	journal    []byte    // this round's inserted fingerprints (filterfile.go)
	trimDue    bool      // a save is durable: the journal up to trimTo may go, the floor move there
	trimTo     uint64    // the round of that save
	trimSave   [16]byte  // the id of that save (filterfile.go)
	unsaved    int       // fingerprints inserted since the last save began
	savedAt    time.Time // when the last save began
	buildAfter time.Time // no build before then (after a failed one)
	buildHint  int       // keys the next build is made for, at least (a file refused as outgrown)
	filterIDv  [16]byte
	overlay    map[spent.Hash]*spent.Record      // this round's writes; nil means deleted
	seqs       map[uint32]uint64                 // this round's seq reservations
	removals   []uint64                          // filter removals once this round applies
	counters   map[spent.Hash]*spent.CountAnswer // this round's counter writes; nil means deleted
	sweepFrom  []byte                            // no expiry-index key sorts before it
	roundNum   uint64                            // the number of the last round that wrote (see witness.go)
	// damageAccepted is set when this open accepted damage (AcceptDamage):
	// the store's meta keys may have gone back with its lost tables, so a
	// saved filter is not trusted whatever its save id says.
	damageAccepted bool
	// held are the records of fresh Early claims of new keys, kept in
	// memory only until their Complete (which writes the complete record),
	// their Release (which forgets it) or the first other request that
	// looks at them (which writes it first): see held.go and engine
	// invariant 4. A crash loses them, which the Early promise allows.
	held map[spent.Hash]*spent.Record
	kbuf []byte // scratch key
	vbuf []byte // scratch value

	filterEvents chan filterEvent          // builds' and saves' reports (filterbuild.go)
	rounds       chan *round               // decided rounds, in order, to the waiter
	free         chan struct{}             // sync slots: a round is sealed only with one
	last         atomic.Pointer[syncPoint] // the latest round with writes, stored before it applies
	failed       atomic.Pointer[error]     // the first apply or sync failure: the store then fails closed
	done         chan struct{}             // closed when the waiter has finished
	closeOnce    sync.Once
	closeErr     error
	purgeAt      purgecursor.Cursor[[]byte] // the last record key a Purge looked at (purge.go)

	stats struct {
		filterEntries, filterBytes      atomic.Int64
		rounds, claims, inserted, syncs atomic.Uint64
		filterSkips, reads, swept       atomic.Uint64
		held                            atomic.Uint64
		filterBuilds, filterSaves       atomic.Uint64
		filterRefused                   atomic.Uint64
		filterBuilding                  atomic.Bool
	}
}

var (
	_ spent.Store     = (*Store)(nil)
	_ spent.SeqLister = (*Store)(nil)
)

// formatMajorVersion is pebble's on-disk format, pinned (the newest of
// pebble v2.1.7) so that upgrading the module never ratchets a directory to a
// format that an older binary cannot open; raise it on purpose.
const formatMajorVersion = pdb.FormatValueSeparation

// syncSlots is how many sealed rounds may wait for their WAL sync at once.
// With one, the next round gathers every request that arrives while the
// current one syncs; more slots made rounds smaller and, on a 2-core machine
// with a 0.3 to 2 ms fsync, fewer claims per second.
const syncSlots = 1

// Stats are counters of a Store's work since Open.
type Stats struct {
	// FilterEntries is the number of keys in the existence filter: every
	// record physically stored, expired-but-unswept ones included, and
	// every Early claim held in memory.
	FilterEntries int64
	// FilterBytes is the memory held by the existence filter's table.
	FilterBytes int64
	// Rounds is the number of decision rounds.
	Rounds uint64
	// Claims is the number of claims decided (each op of a ClaimBatch counts).
	Claims uint64
	// Inserted is the number of claims that wrote their record.
	Inserted uint64
	// Syncs is the number of WAL syncs waited for: one per round that wrote
	// anything. Pebble may cover several of them with one fsync.
	Syncs uint64
	// FilterSkips is the number of lookups the filter answered "absent"
	// without reading pebble.
	FilterSkips uint64
	// Reads is the number of lookups that read pebble.
	Reads uint64
	// Swept is the number of records DeleteExpired removed.
	Swept uint64
	// Held is the number of fresh Early claims held in memory instead of
	// written (see [spent.ClaimOp].Early).
	Held uint64
	// FilterBuilding is true while the existence filter is built from the
	// record keys in the background: when FilterEntries is zero too, no
	// filter is complete yet and every lookup reads pebble.
	FilterBuilding bool
	// FilterBuilds is the number of filters built from the record keys
	// since Open: at Open when no saved filter could be trusted, and when
	// the filter filled up and a larger one replaced it.
	FilterBuilds uint64
	// FilterSaves is the number of periodic saves of the filter that
	// completed (the one at Close aside).
	FilterSaves uint64
	// FilterRefused is 1 when Open found a saved filter it could not trust
	// (damaged, of another version, not the store's own latest save,
	// older than the store's journal, or missing stored keys) or could not
	// load (too small for the keys journaled since it was saved), and
	// rebuilt it instead.
	FilterRefused uint64
	// CompactionDebt is pebble's estimate of the bytes its compactions
	// have yet to rewrite, and Compacting the number of compactions
	// running: after a bulk load, both fall as pebble catches up.
	CompactionDebt uint64
	Compacting     int64
}

func (s *Store) publishFilter() {
	if s.filter == nil {
		s.stats.filterEntries.Store(0)
		s.stats.filterBytes.Store(0)
		return
	}
	s.stats.filterEntries.Store(int64(s.filter.len()))
	s.stats.filterBytes.Store(int64(s.filter.bytes()))
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	st := &s.stats
	var debt uint64
	var compacting int64
	s.dbMu.RLock()
	if db := s.db; db != nil {
		m := db.Metrics()
		debt, compacting = m.Compact.EstimatedDebt, m.Compact.NumInProgress
	}
	s.dbMu.RUnlock()
	return Stats{
		CompactionDebt: debt,
		Compacting:     compacting,
		FilterEntries:  st.filterEntries.Load(),
		FilterBytes:    st.filterBytes.Load(),
		Rounds:         st.rounds.Load(),
		Claims:         st.claims.Load(),
		Inserted:       st.inserted.Load(),
		Syncs:          st.syncs.Load(),
		FilterSkips:    st.filterSkips.Load(),
		Reads:          st.reads.Load(),
		Swept:          st.swept.Load(),
		Held:           st.held.Load(),
		FilterBuilding: st.filterBuilding.Load(),
		FilterBuilds:   st.filterBuilds.Load(),
		FilterSaves:    st.filterSaves.Load(),
		FilterRefused:  st.filterRefused.Load(),
	}
}

// Claim implements [spent.Store]. It returns once the WAL sync covering its
// answer is done. A caller whose ctx ends first gets ctx.Err(), and the claim
// may or may not have been written (unless ctx ended before the claim was
// decided, in which case nothing was written).
func (s *Store) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	if err := op.Record.Validate(); err != nil {
		return spent.ClaimAnswer{}, fmt.Errorf("pebble: claim: %w", err)
	}
	r := newRequest(kindClaim, ctx)
	defer recycle(r)
	q := &r.claim
	q.one[0] = op
	q.ops, q.results = q.one[:], q.oneRes[:]
	if err := s.do(ctx, r); err != nil {
		return spent.ClaimAnswer{}, fmt.Errorf("pebble: claim: %w", err)
	}
	return q.oneRes[0], nil
}

// ClaimBatch implements [spent.Store]. The whole batch is decided in one
// round and shares one WAL sync. A malformed op rejects the batch before
// anything is written.
func (s *Store) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	for i := range ops {
		if err := ops[i].Record.Validate(); err != nil {
			return nil, fmt.Errorf("pebble: claim batch: op %d: %w", i, err)
		}
	}
	if len(ops) == 0 {
		return []spent.ClaimAnswer{}, nil
	}
	r := newRequest(kindClaim, ctx)
	defer recycle(r)
	// The ops are copied: the round keeps pointers into them.
	r.claim.ops = append([]spent.ClaimOp(nil), ops...)
	r.claim.results = make([]spent.ClaimAnswer, len(ops))
	if err := s.do(ctx, r); err != nil {
		return nil, fmt.Errorf("pebble: claim batch: %w", err)
	}
	return r.claim.results, nil
}

// Complete implements [spent.Store]. Its errors take precedence in the
// order the ledger checks them: ErrNotFound, then ErrNotPending (a complete
// record, whatever its seq, unless it holds this seq and these very bytes),
// then ErrSeqMismatch.
func (s *Store) Complete(ctx context.Context, key spent.Hash, seq spent.Seq, result []byte, now time.Time) (spent.Record, error) {
	r := newRequest(kindEnd, ctx)
	defer recycle(r)
	r.end.key, r.end.now, r.end.e = key, now, spent.Ending{Seq: seq, Result: result}
	if err := s.do(ctx, r); err != nil {
		return spent.Record{}, fmt.Errorf("pebble: complete: %w", err)
	}
	return r.end.rec, nil
}

// Release implements [spent.Store], with the error precedence of
// [Store.Complete].
func (s *Store) Release(ctx context.Context, key spent.Hash, seq spent.Seq, now time.Time) error {
	r := newRequest(kindEnd, ctx)
	defer recycle(r)
	r.end.key, r.end.now, r.end.e = key, now, spent.Ending{Seq: seq, Release: true}
	if err := s.do(ctx, r); err != nil {
		return fmt.Errorf("pebble: release: %w", err)
	}
	return nil
}

// Get implements [spent.Store]. It is decided in a round like a claim, so it
// sees every write decided before it and answers only after the WAL sync
// covering them.
func (s *Store) Get(ctx context.Context, key spent.Hash, now time.Time) (spent.Record, error) {
	r := newRequest(kindGet, ctx)
	defer recycle(r)
	r.get.key, r.get.now = key, now
	if err := s.do(ctx, r); err != nil {
		return spent.Record{}, fmt.Errorf("pebble: get: %w", err)
	}
	return r.get.rec, nil
}

// DeleteExpired implements [spent.Store]. It walks the expiry index from its
// start up to now, so it costs time in proportion to what it removes. It
// starts a round of its own and runs on the decision goroutine, so claims
// wait while it runs: prefer frequent sweeps with a limit of a few thousand.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	r := newRequest(kindSweep, ctx)
	defer recycle(r)
	r.sweep.now, r.sweep.limit = now, limit
	if err := s.do(ctx, r); err != nil {
		return 0, fmt.Errorf("pebble: delete expired: %w", err)
	}
	return r.sweep.removed, nil
}

// Count implements [spent.Store]. Counters live under their own prefix with
// their own expiry index, which DeleteExpired walks after the records'.
func (s *Store) Count(ctx context.Context, op spent.CountOp) (spent.CountAnswer, error) {
	r := newRequest(kindCount, ctx)
	defer recycle(r)
	r.count.op = op
	if err := s.do(ctx, r); err != nil {
		return spent.CountAnswer{}, fmt.Errorf("pebble: count: %w", err)
	}
	return r.count.res, nil
}

// ReserveSeq implements [spent.Store]. The first counter of a node is 1.
func (s *Store) ReserveSeq(ctx context.Context, node uint32, n uint64) (uint64, error) {
	r := newRequest(kindReserve, ctx)
	defer recycle(r)
	r.reserve.node, r.reserve.n = node, n
	if err := s.do(ctx, r); err != nil {
		return 0, fmt.Errorf("pebble: reserve seq: %w", err)
	}
	return r.reserve.first, nil
}

// ListPending implements [spent.Store]. It walks the pending index (ordered
// by lease end, then seq) from its start up to leaseBefore, reading from one
// snapshot outside the decision path, and answers once the WAL sync covering
// that snapshot is done.
func (s *Store) ListPending(ctx context.Context, namespace string, leaseBefore time.Time, limit int) ([]spent.Record, error) {
	recs, err := s.listPending(ctx, namespace, leaseBefore, limit)
	if err != nil {
		return nil, fmt.Errorf("pebble: list pending: %w", err)
	}
	return recs, nil
}

func (s *Store) listPending(ctx context.Context, namespace string, leaseBefore time.Time, limit int) ([]spent.Record, error) {
	unlock, err := s.readLock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := []spent.Record{}
	if limit <= 0 {
		return out, nil
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	// Engine invariant 2: every write the snapshot sees belongs to this
	// round or an earlier one, and the answer waits for its sync.
	covering := s.last.Load()
	it, err := snap.NewIter(&pdb.IterOptions{
		LowerBound: []byte(prefixPending),
		UpperBound: pendingBound(leaseBefore),
	})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		if len(out)%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if namespace != "" {
			v, err := it.ValueAndErr()
			if err != nil {
				return nil, err
			}
			if string(v) != namespace {
				continue
			}
		}
		lease, seq, h, err := parsePendingKey(it.Key())
		if err != nil {
			return nil, err
		}
		v, closer, err := snap.Get(recordKey(&h))
		if errors.Is(err, pdb.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		rec, err := decodeRecord(h, v)
		closer.Close()
		if err != nil {
			return nil, err
		}
		if rec.State != spent.StatePending || rec.Seq != seq || !rec.LeaseUntil.Equal(lease) ||
			!rec.LiveAt(leaseBefore) || (namespace != "" && rec.Namespace != namespace) {
			continue
		}
		out = append(out, rec)
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if err := covering.wait(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// Close implements [spent.Store]. Calls already submitted are decided and
// answered; later calls fail with spent.ErrClosed. Close waits for the last
// WAL sync, then closes pebble.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.mu.Lock()
		s.closed = true
		close(s.reqs)
		s.mu.Unlock()
		// Once the waiter is done, decide has returned (it closes
		// s.rounds when it does, and the waiter closes s.done only
		// after draining it), and nothing else touches what it owned:
		// Close may read s.db and the filter without a lock (engine
		// invariant 1). A recovery still running finds the store
		// closed and stops (s.do refuses it).
		<-s.done
		if s.db == nil {
			// A reopen failed: nothing is open but the witness.
			s.closeErr = errors.Join(s.failure(), s.witness.close())
			return
		}
		s.stopFilterWork()
		if err := s.saveOnClose(); err != nil {
			s.closeErr = err
		}
		if s.failure() == nil && s.filter != nil {
			// Only a hint for the next Open: it need not be synced.
			hint := be64(uint64(s.filter.len()))
			if err := s.db.Set(keySizeHint, hint, pdb.NoSync); err != nil {
				s.closeErr = fmt.Errorf("pebble: close: %w", err)
			}
		}
		// Stats reads s.db under dbMu's read lock.
		s.dbMu.Lock()
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("pebble: close: %w", err)
		}
		s.db = nil
		s.dbMu.Unlock()
		if err := s.witness.close(); err != nil && s.closeErr == nil {
			s.closeErr = fmt.Errorf("pebble: close: %w", err)
		}
	})
	return s.closeErr
}

// failure returns the error that broke the store, or nil.
func (s *Store) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// ErrFailed is returned by every call after pebble failed to apply or sync a
// write: the store fails closed, since what it reads may not be durable,
// until it has reopened itself from its files (see recover.go).
var ErrFailed = errors.New("pebble: store failed")

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// wait returns once the sync of p is done, with its error, or ctx's error
// if ctx ends first. A nil p (no round with writes yet) has nothing to wait
// for.
func (p *syncPoint) wait(ctx context.Context) error {
	if p == nil {
		return nil
	}
	select {
	case <-p.synced:
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.err
}

// readLock takes the locks a read outside the decision path holds (the
// store open, the engine not swapped) and checks that the store may be
// read: ctx live, not closed, no failure. On success the caller must call
// unlock when done.
func (s *Store) readLock(ctx context.Context) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, spent.ErrClosed
	}
	s.dbMu.RLock()
	if err := s.failure(); err != nil {
		s.dbMu.RUnlock()
		s.mu.RUnlock()
		return nil, err
	}
	return func() { s.dbMu.RUnlock(); s.mu.RUnlock() }, nil
}
