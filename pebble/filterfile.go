package pebble

import (
	"bufio"
	"bytes"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strings"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spentledger/spent"
)

// The persisted filter, and its journal.
//
// A save writes the filter to filterFile as it stood between two rounds,
// with the number R of the last round sealed before it: the file counts
// every key inserted by rounds up to R. Every round that inserts keys also
// writes their fingerprints under j/<round>, in its own batch, so that the
// records and their journal entry are durable together. Open loads the
// file, inserts the fingerprints of the journal entries of rounds after R,
// and has a filter that counts every stored key, without reading one record
// key: after a clean Close (which saves last) and after a crash (the last
// periodic save, then the journal since) alike. Removals are not journaled:
// a key removed since R stays counted, which costs a needless read, never a
// wrong answer.
//
// Once a file covering R is durable, the journal up to R is deleted and
// m/journal-floor records R, so that a file older than R is refused: the
// journal it would need is gone.
//
// That alone would trust any file whose round is at or above the floor,
// and a file is more than its round: a copy of the store's directory (cp
// -a, a snapshot) shares its history, its filter id and its round numbers
// up to the copy, then goes its own way. Its save, put in place of the
// store's own, covers a round the store has reached, passes every check
// of its contents, and lacks the keys the store acknowledged since the
// copy: they would be answered fresh (issue 31). So a file is loaded only
// if it is provably the store's own latest save. Every save draws a random
// 16-byte save id, carried in the file's header, and the store records it
// twice:
//
//   - m/filter-pending, written and synced before the file is written: the
//     id of the latest save begun. No journal is deleted for a save before
//     its file is durable, so the journal since that file's round is
//     intact.
//   - m/filter-save, written in the same batch that deletes the journal up
//     to the save's round and moves m/journal-floor there (the first round
//     that writes after the save ended, the next save's first batch, or
//     Close's): the id of the save the floor belongs to, whose journal is
//     intact by the same batch.
//
// Open loads a file only if its save id is one of these two: the save the
// floor was moved for, or the latest one begun, whose floor move a crash
// cut short (between the file's rename and the batch that moves the
// floor), which would otherwise cost a needless rebuild. Open then moves
// the floor for it with the next write, as if the save had just ended. The
// batch that records a save as pending also moves the floor for the save
// before it if that is still to do, so a save begun never takes the
// pending place of a file whose floor has not moved. Any other file is
// refused: one from another store or from a copy of this one (the ids are
// random, drawn by each copy for itself), or an earlier save of this store
// put back. A file is also refused when its checksum, its version, its
// store id (m/filter-id, random per store) or its round disagrees with the
// store, and when a sample of stored keys is not all in it. A refused file
// means a rebuild from the record keys, in the background (filterbuild.go):
// the store never trusts a filter it cannot show to count every stored key.
//
// The fence's canary (package node) is read back with Get, which consults
// the filter as a claim does. A clone's filter that lacks the store's
// newest canary makes the fence report a store that went backwards; one
// that holds it (a copy writes the same canary keys, and the journal
// brings in those written after the file's round) lets the start pass,
// and the keys the file lacks are answered fresh. Neither happens, since a
// filter loaded at Open is the store's own.

// filterFile is the persisted filter, in the store's directory.
const filterFile = "SPENT-FILTER"

// filterMagic starts the file; the version follows it.
const (
	filterMagic = "spentflt"
	// filterVersion 2 added the save id; a file of version 1 is refused.
	filterVersion = 2
	// filterHeaderLen: magic, version, store id, save id, round, n, m,
	// stash length.
	filterHeaderLen = 8 + 4 + 16 + 16 + 8*4
	// verifySample is how many stored keys a loaded filter must count.
	verifySample = 4096
)

var (
	keyFilterID     = []byte(prefixMeta + "filter-id")
	keyJournalFloor = []byte(prefixMeta + "journal-floor")
	// keyFilterSave holds the save id of the file the journal floor was
	// moved for, keyFilterPending that of the latest save begun.
	keyFilterSave    = []byte(prefixMeta + "filter-save")
	keyFilterPending = []byte(prefixMeta + "filter-pending")
	prefixJournal    = "j/"
	castagnoli       = crc32.MakeTable(crc32.Castagnoli)
)

// journalKey returns the key of round n's journal entry.
func journalKey(n uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefixJournal), n)
}

// filterImage is what a save writes: a filter's header, captured between
// rounds by the decision goroutine, and its buckets, read through snap.
type filterImage struct {
	id    [16]byte // the store's filter id
	save  [16]byte // this save's id
	round uint64
	n     int
	m     uint64
	stash []uint64 // stash keys, with repetition
	f     *filter
	snap  *filterSnapshot
}

// capture returns the image of f as it is now, for the save of id save,
// and starts copy-on-write on it: f's buckets may change from here on.
func capture(f *filter, id, save [16]byte, round uint64) *filterImage {
	img := &filterImage{id: id, save: save, round: round, n: f.n, m: f.m, f: f,
		snap: &filterSnapshot{kept: map[uint64][]uint64{}}}
	for _, x := range f.stash.slots {
		if x != 0 {
			img.stash = append(img.stash, x)
		}
	}
	f.cow = img.snap
	return img
}

// write writes the image to path through a temporary file, synced and
// renamed into place, the directory synced: a crash leaves the previous
// file or this one, whole. hook, if set, is called after each chunk
// (tests use it to stop a save half-way). stop ends the save early.
func (img *filterImage) write(fs vfs.FS, dir string, stop <-chan struct{}, hook func(chunk uint64)) error {
	path := fs.PathJoin(dir, filterFile)
	tmp := path + ".tmp"
	out, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = img.encode(out, stop, hook)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil {
		return syncDir(fs, dir)
	}
	fs.Remove(tmp)
	return err
}

// errSaveStopped is returned by a save that was told to stop.
var errSaveStopped = errors.New("pebble: filter save stopped")

// encode writes the image's bytes, then their CRC-32C.
func (img *filterImage) encode(out io.Writer, stop <-chan struct{}, hook func(chunk uint64)) error {
	w := bufio.NewWriterSize(out, 1<<20)
	crc := crc32.New(castagnoli)
	mw := io.MultiWriter(w, crc)
	hdr := make([]byte, 0, filterHeaderLen+8*len(img.stash))
	hdr = append(hdr, filterMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, filterVersion)
	hdr = append(hdr, img.id[:]...)
	hdr = append(hdr, img.save[:]...)
	for _, v := range []uint64{img.round, uint64(img.n), img.m, uint64(len(img.stash))} {
		hdr = binary.LittleEndian.AppendUint64(hdr, v)
	}
	for _, x := range img.stash {
		hdr = binary.LittleEndian.AppendUint64(hdr, x)
	}
	if _, err := mw.Write(hdr); err != nil {
		return err
	}
	var words []uint64
	var buf []byte
	for c := uint64(0); c*snapshotChunk < img.m; c++ {
		select {
		case <-stop:
			return errSaveStopped
		default:
		}
		words = img.snap.read(img.f.buckets, c, words[:0])
		buf = buf[:0]
		for _, x := range words {
			buf = binary.LittleEndian.AppendUint64(buf, x)
		}
		if _, err := mw.Write(buf); err != nil {
			return err
		}
		if hook != nil {
			hook(c)
		}
	}
	if _, err := w.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return err
	}
	return w.Flush()
}

// savedFilter is what a filter file holds.
type savedFilter struct {
	f     *filter
	save  [16]byte // the id of the save that wrote it
	round uint64   // the last round it counts
}

// readFilter reads the file at path, checks its version, its store id and
// its checksum, and returns what it holds. It calls onChunk, if set, after
// each chunk of buckets read, with the bytes read and the file's size.
func readFilter(fs vfs.FS, path string, id [16]byte, onChunk func(read, size int64)) (savedFilter, error) {
	var sf savedFilter
	in, err := fs.Open(path)
	if err != nil {
		return sf, err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return sf, err
	}
	size := st.Size()
	r := bufio.NewReaderSize(in, 1<<20)
	crc := crc32.New(castagnoli)
	tr := io.TeeReader(r, crc)
	hdr := make([]byte, filterHeaderLen)
	if _, err := io.ReadFull(tr, hdr[:12]); err != nil {
		return sf, fmt.Errorf("short header: %w", err)
	}
	if string(hdr[:8]) != filterMagic {
		return sf, errors.New("not a filter file")
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != filterVersion {
		return sf, fmt.Errorf("it is a filter file of version %d, and this spent reads version %d", v, filterVersion)
	}
	if _, err := io.ReadFull(tr, hdr[12:]); err != nil {
		return sf, fmt.Errorf("short header: %w", err)
	}
	if !bytes.Equal(hdr[12:28], id[:]) {
		return sf, errors.New("written for another store (its filter id differs)")
	}
	copy(sf.save[:], hdr[28:44])
	sf.round = binary.LittleEndian.Uint64(hdr[44:])
	n := binary.LittleEndian.Uint64(hdr[52:])
	m := binary.LittleEndian.Uint64(hdr[60:])
	ns := binary.LittleEndian.Uint64(hdr[68:])
	if m < 1 || m > 1<<40 || ns > 1<<40 || int64(filterHeaderLen+8*(ns+m)+4) != size {
		return sf, fmt.Errorf("its size, %d bytes, disagrees with its header", size)
	}
	f := newFilterBuckets(m)
	word := make([]byte, 8)
	for range ns {
		if _, err := io.ReadFull(tr, word); err != nil {
			return sf, err
		}
		f.stash.insert(binary.LittleEndian.Uint64(word))
	}
	buf := make([]byte, 8*snapshotChunk)
	for i := uint64(0); i < m; i += snapshotChunk {
		b := buf[:8*min(snapshotChunk, m-i)]
		if _, err := io.ReadFull(tr, b); err != nil {
			return sf, err
		}
		for j := range len(b) / 8 {
			f.buckets[i+uint64(j)] = binary.LittleEndian.Uint64(b[8*j:])
		}
		if onChunk != nil {
			onChunk(int64(filterHeaderLen+8*(ns+i+uint64(len(b)/8))), size)
		}
	}
	f.n = int(n)
	sum := crc.Sum32()
	if _, err := io.ReadFull(r, word[:4]); err != nil {
		return sf, err
	}
	if binary.LittleEndian.Uint32(word) != sum {
		return sf, errors.New("its checksum does not match: the file is damaged")
	}
	sf.f = f
	return sf, nil
}

// filterID returns the store's filter id, creating it in a store that has
// none (a new store, or one from before filters were saved).
func (s *Store) filterID() ([16]byte, error) {
	var id [16]byte
	v, closer, err := s.db.Get(keyFilterID)
	if err == nil {
		ok := len(v) == len(id)
		copy(id[:], v)
		closer.Close()
		if !ok {
			return id, fmt.Errorf("%w: %s holds %d bytes", ErrCorrupt, keyFilterID, len(v))
		}
		return id, nil
	}
	if !errors.Is(err, pdb.ErrNotFound) {
		return id, err
	}
	crand.Read(id[:])
	return id, s.db.Set(keyFilterID, id[:], pdb.Sync)
}

// newSaveID returns a fresh random save id.
func newSaveID() [16]byte {
	var id [16]byte
	crand.Read(id[:])
	return id
}

// saveID returns the save id held under key (keyFilterSave or
// keyFilterPending); found is false when there is none.
func (s *Store) saveID(key []byte) (id [16]byte, found bool, err error) {
	v, found, err := s.get(key)
	switch {
	case err != nil || !found:
		return id, false, err
	case len(v) != len(id):
		return id, false, fmt.Errorf("%w: %s holds %d bytes", ErrCorrupt, key, len(v))
	}
	copy(id[:], v)
	return id, true, nil
}

// beginSave records, in one synced batch, that the save of id save
// begins (m/filter-pending), and moves the journal floor for the save
// before it if that move is due and not yet made: a save begun never
// replaces, as the pending one, a save whose floor has not moved, so that
// a crash while it is written leaves a file Open loads. It runs on the
// decision goroutine, or at Close.
func (s *Store) beginSave(save [16]byte) error {
	return unpanic(func() error {
		b := s.db.NewBatch()
		defer b.Close()
		if s.trimDue {
			if err := b.DeleteRange(journalKey(0), journalKey(s.trimTo+1), nil); err != nil {
				return err
			}
			if err := b.Set(keyJournalFloor, be64(s.trimTo), nil); err != nil {
				return err
			}
			if err := b.Set(keyFilterSave, s.trimSave[:], nil); err != nil {
				return err
			}
		}
		if err := b.Set(keyFilterPending, save[:], nil); err != nil {
			return err
		}
		if err := s.db.Apply(b, pdb.Sync); err != nil {
			return err
		}
		s.trimDue, s.trimTo = false, 0
		return nil
	})
}

// ownSave checks that save is the id of the store's own latest save: the
// one its journal floor was moved for, or the latest one begun (pending),
// whose floor move a crash cut short.
func (s *Store) ownSave(save [16]byte) (pending bool, err error) {
	recorded, hasRecorded, err := s.saveID(keyFilterSave)
	if err != nil {
		return false, err
	}
	latest, hasLatest, err := s.saveID(keyFilterPending)
	if err != nil {
		return false, err
	}
	switch {
	case hasRecorded && save == recorded:
		return false, nil
	case hasLatest && save == latest:
		return true, nil
	}
	var own []string
	if hasRecorded {
		own = append(own, fmt.Sprintf("%x (the save its journal floor was moved for)", recorded))
	}
	if hasLatest && (!hasRecorded || latest != recorded) {
		own = append(own, fmt.Sprintf("%x (the latest save begun)", latest))
	}
	if len(own) == 0 {
		own = append(own, "none (this store has recorded no save)")
	}
	return false, fmt.Errorf("it is not this store's own latest save: its save id is %x, this store's is %s. "+
		"It was copied from another store or from a copy of this store's directory, or it is an earlier save put back",
		save, strings.Join(own, " or "))
}

// loadFilter loads the saved filter and brings it up to date from the
// journal, or explains why it cannot be trusted or cannot hold the journal.
// It returns the number of journal fingerprints it inserted.
//
// It refuses a file the journal would fill past placeLoad (an
// *outgrownError), without inserting more than the file holds: a filter
// saved while the store was small, followed by more claims than it holds
// and a crash before the next save. (A fresh store stopped cleanly, then
// 1,000,000 claims and kill -9: Open spent 12 min 53 s inserting the
// journal into the file's 64 buckets, most of them into the stash.) The
// running store would have replaced such a filter with a larger one,
// built from the record keys; so does Open, in the background, sized for
// the file's keys and the journal's.
func (s *Store) loadFilter(id [16]byte) (*filter, int, error) {
	read := s.progress("pebble: loading the existence filter: reading its file", "bytes_read", 0)
	sf, err := readFilter(s.fs, s.fs.PathJoin(s.dir, filterFile), id, func(done, size int64) {
		if read.attrs == nil {
			read.attrs = []any{"file_bytes", size}
		}
		read.tick(done)
	})
	if err != nil {
		return nil, 0, err
	}
	pending, err := s.ownSave(sf.save)
	if err != nil {
		return nil, 0, err
	}
	floor, err := s.getUint64(keyJournalFloor)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case sf.round < floor:
		return nil, 0, fmt.Errorf("it covers round %d, but the journal since then was deleted up to round %d: it is older than the last save", sf.round, floor)
	case sf.round > s.roundNum:
		return nil, 0, fmt.Errorf("it covers round %d, but the store's last round is %d: the store is older than the file", sf.round, s.roundNum)
	}
	journaled, err := s.replayJournal(sf.f, sf.round)
	if err != nil {
		return nil, 0, err
	}
	if err := s.verifyFilter(sf.f); err != nil {
		return nil, 0, err
	}
	if pending {
		// The latest save begun, whose floor move a crash cut short:
		// its directory entry is made durable, and the floor moves for
		// it with the next write, as if the save had just ended.
		if err := syncDir(s.fs, s.dir); err != nil {
			return nil, 0, err
		}
		s.trimDue, s.trimTo, s.trimSave = true, sf.round, sf.save
	}
	return sf.f, journaled, nil
}

// outgrownError is why Open refuses a saved filter that the journal since
// it was saved would fill past placeLoad.
type outgrownError struct {
	held, journaled int    // fingerprints in the file, and in the journal since
	slots           uint64 // the file's filter's lanes
	placeMax        int    // the most it holds within placeLoad
}

func (e *outgrownError) Error() string {
	return fmt.Sprintf("the journal since it was saved outgrew it: %d fingerprints journaled after the %d it holds, "+
		"for a filter of %d slots that holds up to %d", e.journaled, e.held, e.slots, e.placeMax)
}

// replayJournal inserts into f the fingerprints journaled by rounds after
// round, in one pass over the journal, checking that it has an entry for
// every round up to the store's last. It returns the number of
// fingerprints journaled, and an *outgrownError when they would fill f
// past placeLoad: it then stops inserting at once (f is dropped) and only
// counts the rest, so that the rebuild is sized for them.
func (s *Store) replayJournal(f *filter, round uint64) (int, error) {
	it, err := s.db.NewIter(&pdb.IterOptions{
		LowerBound: journalKey(round + 1),
		UpperBound: prefixEnd(prefixJournal),
	})
	if err != nil {
		return 0, err
	}
	p := s.progress("pebble: loading the existence filter: replaying its journal", "journal_keys", 4096)
	held, room := f.len(), f.placeMax-f.len()
	n := 0
	want := round + 1
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(prefixJournal)+8 || binary.BigEndian.Uint64(k[len(prefixJournal):]) != want {
			it.Close()
			return 0, fmt.Errorf("the journal has no entry for round %d (next: %x): rounds were written by a spent that kept no journal", want, k)
		}
		want++
		v := it.Value()
		if len(v)%8 != 0 {
			it.Close()
			return 0, fmt.Errorf("%w: journal entry %x holds %d bytes", ErrCorrupt, it.Key(), len(v))
		}
		if n+len(v)/8 <= room {
			for i := 0; i < len(v); i += 8 {
				f.insert(binary.LittleEndian.Uint64(v[i:]))
			}
		}
		n += len(v) / 8
		p.tick(int64(n))
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	if want <= s.roundNum {
		return 0, fmt.Errorf("the journal ends at round %d, the store at round %d: rounds were written by a spent that kept no journal", want-1, s.roundNum)
	}
	if n > room {
		return n, &outgrownError{held: held, journaled: n, slots: lanes * f.m, placeMax: f.placeMax}
	}
	return n, nil
}

// verifyFilter checks that f counts a sample of the stored keys: up to
// verifySample record keys, read in runs from random places. A store with
// fewer records has all of them checked.
func (s *Store) verifyFilter(f *filter) error {
	it, err := s.db.NewIter(&pdb.IterOptions{
		LowerBound: []byte(prefixRecord),
		UpperBound: prefixEnd(prefixRecord),
	})
	if err != nil {
		return err
	}
	defer it.Close()
	const runs, run = 64, verifySample / 64
	for range runs {
		var h spent.Hash
		for i := range h {
			h[i] = byte(rand.Uint32())
		}
		ok := it.SeekGE(recordKey(&h))
		if !ok {
			ok = it.First()
		}
		for i := 0; ok && i < run; i, ok = i+1, it.Next() {
			k := it.Key()
			if len(k) != recordKeyLen {
				return fmt.Errorf("%w: record key %x", ErrCorrupt, k)
			}
			copy(h[:], k[len(prefixRecord):])
			if !f.contains(fingerprint(&h)) {
				return fmt.Errorf("it does not count the stored key %s", h)
			}
		}
	}
	return it.Error()
}
