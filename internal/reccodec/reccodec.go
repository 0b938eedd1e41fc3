// Package reccodec is the binary encoding of a spent.Record that the
// embedded (pebble) and etcd stores keep as a record's value. Both stores
// write the same bytes, so the format is defined once, here.
//
// Version 1, without the hash (the store's key carries it):
//
//	version, state, flags (bit 0: a result is present, even empty),
//	uvarint seq.node, uvarint seq.counter,
//	first_seen, expires_at, lease_until: each varint Unix second, uvarint nanosecond,
//	namespace, place, raw key, fingerprint, [result]: each uvarint length, bytes
//
// The zero time.Time round-trips as zero. Changing the format means a new
// version byte, and decoders that still read version 1.
package reccodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/spentledger/spent"
)

// Version is the format version written first.
const Version = 1

const (
	flagHasResult  = 1 << 0
	knownFlags     = flagHasResult
	zeroTimeSecond = -62135596800 // time.Time{}.Unix()
)

// ErrBad says that bytes are not a version-1 record. Stores wrap it in their
// own corruption error.
var ErrBad = errors.New("not a version-1 record")

// Append appends the encoding of r to b.
func Append(b []byte, r *spent.Record) []byte {
	var flags byte
	if r.Result != nil {
		flags |= flagHasResult
	}
	b = append(b, Version, byte(r.State), flags)
	b = binary.AppendUvarint(b, uint64(r.Seq.Node))
	b = binary.AppendUvarint(b, r.Seq.Counter)
	for _, t := range [...]time.Time{r.FirstSeen, r.ExpiresAt, r.LeaseUntil} {
		b = binary.AppendVarint(b, t.Unix())
		b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	}
	b = appendBytes(b, r.Namespace)
	b = appendBytes(b, r.Place)
	b = appendBytes(b, r.RawKey)
	b = appendBytes(b, r.Fingerprint)
	if r.Result != nil {
		b = appendBytes(b, r.Result)
	}
	return b
}

func appendBytes[T string | []byte](b []byte, s T) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// MakeTime returns the instant of a Unix second and nanosecond, keeping the
// zero time.Time zero.
func MakeTime(sec, nsec int64) time.Time {
	if sec == zeroTimeSecond && nsec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, nsec)
}

// decoder reads an encoded record; the first failure sticks.
type decoder struct {
	b   []byte
	bad bool
}

// uvarint reads a uvarint in its shortest form, the one Append writes, so
// that a record has one encoding.
func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	var short [binary.MaxVarintLen64]byte
	if n <= 0 || n != len(binary.AppendUvarint(short[:0], v)) {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) time() time.Time {
	sec, n := binary.Varint(d.b)
	var short [binary.MaxVarintLen64]byte
	if n <= 0 || n != len(binary.AppendVarint(short[:0], sec)) {
		d.bad = true
		return time.Time{}
	}
	d.b = d.b[n:]
	nsec := d.uvarint()
	if nsec >= 1e9 {
		d.bad = true
		return time.Time{}
	}
	return MakeTime(sec, int64(nsec))
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// Decode decodes the record stored under h from v. The record owns its
// memory: nothing aliases v. An error wraps ErrBad.
func Decode(h spent.Hash, v []byte) (spent.Record, error) {
	r, _, err := DecodeLimit(h, v, 0)
	return r, err
}

// DecodeLimit is Decode that leaves out a result longer than limit, when
// limit is positive, without copying it: the record's Result is nil and
// omitted is the result's length. A result within the limit is copied as
// Decode copies it, and omitted is zero.
func DecodeLimit(h spent.Hash, v []byte, limit int) (r spent.Record, omitted int, err error) {
	r = spent.Record{Hash: h}
	if len(v) < 3 || v[0] != Version || v[2]&^knownFlags != 0 {
		return r, 0, ErrBad
	}
	r.State = spent.State(v[1])
	if r.State != spent.StatePending && r.State != spent.StateComplete {
		return r, 0, fmt.Errorf("%w: state %d", ErrBad, v[1])
	}
	flags := v[2]
	d := decoder{b: v[3:]}
	node := d.uvarint()
	if node > 1<<32-1 {
		d.bad = true
	}
	r.Seq = spent.Seq{Node: uint32(node), Counter: d.uvarint()}
	r.FirstSeen = d.time()
	r.ExpiresAt = d.time()
	r.LeaseUntil = d.time()
	ns, place, raw := d.bytes(), d.bytes(), d.bytes()
	fp := d.bytes()
	var result []byte
	if flags&flagHasResult != 0 {
		result = d.bytes()
	}
	if d.bad || len(d.b) != 0 {
		return spent.Record{Hash: h}, 0, ErrBad
	}
	r.Namespace, r.Place, r.RawKey = string(ns), string(place), string(raw)
	if len(fp) > 0 {
		r.Fingerprint = append([]byte(nil), fp...)
	}
	switch {
	case result == nil:
	case limit > 0 && len(result) > limit:
		omitted = len(result)
	default:
		r.Result = append(make([]byte, 0, len(result)), result...)
	}
	return r, omitted, nil
}
