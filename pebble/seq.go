package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	pdb "github.com/cockroachdb/pebble/v2"
)

// reserveReq is the part of a kindReserve request: a ReserveSeq.
type reserveReq struct {
	node  uint32
	n     uint64
	first uint64 // the answer: the first counter reserved
}

// decideReserve reserves q.n seq counters for q.node: the stored value is the last
// counter handed out, so the first block starts at 1.
func (s *Store) decideReserve(rd *round, q *reserveReq) error {
	node, n := q.node, q.n
	last, ok := s.seqs[node]
	if !ok {
		v, closer, err := s.db.Get(seqKey(node))
		switch {
		case errors.Is(err, pdb.ErrNotFound):
		case err != nil:
			return err
		default:
			if len(v) != 8 {
				closer.Close()
				return fmt.Errorf("%w: seq of node %d", ErrCorrupt, node)
			}
			last = binary.BigEndian.Uint64(v)
			closer.Close()
		}
	}
	first := last + 1
	if first == 0 || (n > 0 && n-1 > math.MaxUint64-first) {
		return fmt.Errorf("seq counters of node %d exhausted", node)
	}
	q.first = first
	if n == 0 {
		return nil
	}
	last = first + n - 1
	rd.set(seqKey(node), be64(last))
	s.seqs[node] = last
	return nil
}
