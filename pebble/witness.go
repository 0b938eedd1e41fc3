package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The witness: what the store made durable, kept beside pebble's files.
//
// Pebble opens a damaged store without a word in two cases (its source,
// v2.1.7): it reads its MANIFEST record by record and stops at the first
// invalid one, opening the version accumulated so far and deleting the
// tables that later records added as obsolete; and it reads the newest WAL
// up to the first invalid chunk with no valid chunk after it, taking the
// damage for the torn tail of a crash. Both drop writes that were synced,
// and so claims that were acknowledged.
//
// Neither case can be told from a torn write by pebble alone. The witness
// tells them apart: it records, after each sync and before anything relies
// on it, how far the MANIFEST was synced and which round of writes was the
// last one made durable. On Open, a MANIFEST that cannot be read as far as
// the witness says, or a store whose newest round is older than the
// witness's, lost something it had acknowledged, and is refused with
// ErrDamaged. Writes the witness does not cover were never acknowledged: a
// torn tail after a crash is still opened, as pebble opens it.
//
// The witness is written after the sync it describes, so it never claims
// more than is durable and never refuses a good store; if a crash or a
// power cut leaves it behind the truth, the check is only weaker. The
// MANIFEST's position is synced before pebble acts on the edit (deleting
// the files it made obsolete); the round number is written without a sync,
// once per round (and synced once a second): a process that dies keeps it
// (it is in the page cache), and only a power cut can take back its last
// second.
//
// The file holds two 64-byte slots, written in turn, each with a generation
// and a checksum, so that a torn write of one leaves the other.

// witnessFile is the witness's name in the store's directory.
const witnessFile = "SPENT-WITNESS"

const (
	witnessSlot  = 64
	witnessMagic = "spentwit"
)

// ErrDamaged is returned by Open when the store holds less than it
// acknowledged: its MANIFEST or its newest WAL cannot be read as far as the
// witness (a file beside them, see witness.go) says was synced, or the
// witness itself is damaged or missing. Serving such a store would answer
// fresh for keys it had stored. The message names the file and the way out;
// Options.AcceptDamage opens it anyway.
var ErrDamaged = errors.New("pebble: store damaged")

// manifestMark is how far one MANIFEST file was synced.
type manifestMark struct {
	num  uint64 // MANIFEST-num
	size int64  // bytes synced
}

// witnessState is what the witness records.
type witnessState struct {
	// rounds is the number of the newest round whose sync returned.
	rounds uint64
	// manifest is the newest MANIFEST synced, prev the one before it (the
	// current one until pebble moves its marker to the newer).
	manifest, prev manifestMark
}

func (st *witnessState) encode(b []byte, gen uint64) {
	copy(b, witnessMagic)
	binary.BigEndian.PutUint64(b[8:], gen)
	binary.BigEndian.PutUint64(b[16:], st.rounds)
	binary.BigEndian.PutUint64(b[24:], st.manifest.num)
	binary.BigEndian.PutUint64(b[32:], uint64(st.manifest.size))
	binary.BigEndian.PutUint64(b[40:], st.prev.num)
	binary.BigEndian.PutUint64(b[48:], uint64(st.prev.size))
	binary.BigEndian.PutUint32(b[56:], crc32.Checksum(b[:56], crcTable))
	clear(b[60:witnessSlot])
}

// decodeWitness decodes one slot; ok is false when it holds no valid state.
func decodeWitness(b []byte) (st witnessState, gen uint64, ok bool) {
	if string(b[:8]) != witnessMagic || binary.BigEndian.Uint32(b[56:]) != crc32.Checksum(b[:56], crcTable) {
		return st, 0, false
	}
	st.rounds = binary.BigEndian.Uint64(b[16:])
	st.manifest = manifestMark{binary.BigEndian.Uint64(b[24:]), int64(binary.BigEndian.Uint64(b[32:]))}
	st.prev = manifestMark{binary.BigEndian.Uint64(b[40:]), int64(binary.BigEndian.Uint64(b[48:]))}
	return st, binary.BigEndian.Uint64(b[8:]), true
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// witness is the open witness file. Its methods are safe for concurrent use:
// the waiter records rounds, pebble's MANIFEST writer records manifests.
type witness struct {
	path string

	mu     sync.Mutex
	f      vfs.File
	gen    uint64
	st     witnessState
	err    error     // the first failed write: later writes fail too
	synced time.Time // the last sync of a round number
	slots  [2 * witnessSlot]byte
}

// readWitness reads the witness at path. It returns (nil, nil) when there is
// none, and an ErrDamaged error when neither slot is valid.
func readWitness(fsys vfs.FS, path string) (*witnessState, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pebble: reading the witness: %w", err)
	}
	defer f.Close()
	var b [2 * witnessSlot]byte
	n, err := io.ReadFull(f, b[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("pebble: reading the witness: %w", err)
	}
	var best *witnessState
	var bestGen uint64
	for i := 0; i+witnessSlot <= n; i += witnessSlot {
		if st, gen, ok := decodeWitness(b[i : i+witnessSlot]); ok && (best == nil || gen > bestGen) {
			best, bestGen = &st, gen
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w: the witness %s is damaged (%d bytes, no valid slot), so the store cannot be checked for lost writes. %s",
			ErrDamaged, path, n, damagedWayOut)
	}
	return best, nil
}

// damagedWayOut is the advice every ErrDamaged message ends with.
const damagedWayOut = "Do not delete or restore anything: copy the directory aside as it is, and read \"A damaged store\" in docs/operations.md"

// openWitness opens (creating) the witness at path, holding st, and writes
// st to both slots, synced.
func openWitness(fsys vfs.FS, path string, st witnessState) (*witness, error) {
	f, err := fsys.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("pebble: opening the witness: %w", err)
	}
	w := &witness{path: path, f: f, st: st}
	// Both slots, so that a stale slot from an earlier life of the file
	// cannot win on generation.
	w.st.encode(w.slots[:witnessSlot], 1)
	w.st.encode(w.slots[witnessSlot:], 2)
	w.gen = 2
	if _, err := f.WriteAt(w.slots[:], 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("pebble: writing the witness: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("pebble: writing the witness: %w", err)
	}
	return w, nil
}

// write writes w.st to the next slot, and syncs it when sync is set. The
// caller holds w.mu.
func (w *witness) write(sync bool) error {
	if w.err != nil {
		return w.err
	}
	w.gen++
	slot := w.slots[(w.gen%2)*witnessSlot:][:witnessSlot]
	w.st.encode(slot, w.gen)
	_, err := w.f.WriteAt(slot, int64(w.gen%2)*witnessSlot)
	if err == nil && sync {
		err = w.f.SyncData()
	}
	if err != nil {
		w.err = fmt.Errorf("pebble: writing the witness %s: %w", w.path, err)
	}
	return w.err
}

// witnessSyncEvery is how often the round number is synced: a power cut
// takes back at most this much of the witness.
const witnessSyncEvery = time.Second

// setRounds records that round n is durable. It syncs only when the last
// sync is older than witnessSyncEvery: a round number lost in a power cut
// only weakens the check (see the top of this file).
func (w *witness) setRounds(n uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n <= w.st.rounds {
		return w.err
	}
	w.st.rounds = n
	now := time.Now()
	sync := now.Sub(w.synced) >= witnessSyncEvery
	if sync {
		w.synced = now
	}
	return w.write(sync)
}

// setManifest records that MANIFEST-num was synced up to size, and syncs
// the witness before returning, so that pebble acts on the edit only once
// the witness covers it.
func (w *witness) setManifest(num uint64, size int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if num != w.st.manifest.num {
		w.st.prev = w.st.manifest
	}
	w.st.manifest = manifestMark{num, size}
	return w.write(true)
}

// close syncs and closes the witness file.
func (w *witness) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if w.err == nil {
		w.err = errors.New("pebble: witness closed")
	}
	return err
}

// witnessFS is a vfs.FS that records in its witness how far each MANIFEST
// file was synced, before the sync returns to pebble.
type witnessFS struct {
	vfs.FS
	w *witness
}

// Create implements vfs.FS.
func (fs witnessFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil {
		return f, err
	}
	if num, ok := manifestNumber(fs.PathBase(name)); ok {
		return &manifestFile{File: f, w: fs.w, num: num}, nil
	}
	return f, nil
}

// manifestNumber parses the number of a MANIFEST file name.
func manifestNumber(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, "MANIFEST-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// manifestFile is a MANIFEST being written: pebble appends to it and syncs.
type manifestFile struct {
	vfs.File
	w       *witness
	num     uint64
	written int64
}

// Write implements vfs.File.
func (f *manifestFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.written += int64(n)
	return n, err
}

// Sync implements vfs.File: the witness records the synced size before
// pebble goes on. If it cannot, the sync fails, and pebble stops (a failed
// MANIFEST sync is fatal to it).
func (f *manifestFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	return f.w.setManifest(f.num, f.written)
}

// SyncData implements vfs.File, as Sync.
func (f *manifestFile) SyncData() error {
	if err := f.File.SyncData(); err != nil {
		return err
	}
	return f.w.setManifest(f.num, f.written)
}

// checkManifest checks that the current MANIFEST, at path, reads cleanly at
// least as far as the witness st says it was synced.
func checkManifest(fsys vfs.FS, path string, st *witnessState) error {
	cur, ok := manifestNumber(fsys.PathBase(path))
	if !ok {
		return fmt.Errorf("%w: the current MANIFEST is %s, not a MANIFEST file. %s", ErrDamaged, path, damagedWayOut)
	}
	var mark manifestMark
	switch cur {
	case st.manifest.num:
		mark = st.manifest
	case st.prev.num:
		mark = st.prev
	default:
		return fmt.Errorf("%w: the current MANIFEST is %s, and the store last synced MANIFEST-%06d (the witness %s): its marker file was damaged or replaced. %s",
			ErrDamaged, path, st.manifest.num, witnessFile, damagedWayOut)
	}
	f, err := fsys.Open(path)
	if err != nil {
		return fmt.Errorf("%w: the current MANIFEST %s cannot be opened (%w). %s", ErrDamaged, path, err, damagedWayOut)
	}
	defer f.Close()
	rr := record.NewReader(f, 0)
	good := int64(0) // the end of the last record read whole
	var cause error
	for {
		r, err := rr.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			cause = err
			break
		}
		good = rr.Offset()
	}
	if good >= mark.size {
		return nil
	}
	why := "it ends there"
	if cause != nil {
		why = cause.Error()
	}
	return fmt.Errorf("%w: %s reads only to byte %d of the %d bytes the store synced (%s): pebble would open the version its first records describe "+
		"and delete the tables its later records name, so keys the store acknowledged would be answered fresh. %s",
		ErrDamaged, path, good, mark.size, why, damagedWayOut)
}

// resetRounds records n as the newest durable round, even if it is older
// than what the witness held (an operator accepted the loss).
func (w *witness) resetRounds(n uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.rounds = n
	return w.write(true)
}
