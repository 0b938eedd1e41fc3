package postgres

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spentledger/spent"
)

// Times are stored as int8 nanoseconds since the Unix epoch, exact to the
// nanosecond (timestamptz keeps microseconds), which covers the years 1678
// to 2262. Zero times (a complete record's LeaseUntil) are NULL.

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// errTimeRange is returned for a time that int8 nanoseconds cannot hold.
var errTimeRange = errors.New("time outside the years 1678 to 2262")

func nanos(t time.Time) (int64, error) {
	if t.Before(minTime) || t.After(maxTime) {
		return 0, fmt.Errorf("%v: %w", t, errTimeRange)
	}
	return t.UnixNano(), nil
}

// nullNanos returns nil (NULL) for the zero time.
func nullNanos(t time.Time) (any, error) {
	if t.IsZero() {
		return nil, nil
	}
	return nanos(t)
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// claimArgs returns the arguments of the claim statement for op: the
// record's columns, then now, retake and the result limit.
func claimArgs(op *spent.ClaimOp) ([]any, error) {
	r := &op.Record
	if err := r.Validate(); err != nil {
		return nil, err
	}
	first, err := nullNanos(r.FirstSeen)
	if err != nil {
		return nil, fmt.Errorf("first seen: %w", err)
	}
	exp, err := nanos(r.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("expires at: %w", err)
	}
	lease, err := nullNanos(r.LeaseUntil)
	if err != nil {
		return nil, fmt.Errorf("lease until: %w", err)
	}
	now, err := nanos(op.Now)
	if err != nil {
		return nil, fmt.Errorf("now: %w", err)
	}
	key := r.Hash
	return []any{
		key[:], []byte(r.Namespace), []byte(r.RawKey), first, []byte(r.Place),
		r.Fingerprint, int16(r.State), r.Result, exp, lease,
		int64(r.Seq.Node), int64(r.Seq.Counter), // a counter past 2^63 is stored negative, and read back exactly
		now, op.Retake, int64(max(0, op.ResultLimit)),
	}, nil
}

// scanRow receives the columns of a record (recordCols).
type scanRow struct {
	key, namespace, rawKey, place []byte
	fingerprint, result           []byte
	firstSeen, leaseUntil         *int64
	state                         int16
	expiresAt, node, counter      int64
}

func (r *scanRow) dest() []any {
	return []any{&r.key, &r.namespace, &r.rawKey, &r.firstSeen, &r.place, &r.fingerprint,
		&r.state, &r.result, &r.expiresAt, &r.leaseUntil, &r.node, &r.counter}
}

// limited returns the record of a row read with limitedCols, whose result
// length is n (nil for no result): a result the statement left out for
// being longer than limit is reported omitted.
func (r *scanRow) limited(n *int64, limit int) (spent.ClaimAnswer, error) {
	rec, err := r.record()
	if err != nil {
		return spent.ClaimAnswer{}, err
	}
	if limit > 0 && n != nil && *n > int64(limit) {
		if rec.Result != nil {
			return spent.ClaimAnswer{}, fmt.Errorf("%w: a result of %d bytes over the limit %d came back", ErrCorrupt, *n, limit)
		}
		return spent.ClaimAnswer{Record: rec, ResultOmitted: true, ResultLen: int(*n)}, nil
	}
	if n != nil && (rec.Result == nil || int64(len(rec.Result)) != *n) {
		return spent.ClaimAnswer{}, fmt.Errorf("%w: a result of %d bytes came back as %d", ErrCorrupt, *n, len(rec.Result))
	}
	return spent.ClaimAnswer{Record: rec}, nil
}

// record decodes the scanned row. Fingerprint and Result keep the
// difference between nil (NULL) and empty; pgx scans each bytea into a new
// slice, so the record may keep them.
func (r *scanRow) record() (spent.Record, error) {
	var rec spent.Record
	if len(r.key) != spent.HashSize {
		return rec, fmt.Errorf("%w: key of %d bytes", ErrCorrupt, len(r.key))
	}
	st := spent.State(r.state)
	if st != spent.StatePending && st != spent.StateComplete {
		return rec, fmt.Errorf("%w: state %d", ErrCorrupt, r.state)
	}
	if r.node < 0 || r.node > math.MaxUint32 {
		return rec, fmt.Errorf("%w: seq node %d", ErrCorrupt, r.node)
	}
	copy(rec.Hash[:], r.key)
	rec.Namespace = string(r.namespace)
	rec.RawKey = string(r.rawKey)
	if r.firstSeen != nil {
		rec.FirstSeen = fromNanos(*r.firstSeen)
	}
	rec.Place = string(r.place)
	rec.Fingerprint = r.fingerprint
	rec.State = st
	rec.Result = r.result
	rec.ExpiresAt = fromNanos(r.expiresAt)
	if r.leaseUntil != nil {
		rec.LeaseUntil = fromNanos(*r.leaseUntil)
	}
	rec.Seq = spent.Seq{Node: uint32(r.node), Counter: uint64(r.counter)}
	return rec, nil
}
