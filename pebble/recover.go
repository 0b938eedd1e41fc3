package pebble

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
)

// Recovery from a failed write.
//
// When pebble fails to apply or sync a round, what the database shows may
// not be durable, and after a failed fsync not even the file's contents are
// known (the kernel may have dropped the pages it could not write). So the
// store fails closed: every call fails with ErrFailed. It then reopens
// itself: a recovery goroutine asks the decision goroutine, at a pause
// growing from 100 ms to 5 s, to close pebble and open it again from the
// files on disk (with the witness checks of Open), and to write one synced
// probe. Once that succeeds the store serves again; the records held in
// memory for Early claims are forgotten, as a crash would forget them.
//
// When the disk is full, a reopen waits until the file system has room for
// pebble to replay and flush its WALs, so that pebble does not meet the full
// disk again half way through writing its MANIFEST (which it cannot survive).
//
// Log lines mark the changes of state, with counts: the failure, a
// reopen that failed (at most one line per reopenLogEvery, unless its cause
// changes), and the recovery.

const (
	reopenFirst    = 100 * time.Millisecond
	reopenMax      = 5 * time.Second
	reopenLogEvery = 30 * time.Second
	// reopenSpare is the room a reopen wants beyond the WALs it replays.
	reopenSpare = 4 << 20
)

// fail records the first failure of an apply or sync. From then on every
// call fails (state may be visible that is not durable) until the store has
// reopened itself: engine invariant 5.
func (s *Store) fail(err error) {
	err = fmt.Errorf("%w: %w", ErrFailed, err)
	if !s.failed.CompareAndSwap(nil, &err) {
		return
	}
	s.log.Error("pebble: a write failed; the store refuses every call until it has reopened itself, which it now tries", "err", err)
	go s.recoverLoop(time.Now())
}

// recoverLoop reopens the store until it succeeds or the store closes.
func (s *Store) recoverLoop(since time.Time) {
	delay := reopenFirst
	var lastLog time.Time
	var lastCause string
	for attempt := 1; ; attempt++ {
		select {
		case <-s.closing:
			return
		case <-time.After(delay):
		}
		err := s.roomToReopen()
		if err == nil {
			err = s.reopen()
		}
		if err == nil {
			s.log.Info("pebble: the store reopened and serves again",
				"after", time.Since(since).Round(time.Millisecond), "attempts", attempt, "refused_calls", s.refused.Swap(0))
			return
		}
		if errors.Is(err, spent.ErrClosed) {
			return
		}
		if cause := err.Error(); cause != lastCause || time.Since(lastLog) >= reopenLogEvery {
			s.log.Warn("pebble: reopening failed; trying again", "attempt", attempt, "down_for", time.Since(since).Round(time.Second),
				"refused_calls", s.refused.Load(), "err", err)
			lastLog, lastCause = time.Now(), cause
		}
		delay = min(2*delay, reopenMax)
	}
}

// roomToReopen returns an error when the file system lacks the room pebble
// needs to replay and flush the store's WALs.
func (s *Store) roomToReopen() error {
	du, err := s.fs.GetDiskUsage(s.dir)
	if err != nil {
		return nil // not every file system can tell: try anyway
	}
	ls, err := s.fs.List(s.dir)
	if err != nil {
		return err
	}
	need := uint64(reopenSpare)
	for _, name := range ls {
		if strings.HasSuffix(name, ".log") {
			if fi, err := s.fs.Stat(s.fs.PathJoin(s.dir, name)); err == nil {
				need += uint64(fi.Size())
			}
		}
	}
	if du.AvailBytes < need {
		return fmt.Errorf("waiting for disk space: %d bytes free in %s, %d needed", du.AvailBytes, s.dir, need)
	}
	return nil
}

// reopen has the decision goroutine reopen pebble, and waits for it.
func (s *Store) reopen() error {
	r := newRequest(kindReopen, context.Background())
	defer recycle(r)
	return s.do(context.Background(), r)
}

// reopenDB closes pebble and opens it again, on the decision goroutine,
// alone in its round (engine invariant 8). It takes every sync slot, which
// waits for the rounds in flight (engine invariant 3), and holds dbMu so
// that no reader outside the rounds uses the database meanwhile (engine
// invariant 1). The records held for Early claims are forgotten, as a
// crash forgets them (engine invariant 4).
func (s *Store) reopenDB() error {
	if s.failure() == nil {
		return nil // nothing to mend
	}
	for range syncSlots {
		<-s.free
	}
	defer func() {
		for range syncSlots {
			s.free <- struct{}{}
		}
	}()
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	// A build reads a snapshot of the database it closes: it stops, and
	// the next starts once the store serves again (tendFilter).
	s.stopFilterWork()
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			s.log.Debug("pebble: closing the failed database", "err", err)
		}
		s.db = nil
	}
	clear(s.overlay)
	clear(s.counters)
	clear(s.seqs)
	clear(s.held)
	s.removals = s.removals[:0]
	if err := unpanic(s.openDB); err != nil {
		if s.db != nil {
			s.db.Close()
			s.db = nil
		}
		return err
	}
	// A synced write proves that the disk takes writes again.
	s.roundNum++
	err := unpanic(func() error {
		b := s.db.NewBatch()
		defer b.Close()
		b.Set(keyRounds, be64(s.roundNum), nil)
		b.Set(journalKey(s.roundNum), nil, nil) // see sealJournal
		return s.db.Apply(b, pdb.Sync)
	})
	if err == nil {
		err = s.witness.setRounds(s.roundNum)
	}
	if err != nil {
		s.db.Close()
		s.db = nil
		return fmt.Errorf("pebble: reopen: probe write: %w", err)
	}
	// Engine invariant 5: the store serves again.
	s.failed.Store(nil)
	return nil
}
