package redis

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/spentledger/spent"
)

// The index by seq. Each hash tag keeps one sorted set per node
// (P{T}:q:<node>) of the hashes of that node's records under the tag,
// scored by seq counter: the claim scripts add the entry in the same atomic
// step as the record, on the record's slot, and release and purge remove it
// with the record. A record that Redis forgets at its expiry leaves its
// entry behind, as does a record replaced by another node's; ListSeq
// removes those it steps over, and DeleteExpired trims the rest, going
// round each index.
//
// One sorted set per node would put a node's whole index on one slot, and
// so on one primary of a cluster, apart from the records: the entry could
// not be written in the record's atomic step. Per tag, it is; a query asks
// all 256 tags (pipelined, per primary in parallel) and merges them.
//
// Scores are doubles: counters are exact up to 2^53, far beyond what a node
// reserves (blocks of 65,536 from 1).

// seqPage is the first page a ListSeq asks each tag for: the tag's share
// of the limit, twice over, plus a little.
func seqPage(limit int) int { return 2*(limit+numTags-1)/numTags + 4 }

// tagSeq is the progress of one tag in a ListSeq.
type tagSeq struct {
	got  []spent.SeqRecord
	next uint64 // where the tag's next page starts (a counter)
	done bool   // the tag has nothing more in range
}

// ListSeq implements [spent.SeqLister]. It runs one script per hash tag
// (seqLua, pipelined), each walking its tag's index of q.Node in counter
// order for a page of live records, merges the pages, and asks again, with
// pages twice as long, only the tags whose page ended before the merged
// answer's last counter. Each script returns records without their
// results. The cost is about the records returned plus a page per tag,
// and the stale entries stepped over, which it removes.
func (s *Store) ListSeq(ctx context.Context, q spent.SeqQuery) ([]spent.SeqRecord, error) {
	if err := s.enter("list seq"); err != nil {
		return nil, err
	}
	out := []spent.SeqRecord{}
	if q.Limit <= 0 || q.From > q.To {
		return out, nil
	}
	tags := make([]tagSeq, numTags)
	for i := range tags {
		tags[i].next = q.From
		if q.Descending {
			tags[i].next = q.To
		}
	}
	node := binary.BigEndian.AppendUint32(nil, q.Node)
	sec, nsec := timeArgs(q.Now)
	before := func(a, b uint64) bool { // a comes before b in q's order
		if q.Descending {
			return a > b
		}
		return a < b
	}
	ask := make([]int, 0, numTags)
	for i := range tags {
		ask = append(ask, i)
	}
	page := seqPage(q.Limit)
	for len(ask) > 0 {
		calls := make([]*call, len(ask))
		for j, t := range ask {
			from, to := tags[t].next, q.To
			if q.Descending {
				from, to = q.From, tags[t].next
			}
			k := s.ks.seqIndexKey(byte(t), q.Node)
			calls[j] = newCall(k, scriptSeq, []string{k}, s.ks.record[t], score(from), score(to),
				map[bool]string{true: "1", false: "0"}[q.Descending], page, node, sec, nsec)
		}
		if err := s.exec(ctx, calls, false); err != nil {
			return nil, s.fail("list seq", err)
		}
		for j, t := range ask {
			recs, err := seqReply(calls[j].cmd.Val())
			if err != nil {
				return nil, s.fail("list seq", err)
			}
			ts := &tags[t]
			ts.got = append(ts.got, recs...)
			if len(recs) < page {
				ts.done = true
				continue
			}
			last := recs[len(recs)-1].Seq.Counter
			if (q.Descending && last <= q.From) || (!q.Descending && last >= q.To) {
				ts.done = true
				continue
			}
			ts.next = last + 1
			if q.Descending {
				ts.next = last - 1
			}
		}
		// Merge, then ask again the tags that may hold records before
		// the answer's last.
		out = out[:0]
		for i := range tags {
			out = append(out, tags[i].got...)
		}
		slices.SortFunc(out, func(a, b spent.SeqRecord) int {
			switch {
			case before(a.Seq.Counter, b.Seq.Counter):
				return -1
			case before(b.Seq.Counter, a.Seq.Counter):
				return 1
			}
			return 0
		})
		full := len(out) >= q.Limit
		var cut uint64
		if full {
			out = out[:q.Limit]
			cut = out[q.Limit-1].Seq.Counter
		}
		ask = ask[:0]
		for i := range tags {
			if !tags[i].done && (!full || before(tags[i].next, cut)) {
				ask = append(ask, i)
			}
		}
		page *= 2
	}
	return slices.Clip(out), nil
}

// score is the text of counter c as a sorted set score.
func score(c uint64) string {
	if c > 1<<53 {
		return strconv.FormatFloat(math.Ldexp(1, 53), 'f', -1, 64)
	}
	return strconv.FormatUint(c, 10)
}

// seqReply decodes the reply of seqLua.
func seqReply(v any) ([]spent.SeqRecord, error) {
	reply, ok := v.([]any)
	if !ok && v != nil {
		return nil, fmt.Errorf("%w: seq script answered %T", ErrCorrupt, v)
	}
	if len(reply)%3 != 0 {
		return nil, fmt.Errorf("%w: seq script answered %d values", ErrCorrupt, len(reply))
	}
	out := make([]spent.SeqRecord, 0, len(reply)/3)
	for j := 0; j < len(reply); j += 3 {
		m, _ := reply[j].(string)
		head, _ := reply[j+1].(string)
		n, ok := reply[j+2].(int64)
		var h spent.Hash
		if k, err := hex.Decode(h[:], []byte(m)); err != nil || k != len(h) || !ok || n < 0 {
			return nil, fmt.Errorf("%w: seq index member %q", ErrCorrupt, m)
		}
		// The script cut the result off: the record decodes with an
		// empty result, whose length is n.
		r, err := decodeRecord(h, []byte(head))
		if err != nil {
			return nil, err
		}
		r.Result = nil
		out = append(out, spent.SeqRecord{Record: r, ResultLen: int(n)})
	}
	return out, nil
}

// trimSeq trims the seq indexes of every node that reserved seqs, perTag
// entries per tag and node, and returns how many entries it removed.
func (s *Store) trimSeq(ctx context.Context, perTag int) (int, error) {
	nodes, err := s.uc.SMembers(ctx, s.ks.nodes).Result()
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, n := range nodes {
		node, err := strconv.ParseUint(n, 10, 32)
		if err != nil {
			return removed, fmt.Errorf("%w: node %q in %s", ErrCorrupt, n, s.ks.nodes)
		}
		nb := binary.BigEndian.AppendUint32(nil, uint32(node))
		calls := make([]*call, numTags)
		for t := range calls {
			k := s.ks.seqIndexKey(byte(t), uint32(node))
			calls[t] = newCall(k, scriptSeqTrim, []string{k, s.ks.seqTrimKey(t, uint32(node))}, s.ks.record[t], perTag, nb)
		}
		if err := s.exec(ctx, calls, false); err != nil {
			return removed, err
		}
		for _, c := range calls {
			v, _ := c.cmd.Val().(int64)
			removed += int(v)
		}
	}
	return removed, nil
}
