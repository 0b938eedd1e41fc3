package spent

import (
	"context"
	"math"
	"slices"
	"time"
)

// Introspection by seq: every record carries the seq of the write that
// created it, and stores keep an index by (node, counter) so that an
// operator can ask "what did node 7 write last?" or "what happened around
// seq 8,400,000 on node 7?" without a scan.

// MaxSeqList is the most records one [Ledger.Seq] call answers with.
const MaxSeqList = 10000

// DefaultSeqLimit is how many records [Ledger.Seq] answers with when a
// request around a counter or over a range gives no limit.
const DefaultSeqLimit = 100

// SeqQuery asks a [SeqLister] for the records one node wrote in a range of
// counters.
type SeqQuery struct {
	// Node is the node whose records are listed.
	Node uint32
	// From and To bound the counters listed, both included.
	From, To uint64
	// Descending lists from To down rather than from From up.
	Descending bool
	// Limit is the most records listed; zero or less lists none.
	Limit int
	// Now is the ledger's time: records with ExpiresAt <= Now are not
	// listed.
	Now time.Time
}

// SeqRecord is a record listed by seq: the record without its result bytes,
// and the length of that result.
type SeqRecord struct {
	// Record is the record, with a nil Result.
	Record
	// ResultLen is the length of the record's stored result, zero for a
	// pending record.
	ResultLen int `json:"result_len"`
}

// SeqLister is a [Store] that keeps an index of its records by seq (node,
// then counter). Every store of this module implements it; the ledger checks
// for it at run time, so that a store without the index still serves claims.
// Like every optional store capability, it is looked up with [StoreAs],
// which finds it under wrapper stores (a tracing store, say).
type SeqLister interface {
	// ListSeq returns up to q.Limit live records (ExpiresAt after q.Now)
	// whose Seq.Node is q.Node and whose counter lies in [q.From, q.To],
	// ordered by counter, ascending, or descending when q.Descending is
	// set. Records come without their result (Result nil, ResultLen its
	// length); a store may leave RawKey set, and the ledger clears it.
	//
	// It costs time in proportion to the index entries it steps over, not
	// to the records the store holds: the entries of the records it
	// returns, plus those of records that expired but are not yet swept. An
	// index entry whose record is gone (released, swept, purged), expired,
	// or now carries another seq (released and claimed again, or retaken)
	// is skipped, and may be removed. It reports only durable records, as
	// Get does. A range with From > To lists nothing.
	ListSeq(ctx context.Context, q SeqQuery) ([]SeqRecord, error)
}

// SeqRequest is an operator's question by seq, as [Ledger.Seq] takes it. It
// asks one of three things of Node's records: the Last n; the Limit records
// Around a counter (half before it, half from it on); or the first Limit of
// a range From..To. Exactly one of Last, Around and From/To is set.
type SeqRequest struct {
	// Node is the node whose records are listed; at least 1.
	Node uint32 `json:"node"`
	// Last, when positive, asks for the node's last Last records (the
	// highest counters), at most [MaxSeqList].
	Last int `json:"last,omitempty"`
	// Around, when positive, asks for the records around this counter.
	Around uint64 `json:"around,omitempty"`
	// From and To, when either is set, ask for the records with counters
	// in From..To, both included (To zero means no upper bound).
	From uint64 `json:"from,omitempty"`
	To   uint64 `json:"to,omitempty"`
	// Limit bounds Around and From/To: at most [MaxSeqList], and
	// [DefaultSeqLimit] when zero.
	Limit int `json:"limit,omitempty"`
}

// SeqAnswer is the ledger's answer to a [SeqRequest].
type SeqAnswer struct {
	// Node is the node listed.
	Node uint32 `json:"node"`
	// Records are the live records found, ascending by counter, without
	// their result bytes and without their raw key.
	Records []SeqRecord `json:"records"`
}

// ENoSeqIndex: the store keeps no index by seq, so the ledger cannot list
// records by seq.
const ENoSeqIndex = "no_seq_index"

// checkSeq validates req and returns the queries it takes, in the order
// their answers are joined (each ascending once reversed as needed).
func checkSeq(req *SeqRequest, now time.Time) ([]SeqQuery, error) {
	if req.Node == 0 {
		return nil, Errorf(EInvalid, "seq: node must be at least 1")
	}
	ranged := req.From != 0 || req.To != 0
	n := 0
	for _, set := range []bool{req.Last != 0, req.Around != 0, ranged} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, Errorf(EInvalid, "seq: give exactly one of last, around, and from/to")
	}
	if req.Last < 0 || req.Limit < 0 {
		return nil, Errorf(EInvalid, "seq: last and limit must not be negative")
	}
	if req.Last > MaxSeqList || req.Limit > MaxSeqList {
		return nil, Errorf(ETooLarge, "seq: at most %d records a call", MaxSeqList)
	}
	limit := req.Limit
	if limit == 0 {
		limit = DefaultSeqLimit
	}
	q := SeqQuery{Node: req.Node, From: 0, To: math.MaxUint64, Now: now}
	switch {
	case req.Last != 0:
		if req.Limit != 0 {
			return nil, Errorf(EInvalid, "seq: limit goes with around or from/to; last is its own limit")
		}
		q.Descending, q.Limit = true, req.Last
		return []SeqQuery{q}, nil
	case req.Around != 0:
		before := q
		before.To, before.Descending, before.Limit = req.Around-1, true, limit/2
		after := q
		after.From, after.Limit = req.Around, limit-limit/2
		return []SeqQuery{before, after}, nil
	}
	to := req.To
	if to == 0 {
		to = math.MaxUint64
	}
	if req.From > to {
		return nil, Errorf(EInvalid, "seq: from %d is after to %d", req.From, to)
	}
	q.From, q.To, q.Limit = req.From, to, limit
	return []SeqQuery{q}, nil
}

// Seq lists records by seq: the last n a node wrote, those around a counter,
// or those of a range of counters (see [SeqRequest]), at most [MaxSeqList],
// ascending by counter. It answers from the store's index by seq, in time
// in proportion to what it returns, and never returns result bytes (only
// their length) or raw keys. A store without the index gets an
// [ENoSeqIndex] error; a malformed request an [EInvalid] one, and one over
// the limit an [ETooLarge] one. It is an operator's tool (admin scope over
// HTTP): its records span every namespace.
func (l *Ledger) Seq(ctx context.Context, req SeqRequest) (SeqAnswer, error) {
	qs, err := checkSeq(&req, l.cfg.Now())
	if err != nil {
		return SeqAnswer{}, err
	}
	sl, ok := StoreAs[SeqLister](l.store)
	if !ok {
		return SeqAnswer{}, Errorf(ENoSeqIndex, "this store keeps no index by seq; run a store of this version (pebble, redis, postgres, etcd)")
	}
	out := SeqAnswer{Node: req.Node, Records: []SeqRecord{}}
	for _, q := range qs {
		if q.Limit <= 0 {
			continue
		}
		recs, err := sl.ListSeq(ctx, q)
		if err != nil {
			return SeqAnswer{}, storeError(err)
		}
		if len(recs) > q.Limit {
			return SeqAnswer{}, &Error{Code: EInternal, Message: "store listed more records by seq than asked"}
		}
		if q.Descending {
			slices.Reverse(recs)
		}
		for i := range recs {
			recs[i].RawKey = ""
			recs[i].Result = nil
		}
		out.Records = append(out.Records, recs...)
	}
	return out, nil
}

// SeqIndexWanted reports whether r, stored at now, belongs in the answer to
// q: the node and range match, the record is live, and its seq is want (the
// seq its index entry names). Stores use it when they check an index entry
// against the record it names, so that they all agree.
func SeqIndexWanted(q *SeqQuery, r *Record, want Seq) bool {
	return r.Seq == want && r.Seq.Node == q.Node && r.Seq.Counter >= q.From && r.Seq.Counter <= q.To && r.LiveAt(q.Now)
}

// NewSeqRecord returns r listed by seq: without its result, with the
// result's length. Stores that read the result anyway use it.
func NewSeqRecord(r Record) SeqRecord {
	n := len(r.Result)
	r.Result = nil
	return SeqRecord{Record: r, ResultLen: n}
}
