package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/reccodec"
)

// The index by seq: one key per stored record,
//
//	s/ seq.node seq.ctr → hash
//
// written in the same batch as the record (put), deleted in the same batch
// as the record's removal or replacement (unindex, remove). ListSeq walks it
// from a snapshot, like ListPending, so that a query costs the entries it
// steps over: 14 bytes of key and 16 of value per record, before pebble's
// compression and per-key overhead (see docs/stores.md).

const (
	prefixSeq   = "s/"
	seqKeyLen   = len(prefixSeq) + 4 + 8
	seqIndexVer = 1
)

// keySeqIndex marks a store whose index by seq is complete: every store
// created by this version, and every older store once Open has built it.
var keySeqIndex = []byte(prefixMeta + "seq-index")

// noSeqIndex turns the index off, so that the benchmarks can measure what
// it costs a claim. Test-only (export_test.go sets it); users always get the
// index.
var noSeqIndex atomic.Bool

// appendSeqIndexKey appends the index key of seq to dst.
func appendSeqIndexKey(dst []byte, seq spent.Seq) []byte {
	dst = append(dst, prefixSeq...)
	dst = binary.BigEndian.AppendUint32(dst, seq.Node)
	return binary.BigEndian.AppendUint64(dst, seq.Counter)
}

// seqBounds returns the iterator bounds of the index entries of q's node
// with counters in [q.From, q.To].
func seqBounds(q *spent.SeqQuery) (lower, upper []byte) {
	lower = appendSeqIndexKey(nil, spent.Seq{Node: q.Node, Counter: q.From})
	if q.To == math.MaxUint64 {
		upper = append([]byte(prefixSeq), binary.BigEndian.AppendUint32(nil, q.Node)...)
		if q.Node == math.MaxUint32 {
			return lower, prefixEnd(prefixSeq)
		}
		binary.BigEndian.PutUint32(upper[len(prefixSeq):], q.Node+1)
		return lower, upper
	}
	return lower, appendSeqIndexKey(nil, spent.Seq{Node: q.Node, Counter: q.To + 1})
}

// indexSeq stages the index entry of rec.
func (s *Store) indexSeq(rd *round, rec *spent.Record) {
	if noSeqIndex.Load() {
		return
	}
	s.kbuf = appendSeqIndexKey(s.kbuf[:0], rec.Seq)
	rd.set(s.kbuf, rec.Hash[:])
}

// unindexSeq stages the deletion of the index entry of cur.
func (s *Store) unindexSeq(rd *round, cur *spent.Record) {
	if noSeqIndex.Load() {
		return
	}
	s.kbuf = appendSeqIndexKey(s.kbuf[:0], cur.Seq)
	rd.del(s.kbuf)
}

// ListSeq implements [spent.SeqLister]. It walks the index by seq from one
// snapshot outside the decision path, reading the record each entry names,
// and answers once the WAL sync covering that snapshot is done (engine
// invariant 2). Records held in memory for Early claims are not yet stored,
// so they are not listed.
func (s *Store) ListSeq(ctx context.Context, q spent.SeqQuery) ([]spent.SeqRecord, error) {
	recs, err := s.listSeq(ctx, &q)
	if err != nil {
		return nil, fmt.Errorf("pebble: list seq: %w", err)
	}
	return recs, nil
}

// seqIterStats, when set, is given the stats of each ListSeq's iterator.
// Test-only: it shows that a query steps over what it returns, not over
// the store.
var seqIterStats atomic.Pointer[func(pdb.IteratorStats)]

func (s *Store) listSeq(ctx context.Context, q *spent.SeqQuery) ([]spent.SeqRecord, error) {
	unlock, err := s.readLock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := []spent.SeqRecord{}
	if q.Limit <= 0 || q.From > q.To {
		return out, nil
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	covering := s.last.Load()
	lower, upper := seqBounds(q)
	it, err := snap.NewIter(&pdb.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer func() {
		if f := seqIterStats.Load(); f != nil {
			(*f)(it.Stats())
		}
		it.Close()
	}()
	first, next := it.First, it.Next
	if q.Descending {
		first, next = it.Last, it.Prev
	}
	rkey := make([]byte, 0, recordKeyLen)
	steps := 0
	for ok := first(); ok && len(out) < q.Limit; ok = next() {
		if steps++; steps%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		k := it.Key()
		if len(k) != seqKeyLen || !bytes.HasPrefix(k, []byte(prefixSeq)) {
			return nil, fmt.Errorf("%w: seq index key %x", ErrCorrupt, k)
		}
		want := spent.Seq{Node: binary.BigEndian.Uint32(k[2:]), Counter: binary.BigEndian.Uint64(k[6:])}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		if len(v) != spent.HashSize {
			return nil, fmt.Errorf("%w: seq index entry %x holds %d bytes", ErrCorrupt, k, len(v))
		}
		var h spent.Hash
		copy(h[:], v)
		rkey = appendRecordKey(rkey[:0], &h)
		rv, closer, err := snap.Get(rkey)
		if errors.Is(err, pdb.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		// A limit of 1 keeps any longer result in the engine, unread.
		rec, omitted, err := reccodec.DecodeLimit(h, rv, 1)
		closer.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: record %s: %w", ErrCorrupt, h, err)
		}
		if !spent.SeqIndexWanted(q, &rec, want) {
			continue
		}
		sr := spent.NewSeqRecord(rec)
		if omitted > 0 {
			sr.ResultLen = omitted
		}
		out = append(out, sr)
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if err := covering.wait(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// initSeqIndex builds the index by seq of a store written before it had
// one, once, at Open: it walks every record and writes its entry, in
// batches, then marks the index complete with a synced write. A new store
// is marked at once.
func (s *Store) initSeqIndex(created bool) error {
	if noSeqIndex.Load() {
		return nil
	}
	_, found, err := s.get(keySeqIndex)
	if err != nil || found {
		return err
	}
	if !created {
		n, err := s.buildSeqIndex()
		if err != nil {
			return fmt.Errorf("pebble: open: building the index by seq: %w", err)
		}
		s.log.Info("pebble: built the index by seq of a store written by an older version", "records", n)
	}
	if err := s.db.Set(keySeqIndex, []byte{seqIndexVer}, pdb.Sync); err != nil {
		return fmt.Errorf("pebble: open: %w", err)
	}
	return nil
}

// buildSeqIndex writes the index entry of every stored record and returns
// how many it wrote.
func (s *Store) buildSeqIndex() (int, error) {
	it, err := s.db.NewIter(&pdb.IterOptions{LowerBound: []byte(prefixRecord), UpperBound: prefixEnd(prefixRecord)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	b := s.db.NewBatch()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != recordKeyLen {
			return n, fmt.Errorf("%w: record key %x", ErrCorrupt, k)
		}
		var h spent.Hash
		copy(h[:], k[len(prefixRecord):])
		v, err := it.ValueAndErr()
		if err != nil {
			return n, err
		}
		rec, _, err := reccodec.DecodeLimit(h, v, 1)
		if err != nil {
			return n, fmt.Errorf("%w: record %s: %w", ErrCorrupt, h, err)
		}
		if err := b.Set(appendSeqIndexKey(nil, rec.Seq), h[:], nil); err != nil {
			return n, err
		}
		n++
		if b.Len() > 4<<20 {
			if err := b.Commit(pdb.NoSync); err != nil {
				return n, err
			}
			b = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return n, err
	}
	return n, b.Commit(pdb.Sync)
}
