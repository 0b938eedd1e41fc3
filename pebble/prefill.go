package pebble

import (
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Zero-filled write-ahead log.
//
// Every round ends with an fdatasync of pebble's WAL. When the round's bytes
// extend the file (a new WAL, or a recycled one written past its old end),
// that fdatasync must also commit the file's new size and blocks to the file
// system's journal, and on ext4 it then takes longer than one that only
// overwrites blocks already written (1.3 to 2 times as long, measured with
// dd: see BENCHMARKS.md). Pebble recycles old WAL files for this reason,
// but a new store, and every WAL longer than the one it recycles, write
// past the end. (PostgreSQL zero-fills its WAL segments for the same
// reason: wal_init_zero.)
//
// walFS wraps the file system pebble uses so that each WAL file is
// zero-filled ahead of pebble's writes, in the background: the metadata is
// committed once per prefillChunk by the filler's own fdatasync, and the
// rounds' syncs only overwrite. Pebble's recovery reads a zeroed tail as the
// end of the log, as it does for preallocated and recycled files.

// walCategory is the write category pebble gives its WAL files.
const walCategory vfs.DiskWriteCategory = "pebble-wal"

const (
	// prefillChunk is how much of the file one fill zeroes, and syncs.
	prefillChunk = 4 << 20
	// prefillFirst is the first fill of an empty file, made before the
	// first write: small, so that the write waits little.
	prefillFirst = 256 << 10
	// prefillPiece is the size of one zeroing write: a WAL write waits for
	// at most one piece.
	prefillPiece = 64 << 10
)

var zeros [prefillPiece]byte

// walFS is a vfs.FS whose WAL files are zero-filled ahead of writes.
type walFS struct {
	vfs.FS
}

// Create implements vfs.FS.
func (fs walFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || category != walCategory {
		return f, err
	}
	return newPrefilled(f, 0), nil
}

// ReuseForWrite implements vfs.FS: a recycled WAL is written from its start,
// and filled beyond its old end.
func (fs walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || category != walCategory {
		return f, err
	}
	size := int64(0)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	return newPrefilled(f, size), nil
}

// prefilled is a WAL file written sequentially from offset 0 by pebble,
// and zero-filled ahead of the writes by a background filler. A write never
// overlaps a region being filled: it waits for that fill first.
type prefilled struct {
	vfs.File
	pos int64 // where the next Write goes; only the writer touches it

	mu      sync.Mutex
	cond    sync.Cond
	filled  int64 // [0, filled) holds data or zeros
	filling bool  // a filler goroutine runs, on [filled, filled+prefillChunk)
	failed  bool  // a fill failed: no more fills (writes simply extend the file)
}

func newPrefilled(f vfs.File, size int64) *prefilled {
	p := &prefilled{File: f, filled: size}
	p.cond.L = &p.mu
	return p
}

// Write implements vfs.File.
func (p *prefilled) Write(b []byte) (int, error) {
	end := p.pos + int64(len(b))
	p.mu.Lock()
	if !p.filling && !p.failed && end+prefillChunk/2 > p.filled {
		n := int64(prefillChunk)
		if p.filled == 0 {
			n = prefillFirst
		}
		p.filling = true
		go p.fill(p.filled, n)
	}
	// A fill in flight writes at and above p.filled: wait for it before
	// writing there.
	for p.filling && end > p.filled {
		p.cond.Wait()
	}
	p.mu.Unlock()
	n, err := p.File.Write(b)
	p.pos += int64(n)
	return n, err
}

// fill zeroes [from, from+n) and syncs it.
func (p *prefilled) fill(from, n int64) {
	var err error
	for off := from; off < from+n && err == nil; off += prefillPiece {
		_, err = p.File.WriteAt(zeros[:], off)
	}
	if err == nil {
		err = p.File.SyncData()
	}
	p.mu.Lock()
	if err != nil {
		// The region may be partly zeroed: that is harmless, as the
		// writer has not reached it. Stop filling.
		p.failed = true
	} else {
		p.filled = from + n
	}
	p.filling = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close implements vfs.File, once no fill runs.
func (p *prefilled) Close() error {
	p.mu.Lock()
	for p.filling {
		p.cond.Wait()
	}
	p.failed = true
	p.mu.Unlock()
	return p.File.Close()
}
