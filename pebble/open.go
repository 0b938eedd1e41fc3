package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/spentledger/spent"
)

// Open opens the store kept in dir, creating dir if needed, and loads the
// existence filter it saved last, with the journal since, when it can show
// that the file is its own latest save and counts every stored key;
// otherwise it rebuilds the filter from the record keys in the background
// (a cost proportional to the number of records held; see the package
// documentation). Close the store when done: the directory is locked
// against a second Open until then.
//
// Before it serves anything, Open checks the store against its witness (see
// witness.go): a store that holds less than it acknowledged is refused with
// ErrDamaged. A directory that another process holds is refused with
// ErrLocked.
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	fsys := opts.fs
	if fsys == nil {
		fsys = vfs.Default
	}
	if err := fsys.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pebble: open: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Store{
		opts:     opts,
		dir:      dir,
		fs:       fsys,
		log:      log,
		reqs:     make(chan *request, 2*opts.MaxBatchRound),
		overlay:  make(map[spent.Hash]*spent.Record),
		held:     make(map[spent.Hash]*spent.Record),
		counters: make(map[spent.Hash]*spent.CountAnswer),
		seqs:     make(map[uint32]uint64),
		rounds:   make(chan *round, syncSlots),
		free:     make(chan struct{}, syncSlots),
		done:     make(chan struct{}),
		closing:  make(chan struct{}),

		filterEvents: make(chan filterEvent, 2),
	}
	for range syncSlots {
		s.free <- struct{}{}
	}
	if err := s.openDB(); err != nil {
		if s.witness != nil {
			s.witness.close()
		}
		return nil, err
	}
	go s.decide()
	go s.wait()
	return s, nil
}

// openDB checks the store in s.dir against its witness, opens pebble, and
// rebuilds what the store derives from the database: the filter, the sweep
// position and the round number. On error nothing is left open but the
// witness.
func (s *Store) openDB() error {
	wpath := s.fs.PathJoin(s.dir, witnessFile)
	prior, err := readWitness(s.fs, wpath)
	if err != nil {
		if !s.opts.AcceptDamage {
			return err
		}
		s.log.Error("pebble: opening a store whose witness is damaged, as asked (AcceptDamage)", "err", err)
		s.damageAccepted = true
		prior = nil
	}
	desc, err := pdb.Peek(s.dir, s.fs)
	if err != nil {
		return fmt.Errorf("pebble: open: %w", err)
	}
	var damage error
	switch {
	case prior == nil:
	case desc.Exists && prior.manifest.num != 0:
		damage = checkManifest(s.fs, desc.ManifestFilename, prior)
	case !desc.Exists && (prior.manifest.num != 0 || prior.rounds != 0):
		damage = fmt.Errorf("%w: %s holds a witness of round %d but no store: the store's files were deleted or moved. %s",
			ErrDamaged, s.dir, prior.rounds, damagedWayOut)
	}
	if err := s.acceptDamage(damage); err != nil {
		return err
	}
	wal := newestWAL(s.fs, s.dir)

	base := witnessState{}
	if prior != nil {
		base = *prior
	}
	if s.witness != nil {
		s.witness.close()
	}
	if s.witness, err = openWitness(s.fs, wpath, base); err != nil {
		return err
	}
	if prior == nil {
		// The witness is new: its directory entry must survive a crash.
		if err := syncDir(s.fs, s.dir); err != nil {
			return fmt.Errorf("pebble: open: %w", err)
		}
	}
	po := &pdb.Options{
		CacheSize:          s.opts.CacheSize,
		MemTableSize:       s.opts.MemTableSize,
		FormatMajorVersion: formatMajorVersion,
		Logger:             logger{s.log},
		FS:                 witnessFS{walFS{s.fs}, s.witness}, // see prefill.go and witness.go
	}
	if s.opts.plainWAL {
		po.FS = witnessFS{s.fs, s.witness}
	}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pdb.Open(s.dir, po)
	if err != nil {
		return s.openError(err, desc, wal)
	}
	s.db = db
	if err := s.checkRounds(prior, desc.Exists, wal); err != nil {
		s.db = nil
		db.Close()
		return err
	}
	if err := s.init(); err != nil {
		s.db = nil
		db.Close()
		return err
	}
	return nil
}

// acceptDamage returns damage unless the options accept it, in which case
// it logs what was found.
func (s *Store) acceptDamage(damage error) error {
	if damage == nil {
		return nil
	}
	if !s.opts.AcceptDamage {
		return damage
	}
	s.log.Error("pebble: opening a damaged store, as asked (AcceptDamage): acknowledged records may be lost", "damage", damage)
	s.damageAccepted = true
	return nil
}

// checkRounds compares the newest round the database holds with the one the
// witness prior saw synced, and marks the store as witnessed.
func (s *Store) checkRounds(prior *witnessState, existed bool, wal string) error {
	stored, err := s.getUint64(keyRounds)
	if err != nil {
		return err
	}
	_, marked, err := s.get(keyWitness)
	if err != nil {
		return err
	}
	var damage error
	switch {
	case prior == nil && existed && marked:
		damage = fmt.Errorf("%w: the witness %s is missing beside a store that kept one: it was deleted, or the store was copied without it, "+
			"and the store cannot be checked for lost writes. %s", ErrDamaged, s.fs.PathJoin(s.dir, witnessFile), damagedWayOut)
	case prior != nil && stored < prior.rounds:
		damage = fmt.Errorf("%w: the store's newest write is round %d, and its witness saw round %d synced and acknowledged: "+
			"the newest WAL (%s) was damaged, and pebble dropped every record after the damage, as it drops the torn tail of a crash. %s",
			ErrDamaged, stored, prior.rounds, wal, damagedWayOut)
	}
	if err := s.acceptDamage(damage); err != nil {
		return err
	}
	s.roundNum = stored
	if s.opts.AcceptDamage {
		if err := s.witness.resetRounds(stored); err != nil {
			return err
		}
	}
	if !marked {
		if err := s.db.Set(keyWitness, []byte{1}, pdb.Sync); err != nil {
			return fmt.Errorf("pebble: open: %w", err)
		}
	}
	return nil
}

// get reads key from the database; found is false when it is absent.
func (s *Store) get(key []byte) (v []byte, found bool, err error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pdb.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("pebble: open: %w", err)
	}
	v = append([]byte(nil), v...)
	closer.Close()
	return v, true, nil
}

// getUint64 reads a big-endian uint64 under key; absent is zero.
func (s *Store) getUint64(key []byte) (uint64, error) {
	v, found, err := s.get(key)
	switch {
	case err != nil:
		return 0, err
	case !found:
		return 0, nil
	case len(v) != 8:
		return 0, fmt.Errorf("%w: %s holds %d bytes", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// init checks the format marker (writing it into a new store) and gives
// the store its filter (filterbuild.go). A reopen keeps the filter it has:
// it counts every key the store may hold, and more.
func (s *Store) init() error {
	created := false
	v, closer, err := s.db.Get(keyFormat)
	switch {
	case errors.Is(err, pdb.ErrNotFound):
		if err := s.db.Set(keyFormat, []byte{formatVersion}, pdb.Sync); err != nil {
			return fmt.Errorf("pebble: open: %w", err)
		}
		created = true
	case err != nil:
		return fmt.Errorf("pebble: open: %w", err)
	default:
		ok := len(v) == 1 && v[0] == formatVersion
		closer.Close()
		if !ok {
			return fmt.Errorf("%w: format version %x, want %d", ErrCorrupt, v, formatVersion)
		}
	}
	if err := s.initSeqIndex(created); err != nil {
		return err
	}
	s.sweepFrom = append(s.sweepFrom[:0], prefixExpiry...)
	if s.filter == nil {
		if err := s.initFilter(created); err != nil {
			return err
		}
	}
	s.publishFilter()
	return nil
}

// ErrLocked is returned by Open when another Store, in this process or
// another, holds the directory.
var ErrLocked = errors.New("pebble: directory in use")

// openError explains an error of pebble's Open: a directory locked by
// another process, or damage pebble found itself.
func (s *Store) openError(err error, desc *pdb.DBDesc, wal string) error {
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) || strings.Contains(err.Error(), "lock held by current process") {
		who := "another process"
		if strings.Contains(err.Error(), "lock held by current process") {
			who = "another store in this process"
		} else if pid := lockHolder(s.fs, s.fs.PathJoin(s.dir, "LOCK")); pid > 0 {
			who = "process " + strconv.Itoa(pid)
		}
		return fmt.Errorf("%w: %s is in use by %s (it holds %s): stop that one first, or open another directory",
			ErrLocked, s.dir, who, s.fs.PathJoin(s.dir, "LOCK"))
	}
	if pdb.IsCorruptionError(err) {
		return fmt.Errorf("%w: pebble found damage while opening %s (the current MANIFEST is %s, the newest WAL %s): %w. %s",
			ErrDamaged, s.dir, desc.ManifestFilename, wal, err, damagedWayOut)
	}
	return fmt.Errorf("pebble: open: %w", err)
}

// lockHolder returns the pid of the process holding pebble's lock on path
// (an fcntl lock), 0 when it holds none, -1 when that cannot be told.
func lockHolder(fsys vfs.FS, path string) int {
	if fsys != vfs.Default {
		return -1
	}
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return -1
	}
	if lk.Type == unix.F_UNLCK {
		return 0
	}
	return int(lk.Pid)
}

// newestWAL returns the path of the newest WAL file in dir, or "no WAL".
func newestWAL(fsys vfs.FS, dir string) string {
	ls, err := fsys.List(dir)
	if err != nil {
		return "no WAL"
	}
	best, name := -1, ""
	for _, f := range ls {
		if n, ok := strings.CutSuffix(f, ".log"); ok {
			if v, err := strconv.Atoi(n); err == nil && v > best {
				best, name = v, f
			}
		}
	}
	if name == "" {
		return "no WAL"
	}
	return fsys.PathJoin(dir, name)
}

// syncDir syncs the directory dir.
func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
