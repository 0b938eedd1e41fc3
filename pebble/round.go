package pebble

import (
	"bytes"
	"slices"
	"sync"

	pdb "github.com/cockroachdb/pebble/v2"
)

// round is the unit of group commit: one batch, one WAL sync. Its writes are
// staged in the order they are decided and copied into a pebble batch when
// the round is sealed. The decision goroutine owns it until it is sealed,
// the waiter after that (engine invariant 1); rounds are recycled once
// answered.
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
// it (see Store.last and engine invariant 2).
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

// stage copies key and value into the round: the caller may reuse them.
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
			// Engine invariant 6: a later write of the same key in
			// this round shadows this one (a record completed in the
			// round it was claimed in, say): only the last is applied.
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
