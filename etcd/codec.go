package etcd

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spentledger/spent"
)

// Key layout, under Options.Prefix (P). Hex keeps every key printable for
// etcdctl, and fixed widths make the pending index sort by lease, then seq:
//
//	P r/ hash                                   → record (see appendRecord)
//	P p/ hex(namespace) / lease seq.node seq.ctr hash → "" (pending index)
//	P c/ hash                                   → counter (see appendCounter)
//	P s/ node                                   → last reserved counter, decimal
//	P l/ bucket end                             → lease ID of the bucket, hex
//	P m/format                                  → format version, decimal
//
// Hashes are 32 hex digits, the node 8, the counter 16, instants 24 (see
// putTime) and bucket ends 16 (Unix seconds). A record and its pending
// index entry are attached to the same lease, and written and deleted in the
// same transaction.
const (
	nsRecord  = "r/"
	nsPending = "p/"
	nsCounter = "c/"
	nsSeq     = "s/"
	nsLease   = "l/"
	keyFormat = "m/format"

	formatVersion  = "1"
	recordVersion  = 1
	counterVersion = 1
	flagHasResult  = 1 << 0
	knownFlags     = flagHasResult

	hashHex = 2 * spent.HashSize
	timeHex = 24
	// pendingTail is the fixed-width part of a pending key after the
	// namespace: lease, node, counter, hash.
	pendingTail    = timeHex + 8 + 16 + hashHex
	zeroTimeSecond = -62135596800 // time.Time{}.Unix()
)

// ErrCorrupt is returned when a stored value or key cannot be decoded: the
// prefix holds data written by something else.
var ErrCorrupt = errors.New("etcd: corrupt data")

// keys builds the store's keys under one prefix.
type keys struct{ prefix string }

func (k keys) record(h spent.Hash) string  { return k.prefix + nsRecord + h.String() }
func (k keys) counter(h spent.Hash) string { return k.prefix + nsCounter + h.String() }
func (k keys) format() string              { return k.prefix + keyFormat }

func (k keys) seq(node uint32) string {
	return k.prefix + nsSeq + fmt.Sprintf("%08x", node)
}

func (k keys) lease(end int64) string {
	return k.prefix + nsLease + fmt.Sprintf("%016x", uint64(end))
}

// pendingNS is the start of namespace ns's pending index.
func (k keys) pendingNS(ns string) string {
	return k.prefix + nsPending + hex.EncodeToString([]byte(ns)) + "/"
}

// pendingAll is the start of the whole pending index.
func (k keys) pendingAll() string { return k.prefix + nsPending }

// pending is the pending-index key of r.
func (k keys) pending(r *spent.Record) string {
	var b strings.Builder
	b.Grow(len(k.prefix) + len(nsPending) + 2*len(r.Namespace) + 1 + pendingTail)
	b.WriteString(k.pendingNS(r.Namespace))
	b.WriteString(hexTime(r.LeaseUntil))
	fmt.Fprintf(&b, "%08x%016x", r.Seq.Node, r.Seq.Counter)
	b.WriteString(r.Key.String())
	return b.String()
}

// pendingBound is the first key of namespace ns's pending index after every
// entry with a lease ending at or before t.
func (k keys) pendingBound(ns string, t time.Time) string {
	return k.pendingNS(ns) + hexTime(t.Add(time.Nanosecond))
}

// pendingEntry is what a pending-index key says.
type pendingEntry struct {
	lease time.Time
	seq   spent.Seq
	hash  spent.Hash
}

// parsePending parses a pending-index key of any namespace, returning the
// namespace in hex and the entry.
func (k keys) parsePending(key string) (string, pendingEntry, error) {
	var e pendingEntry
	rest, ok := strings.CutPrefix(key, k.pendingAll())
	if !ok {
		return "", e, fmt.Errorf("%w: pending key %q", ErrCorrupt, key)
	}
	nsHex, tail, ok := strings.Cut(rest, "/")
	if !ok || len(tail) != pendingTail {
		return "", e, fmt.Errorf("%w: pending key %q", ErrCorrupt, key)
	}
	lease, err := parseHexTime(tail[:timeHex])
	if err != nil {
		return "", e, fmt.Errorf("%w: pending key %q", ErrCorrupt, key)
	}
	node, err1 := strconv.ParseUint(tail[timeHex:timeHex+8], 16, 32)
	ctr, err2 := strconv.ParseUint(tail[timeHex+8:timeHex+24], 16, 64)
	h, err3 := spent.ParseHash(tail[timeHex+24:])
	if err1 != nil || err2 != nil || err3 != nil {
		return "", e, fmt.Errorf("%w: pending key %q", ErrCorrupt, key)
	}
	e.lease, e.seq, e.hash = lease, spent.Seq{Node: uint32(node), Counter: ctr}, h
	return nsHex, e, nil
}

// hashOfRecordKey returns the hash a record key names.
func (k keys) hashOfRecordKey(key []byte) (spent.Hash, error) {
	s, ok := strings.CutPrefix(string(key), k.prefix+nsRecord)
	if !ok {
		return spent.Hash{}, fmt.Errorf("%w: record key %q", ErrCorrupt, key)
	}
	h, err := spent.ParseHash(s)
	if err != nil {
		return h, fmt.Errorf("%w: record key %q", ErrCorrupt, key)
	}
	return h, nil
}

// hexTime writes t as 24 hex digits that sort as the instants do: the Unix
// second with its sign bit flipped, then the nanosecond.
func hexTime(t time.Time) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
	return hex.EncodeToString(b[:])
}

func parseHexTime(s string) (time.Time, error) {
	var b [12]byte
	if len(s) != timeHex {
		return time.Time{}, errors.New("bad length")
	}
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return time.Time{}, err
	}
	sec := int64(binary.BigEndian.Uint64(b[:]) ^ (1 << 63))
	nsec := binary.BigEndian.Uint32(b[8:])
	if nsec >= 1e9 {
		return time.Time{}, errors.New("bad nanosecond")
	}
	return makeTime(sec, int64(nsec)), nil
}

// makeTime returns the instant, keeping the zero time.Time zero.
func makeTime(sec, nsec int64) time.Time {
	if sec == zeroTimeSecond && nsec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, nsec)
}

// appendRecord appends the encoding of r without its hash, which the key
// carries:
//
//	version 1, state, flags (bit 0: a result is present, even empty),
//	uvarint seq.node, uvarint seq.counter,
//	first_seen, expires_at, lease_until: each varint Unix second, uvarint nanosecond,
//	namespace, place, raw key, fingerprint, [result]: each uvarint length, bytes
func appendRecord(b []byte, r *spent.Record) []byte {
	var flags byte
	if r.Result != nil {
		flags |= flagHasResult
	}
	b = append(b, recordVersion, byte(r.State), flags)
	b = binary.AppendUvarint(b, uint64(r.Seq.Node))
	b = binary.AppendUvarint(b, r.Seq.Counter)
	b = appendTime(b, r.FirstSeen)
	b = appendTime(b, r.ExpiresAt)
	b = appendTime(b, r.LeaseUntil)
	b = appendField(b, r.Namespace)
	b = appendField(b, r.Place)
	b = appendField(b, r.RawKey)
	b = appendField(b, r.Fingerprint)
	if r.Result != nil {
		b = appendField(b, r.Result)
	}
	return b
}

func appendTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func appendField[T string | []byte](b []byte, v T) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// reader decodes; its first failure sticks.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) time() time.Time {
	sec, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return time.Time{}
	}
	r.b = r.b[n:]
	nsec := r.uvarint()
	if nsec >= 1e9 {
		r.bad = true
		return time.Time{}
	}
	return makeTime(sec, int64(nsec))
}

func (r *reader) field() []byte {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// decodeRecord decodes the value of the record of h. The record shares no
// memory with v.
func decodeRecord(h spent.Hash, v []byte) (spent.Record, error) {
	rec := spent.Record{Key: h}
	if len(v) < 3 || v[0] != recordVersion || v[2]&^knownFlags != 0 {
		return rec, fmt.Errorf("%w: record %s", ErrCorrupt, h)
	}
	rec.State = spent.State(v[1])
	if rec.State != spent.StatePending && rec.State != spent.StateComplete {
		return rec, fmt.Errorf("%w: record %s: state %d", ErrCorrupt, h, v[1])
	}
	flags := v[2]
	r := reader{b: v[3:]}
	node := r.uvarint()
	if node > 1<<32-1 {
		r.bad = true
	}
	rec.Seq = spent.Seq{Node: uint32(node), Counter: r.uvarint()}
	rec.FirstSeen = r.time()
	rec.ExpiresAt = r.time()
	rec.LeaseUntil = r.time()
	ns, place, raw, fp := r.field(), r.field(), r.field(), r.field()
	var result []byte
	if flags&flagHasResult != 0 {
		result = r.field()
	}
	if r.bad || len(r.b) != 0 {
		return spent.Record{Key: h}, fmt.Errorf("%w: record %s", ErrCorrupt, h)
	}
	rec.Namespace, rec.Place, rec.RawKey = string(ns), string(place), string(raw)
	if len(fp) > 0 {
		rec.Fingerprint = append([]byte(nil), fp...)
	}
	if result != nil {
		rec.Result = append(make([]byte, 0, len(result)), result...)
	}
	return rec, nil
}

// counter is a stored bounded counter.
type counter struct {
	value     uint64
	expiresAt time.Time
}

// appendCounter appends the encoding of c: version 1, uvarint value,
// expires_at as varint Unix second and uvarint nanosecond.
func appendCounter(b []byte, c counter) []byte {
	b = append(b, counterVersion)
	b = binary.AppendUvarint(b, c.value)
	return appendTime(b, c.expiresAt)
}

func decodeCounter(h spent.Hash, v []byte) (counter, error) {
	if len(v) < 1 || v[0] != counterVersion {
		return counter{}, fmt.Errorf("%w: counter %s", ErrCorrupt, h)
	}
	r := reader{b: v[1:]}
	c := counter{value: r.uvarint(), expiresAt: r.time()}
	if r.bad || len(r.b) != 0 {
		return counter{}, fmt.Errorf("%w: counter %s", ErrCorrupt, h)
	}
	return c, nil
}

// cloneRecord returns a copy of r that shares no memory with it.
func cloneRecord(r *spent.Record) spent.Record {
	c := *r
	if r.Fingerprint != nil {
		c.Fingerprint = append([]byte(nil), r.Fingerprint...)
	}
	if r.Result != nil {
		c.Result = append(make([]byte, 0, len(r.Result)), r.Result...)
	}
	return c
}
