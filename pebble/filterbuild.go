package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
)

// The filter's life: loaded or built at Open, kept up to date by the
// decision goroutine, replaced by a larger one when full, saved now and
// then and at Close. Builds and saves run on goroutines of their own and
// report to the decision goroutine on s.filterEvents; the decision goroutine
// alone changes s.filter (engine invariant 1).
//
// A build reads the record keys of a pebble snapshot taken between two
// rounds, into a new filter. From that snapshot on, the decision goroutine
// logs every insert and removal (s.flog), and the fingerprints of the Early
// claims held in memory, which the snapshot lacks; when the build reports,
// the log is applied to the new filter, which then counts exactly what the
// old one counts, and replaces it. Until then the old filter answers, or,
// when there is none (a store whose saved filter was missing or refused),
// every lookup reads pebble: s.filter is nil, and nothing answers "absent".

// filterOp is one change to the filter while a build runs.
type filterOp struct {
	x       uint64
	removed bool
}

// filterEvent is a build's or a save's report to the decision goroutine.
type filterEvent struct {
	build *filterBuild // the build that ended, or nil
	save  *filterSave  // the save that ended, or nil
	f     *filter      // a build's filter
	err   error
}

// filterBuild is a build running.
type filterBuild struct {
	snap   *pdb.Snapshot
	expect int
	start  time.Time
	stop   chan struct{} // closed to end the build early
	done   chan struct{} // closed when its goroutine has returned
}

// filterSave is a save running.
type filterSave struct {
	img  *filterImage
	stop chan struct{}
	done chan struct{}
}

// Test hooks: called by a save after each chunk written, and by a build
// after each key read. Nil outside tests.
var (
	filterSaveHook  func(chunk uint64)
	filterBuildHook func(read int)
)

// progressEvery is how often a long load or build of the filter logs its
// progress.
var progressEvery = 5 * time.Second

// progress logs a long task's progress, at most once every progressEvery,
// so that a slow Open is never silent.
type progress struct {
	log         *slog.Logger
	msg         string
	doneKey     string
	attrs       []any // logged with every line, after doneKey's
	every       int64 // the clock is read once this much more is done
	checkAt     int64
	start, next time.Time
}

// progress returns the progress of a task that begins now, which logs msg
// with doneKey and attrs.
func (s *Store) progress(msg, doneKey string, every int64, attrs ...any) *progress {
	now := time.Now()
	return &progress{log: s.log, msg: msg, doneKey: doneKey, attrs: attrs, every: every,
		start: now, next: now.Add(progressEvery)}
}

// tick reports that done is done: it logs a line if progressEvery has
// passed since the last one (or the start).
func (p *progress) tick(done int64) {
	if done < p.checkAt {
		return
	}
	p.checkAt = done + p.every
	now := time.Now()
	if now.Before(p.next) {
		return
	}
	p.next = now.Add(progressEvery)
	args := append([]any{p.doneKey, done}, p.attrs...)
	p.log.Info(p.msg, append(args, "elapsed", now.Sub(p.start).Round(time.Second))...)
}

// buildRetry is how long a failed build waits before the next attempt.
const buildRetry = 10 * time.Second

// mayHold reports whether the key of fingerprint x may be stored: false
// only when the filter counts every stored key and not this one.
func (s *Store) mayHold(x uint64) bool {
	return s.filter == nil || s.filter.contains(x)
}

// counted notes that the key of fingerprint x is stored or held from the
// current round on (engine invariant 7).
func (s *Store) counted(x uint64) {
	if s.filter != nil {
		s.filter.insert(x)
	}
	if s.build != nil {
		s.flog = append(s.flog, filterOp{x: x})
	}
	s.journal = binary.LittleEndian.AppendUint64(s.journal, x)
	s.unsaved++
}

// uncounted notes that the key of fingerprint x, counted before, is no
// longer stored nor held.
func (s *Store) uncounted(x uint64) {
	if s.filter != nil {
		s.filter.remove(x)
	}
	if s.build != nil {
		s.flog = append(s.flog, filterOp{x: x, removed: true})
	}
}

// initFilter gives a store just opened its filter: the saved one brought up
// to date from the journal, or, when there is none it can trust, none yet
// and a build in the background. A new store starts with an empty filter.
func (s *Store) initFilter(created bool) error {
	id, err := s.filterID()
	if err != nil {
		return fmt.Errorf("pebble: open: %w", err)
	}
	s.filterIDv = id
	s.sweepFilterTemp()
	if created {
		s.filter = newFilter(s.opts.ExpectedRecords)
		s.savedAt = time.Now()
		return nil
	}
	t0 := time.Now()
	f, replayed, err := s.loadFilter(id)
	if err == nil && s.damageAccepted {
		// Lost tables can take the save ids and the journal floor back
		// with them: a file that matches them proves nothing now.
		f, err = nil, errors.New("the store was opened with its damage accepted, so no saved filter is trusted")
	}
	if err == nil {
		s.filter, s.unsaved, s.savedAt = f, replayed, time.Now()
		s.log.Info("pebble: existence filter loaded", "keys", f.len(), "journal_keys", replayed,
			"bytes", f.bytes(), "took", time.Since(t0).Round(time.Millisecond))
		return nil
	}
	path := s.fs.PathJoin(s.dir, filterFile)
	var outgrown *outgrownError
	if _, serr := s.fs.Stat(path); serr != nil {
		s.log.Info("pebble: no saved existence filter: rebuilding it in the background from the record keys; "+
			"until it is done every claim reads pebble", "file", path)
	} else if errors.As(err, &outgrown) {
		s.buildHint = outgrown.held + outgrown.journaled
		s.log.Warn("pebble: the saved existence filter is too small for the keys journaled since it was saved "+
			"(the store grew, then stopped without a save): rebuilding it in the background from the record keys, "+
			"sized for them; until it is done every claim reads pebble. Nothing to do: the file is replaced by the next save",
			"file", path, "reason", err, "expected_records", s.buildHint, "took", time.Since(t0).Round(time.Millisecond))
		s.stats.filterRefused.Add(1)
	} else {
		s.log.Warn("pebble: the saved existence filter cannot be trusted: rebuilding it in the background from the "+
			"record keys; until it is done every claim reads pebble. Nothing to do: the file is replaced by the next save",
			"file", path, "reason", err)
		s.stats.filterRefused.Add(1)
	}
	s.filter = nil
	s.startBuild()
	return nil
}

// sweepFilterTemp removes the temporary file of a save a crash interrupted.
func (s *Store) sweepFilterTemp() {
	tmp := s.fs.PathJoin(s.dir, filterFile) + ".tmp"
	if _, err := s.fs.Stat(tmp); err == nil {
		s.fs.Remove(tmp)
	}
}

// expectRecords is how many keys a new filter is made for.
func (s *Store) expectRecords() int {
	n := s.opts.ExpectedRecords
	if s.filter != nil {
		// A filter replaced for being full: made for the keys it holds,
		// at targetLoad, it has room for growLoad/targetLoad times more.
		n = max(n, s.filter.len())
	}
	if v, err := s.getUint64(keySizeHint); err == nil {
		n = max(n, int(min(v, 1<<40)))
	}
	return max(n, s.buildHint)
}

// startBuild starts a build from a snapshot of the database as it stands
// between rounds.
func (s *Store) startBuild() {
	b := &filterBuild{
		snap:   s.db.NewSnapshot(),
		expect: s.expectRecords(),
		start:  time.Now(),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	s.build = b
	s.flog = s.flog[:0]
	for h := range s.held {
		s.flog = append(s.flog, filterOp{x: fingerprint(&h)})
	}
	s.stats.filterBuilding.Store(true)
	go s.runBuild(b)
}

// runBuild is a build's goroutine.
func (s *Store) runBuild(b *filterBuild) {
	defer close(b.done)
	f, err := s.buildFilter(b)
	b.snap.Close()
	select {
	case s.filterEvents <- filterEvent{build: b, f: f, err: err}:
	case <-b.stop:
	}
}

// buildFilter reads every record key of b's snapshot into a new filter,
// logging its progress every few seconds.
func (s *Store) buildFilter(b *filterBuild) (*filter, error) {
	f := newFilter(b.expect)
	it, err := b.snap.NewIter(&pdb.IterOptions{
		LowerBound: []byte(prefixRecord),
		UpperBound: prefixEnd(prefixRecord),
	})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	p := s.progress("pebble: rebuilding the existence filter", "keys_read", 4096, "expected", b.expect)
	read := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != recordKeyLen {
			return nil, fmt.Errorf("%w: record key %x", ErrCorrupt, k)
		}
		var h spent.Hash
		copy(h[:], k[len(prefixRecord):])
		f.insert(fingerprint(&h))
		read++
		if filterBuildHook != nil {
			filterBuildHook(read)
		}
		if read%4096 == 0 {
			select {
			case <-b.stop:
				return nil, errSaveStopped
			default:
			}
			p.tick(int64(read))
		}
	}
	return f, it.Error()
}

// stopFilterWork ends the build and the save running, and waits for their
// goroutines: before the database closes.
func (s *Store) stopFilterWork() {
	if b := s.build; b != nil {
		close(b.stop)
		<-b.done
		s.build = nil
		s.flog = nil
		s.stats.filterBuilding.Store(false)
	}
	if sv := s.save; sv != nil {
		close(sv.stop)
		<-sv.done
		sv.img.f.cow = nil
		s.save = nil
	}
}

// tendFilter runs between rounds: it takes the builds' and saves' reports,
// and starts a build when the filter is missing or full and a save when one
// is due.
func (s *Store) tendFilter() {
	for {
		select {
		case ev := <-s.filterEvents:
			s.filterEvent(ev)
			continue
		default:
		}
		break
	}
	if s.failure() != nil || s.db == nil {
		return
	}
	if s.build == nil && (s.filter == nil || s.filter.full()) && time.Now().After(s.buildAfter) {
		s.startBuild()
	}
	if s.save == nil && s.filter != nil && s.saveDue() {
		s.startSave()
	}
}

// saveDue reports whether the filter should be saved: enough inserts since
// the last save that replaying their journal would take a while, or a
// while since the last save and some inserts.
func (s *Store) saveDue() bool {
	every := s.opts.filterSaveEvery
	if every == 0 {
		every = max(1<<20, s.filter.len()/8)
	}
	return s.unsaved >= every || (s.unsaved > 0 && time.Since(s.savedAt) > 10*time.Minute)
}

// filterEvent takes a build's or a save's report.
func (s *Store) filterEvent(ev filterEvent) {
	switch {
	case ev.build != nil && ev.build == s.build:
		s.build = nil
		s.stats.filterBuilding.Store(false)
		if ev.err != nil {
			s.log.Error("pebble: rebuilding the existence filter failed; claims read pebble until a retry succeeds",
				"err", ev.err, "retry_in", buildRetry)
			s.buildAfter = time.Now().Add(buildRetry)
			s.flog = nil
			return
		}
		for _, op := range s.flog {
			if op.removed {
				ev.f.remove(op.x)
			} else {
				ev.f.insert(op.x)
			}
		}
		s.flog = nil
		s.filter = ev.f
		s.buildHint = 0
		s.stats.filterBuilds.Add(1)
		s.log.Info("pebble: existence filter rebuilt", "keys", ev.f.len(), "bytes", ev.f.bytes(),
			"took", time.Since(ev.build.start).Round(time.Millisecond))
		s.publishFilter()
	case ev.save != nil && ev.save == s.save:
		s.save = nil
		ev.save.img.f.cow = nil
		if ev.err != nil {
			s.log.Error("pebble: saving the existence filter failed; the journal keeps what a restart needs",
				"file", s.fs.PathJoin(s.dir, filterFile), "err", ev.err)
			return
		}
		// Saves run one at a time, each renaming its file over the
		// last: the latest to end is the file on disk, and its round
		// is the highest.
		s.trimDue, s.trimTo, s.trimSave = true, ev.save.img.round, ev.save.img.save
		s.stats.filterSaves.Add(1)
	}
}

// startSave starts a save of the filter as it stands, after the last round
// sealed. It first records the save's id as the pending one, synced (one
// WAL sync on the decision goroutine, once per save): Open trusts a file
// only with an id the store recorded (filterfile.go). A failure to write
// it is a failed write of the WAL: the store fails closed (recover.go).
func (s *Store) startSave() {
	save := newSaveID()
	if err := s.beginSave(save); err != nil {
		s.fail(fmt.Errorf("recording the existence filter's save: %w", err))
		return
	}
	sv := &filterSave{
		img:  capture(s.filter, s.filterIDv, save, s.roundNum),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	s.save = sv
	s.unsaved = 0
	s.savedAt = time.Now()
	go func() {
		defer close(sv.done)
		err := sv.img.write(s.fs, s.dir, sv.stop, filterSaveHook)
		select {
		case s.filterEvents <- filterEvent{save: sv, err: err}:
		case <-sv.stop:
		}
	}()
}

// sealJournal stages, in a round that writes, its journal entry (empty if
// it inserted nothing: every round that writes has one, so that a gap shows
// rounds written by something that kept no journal) and, once a save is
// durable, the deletion of the journal it has made useless, with the new
// floor and the save's id, in the same batch (filterfile.go).
func (s *Store) sealJournal(rd *round) {
	if !s.opts.noJournal {
		rd.set(journalKey(rd.number), s.journal)
	}
	if s.trimDue {
		rd.delRange(journalKey(0), journalKey(s.trimTo+1))
		rd.set(keyJournalFloor, be64(s.trimTo))
		rd.set(keyFilterSave, s.trimSave[:])
		s.trimDue, s.trimTo = false, 0
	}
}

// saveOnClose saves the filter and deletes the journal it covers, at Close,
// when the filter is complete and the store healthy: the next Open loads it
// and reads no record key. Like a periodic save, it records its id as the
// pending one before it writes the file, and as the floor's in the batch
// that moves the floor (filterfile.go).
func (s *Store) saveOnClose() error {
	if s.filter == nil || s.failure() != nil {
		return nil
	}
	save := newSaveID()
	if err := s.beginSave(save); err != nil {
		return fmt.Errorf("pebble: close: saving the existence filter: %w", err)
	}
	img := capture(s.filter, s.filterIDv, save, s.roundNum)
	err := img.write(s.fs, s.dir, nil, nil)
	s.filter.cow = nil
	if err != nil {
		return fmt.Errorf("pebble: close: saving the existence filter: %w", err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(journalKey(0), journalKey(img.round+1), nil); err != nil {
		return err
	}
	if err := b.Set(keyJournalFloor, be64(img.round), nil); err != nil {
		return err
	}
	if err := b.Set(keyFilterSave, save[:], nil); err != nil {
		return err
	}
	return s.db.Apply(b, pdb.Sync)
}
