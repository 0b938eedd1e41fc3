package redis

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spentledger/spent"
)

// A record is stored as one string value: a fixed header that the Lua
// scripts read at fixed offsets, then the variable fields, the result last
// (so that Complete can replace it by slicing).
//
//	offset size field
//	0      1    format version (recordVersion)
//	1      1    state
//	2      12   expires_at    (int64 Unix second, big-endian; uint32 nanosecond)
//	14     12   lease_until   (same; the zero time.Time when complete)
//	26     12   seq           (uint32 node, uint64 counter)
//	38     12   first_seen    (same as expires_at)
//	50     1    namespace length
//	51     2    raw key length
//	53     2    place length
//	55     1    fingerprint length
//	56     1    flags (flagHasResult)
//	57          namespace, raw key, place, fingerprint, result
//
// Lua numbers are doubles: the scripts compare instants as (second,
// nanosecond) pairs, each exact in a double, and compare seqs as byte strings.
const (
	recordVersion = 1
	headerLen     = 57
	offState      = 1
	offExpires    = 2
	offLease      = 14
	offSeq        = 26
	offFirstSeen  = 38
	offNSLen      = 50
	offRawLen     = 51
	offPlaceLen   = 53
	offFPLen      = 55
	offFlags      = 56
	timeLen       = 12
	seqLen        = 12

	flagHasResult = 1 << 0
	knownFlags    = flagHasResult

	zeroTimeSecond = -62135596800 // time.Time{}.Unix()
)

// ErrCorrupt is returned when a stored value cannot be decoded: the keys were
// written by something else (another program sharing the prefix), or by an
// incompatible version of spent.
var ErrCorrupt = errors.New("redis: corrupt data")

func putTime(b []byte, t time.Time) {
	binary.BigEndian.PutUint64(b, uint64(t.Unix()))
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
}

func getTime(b []byte) time.Time {
	return makeTime(int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint32(b[8:])))
}

// makeTime returns the instant in UTC, keeping the zero time.Time zero.
func makeTime(sec, nsec int64) time.Time {
	if sec == zeroTimeSecond && nsec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, nsec).UTC()
}

func putSeq(b []byte, s spent.Seq) {
	binary.BigEndian.PutUint32(b, s.Node)
	binary.BigEndian.PutUint64(b[4:], s.Counter)
}

// seqBytes is the stored form of s, as the scripts compare it.
func seqBytes(s spent.Seq) string {
	var b [seqLen]byte
	putSeq(b[:], s)
	return string(b[:])
}

// zeroLease is the stored form of the zero time, which Complete writes as
// the lease of a complete record.
var zeroLease = func() string {
	var b [timeLen]byte
	putTime(b[:], time.Time{})
	return string(b[:])
}()

// checkEncodable reports a record whose fields do not fit the format.
func checkEncodable(r *spent.Record) error {
	switch {
	case len(r.Namespace) > math.MaxUint8:
		return fmt.Errorf("namespace of %d bytes: at most %d", len(r.Namespace), math.MaxUint8)
	case len(r.RawKey) > math.MaxUint16:
		return fmt.Errorf("raw key of %d bytes: at most %d", len(r.RawKey), math.MaxUint16)
	case len(r.Place) > math.MaxUint16:
		return fmt.Errorf("place of %d bytes: at most %d", len(r.Place), math.MaxUint16)
	case len(r.Fingerprint) > math.MaxUint8:
		return fmt.Errorf("fingerprint of %d bytes: at most %d", len(r.Fingerprint), math.MaxUint8)
	}
	return nil
}

// encodeRecord returns the stored value of r, which checkEncodable accepted.
func encodeRecord(r *spent.Record) []byte {
	n := headerLen + len(r.Namespace) + len(r.RawKey) + len(r.Place) + len(r.Fingerprint) + len(r.Result)
	b := make([]byte, headerLen, n)
	b[0] = recordVersion
	b[offState] = byte(r.State)
	putTime(b[offExpires:], r.ExpiresAt)
	putTime(b[offLease:], r.LeaseUntil)
	putSeq(b[offSeq:], r.Seq)
	putTime(b[offFirstSeen:], r.FirstSeen)
	b[offNSLen] = byte(len(r.Namespace))
	binary.BigEndian.PutUint16(b[offRawLen:], uint16(len(r.RawKey)))
	binary.BigEndian.PutUint16(b[offPlaceLen:], uint16(len(r.Place)))
	b[offFPLen] = byte(len(r.Fingerprint))
	if r.Result != nil {
		b[offFlags] = flagHasResult
	}
	b = append(b, r.Namespace...)
	b = append(b, r.RawKey...)
	b = append(b, r.Place...)
	b = append(b, r.Fingerprint...)
	return append(b, r.Result...)
}

// decodeRecord decodes the stored value v of the record of h.
func decodeRecord(h spent.Hash, v []byte) (spent.Record, error) {
	if len(v) < headerLen {
		return spent.Record{}, fmt.Errorf("%w: record of %d bytes", ErrCorrupt, len(v))
	}
	if v[0] != recordVersion {
		return spent.Record{}, fmt.Errorf("%w: record format %d, want %d", ErrCorrupt, v[0], recordVersion)
	}
	st := spent.State(v[offState])
	if st != spent.StatePending && st != spent.StateComplete {
		return spent.Record{}, fmt.Errorf("%w: record state %d", ErrCorrupt, st)
	}
	flags := v[offFlags]
	if flags&^knownFlags != 0 {
		return spent.Record{}, fmt.Errorf("%w: record flags %#x", ErrCorrupt, flags)
	}
	for _, off := range []int{offExpires, offLease, offFirstSeen} {
		if ns := binary.BigEndian.Uint32(v[off+8:]); ns >= 1e9 {
			return spent.Record{}, fmt.Errorf("%w: nanosecond %d", ErrCorrupt, ns)
		}
	}
	nl := int(v[offNSLen])
	rl := int(binary.BigEndian.Uint16(v[offRawLen:]))
	pl := int(binary.BigEndian.Uint16(v[offPlaceLen:]))
	fl := int(v[offFPLen])
	rest := v[headerLen:]
	if len(rest) < nl+rl+pl+fl {
		return spent.Record{}, fmt.Errorf("%w: record of %d bytes, fields of %d", ErrCorrupt, len(v), headerLen+nl+rl+pl+fl)
	}
	r := spent.Record{
		Hash:       h,
		State:      st,
		ExpiresAt:  getTime(v[offExpires:]),
		LeaseUntil: getTime(v[offLease:]),
		FirstSeen:  getTime(v[offFirstSeen:]),
		Seq: spent.Seq{
			Node:    binary.BigEndian.Uint32(v[offSeq:]),
			Counter: binary.BigEndian.Uint64(v[offSeq+4:]),
		},
	}
	r.Namespace, rest = string(rest[:nl]), rest[nl:]
	r.RawKey, rest = string(rest[:rl]), rest[rl:]
	r.Place, rest = string(rest[:pl]), rest[pl:]
	if fl > 0 {
		r.Fingerprint = append([]byte(nil), rest[:fl]...)
	}
	rest = rest[fl:]
	switch {
	case flags&flagHasResult != 0:
		r.Result = append([]byte{}, rest...)
	case len(rest) > 0:
		return spent.Record{}, fmt.Errorf("%w: %d result bytes without the result flag", ErrCorrupt, len(rest))
	}
	return r, nil
}

// ceilMilli returns t in Unix milliseconds, rounded up, so that an engine
// expiry at that millisecond never comes before t.
func ceilMilli(t time.Time) int64 {
	ms := t.UnixMilli() // rounded down: the nanosecond part is never negative
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms
}
