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
	"github.com/spentledger/spent/internal/reccodec"
)

// Key layout, under Options.Prefix (P). Hex keeps every key printable for
// etcdctl, and fixed widths make the pending index sort by lease, then seq:
//
//	P r/ hash                                   → record (see appendRecord)
//	P p/ hex(namespace) / lease seq.node seq.ctr hash → "" (pending index)
//	P c/ hash                                   → counter (see appendCounter)
//	P s/ node                                   → last reserved counter, decimal
//	P q/ seq.node / seq.ctr                     → hash, 16 bytes (index by seq)
//	P l/ bucket end                             → lease ID of the bucket, hex
//	P m/format                                  → format version, decimal
//
// Hashes are 32 hex digits, the node 8, the counter 16, instants 24 (see
// putTime) and bucket ends 16 (Unix seconds). A record and its pending
// and seq index entries are attached to the same lease, and written and
// deleted in the same transaction.
const (
	nsRecord  = "r/"
	nsPending = "p/"
	nsCounter = "c/"
	nsSeq     = "s/"
	nsLease   = "l/"
	nsSeqIdx  = "q/"
	keyFormat = "m/format"

	formatVersion  = "1"
	counterVersion = 1

	hashHex = 2 * spent.HashSize
	timeHex = 24
	// pendingTail is the fixed-width part of a pending key after the
	// namespace: lease, node, counter, hash.
	pendingTail = timeHex + 8 + 16 + hashHex
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

// seqIndex is the seq-index key of seq.
func (k keys) seqIndex(seq spent.Seq) string {
	return k.prefix + nsSeqIdx + fmt.Sprintf("%08x/%016x", seq.Node, seq.Counter)
}

// parseSeqIndex returns the seq a seq-index key names.
func (k keys) parseSeqIndex(key string) (spent.Seq, error) {
	rest, ok := strings.CutPrefix(key, k.prefix+nsSeqIdx)
	if !ok || len(rest) != 8+1+16 || rest[8] != '/' {
		return spent.Seq{}, fmt.Errorf("%w: seq index key %q", ErrCorrupt, key)
	}
	node, err1 := strconv.ParseUint(rest[:8], 16, 32)
	ctr, err2 := strconv.ParseUint(rest[9:], 16, 64)
	if err1 != nil || err2 != nil {
		return spent.Seq{}, fmt.Errorf("%w: seq index key %q", ErrCorrupt, key)
	}
	return spent.Seq{Node: uint32(node), Counter: ctr}, nil
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
	b.WriteString(r.Hash.String())
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
func makeTime(sec, nsec int64) time.Time { return reccodec.MakeTime(sec, nsec) }

// appendRecord appends the encoding of r without its hash, which the key
// carries: the format of internal/reccodec, shared with the embedded store.
func appendRecord(b []byte, r *spent.Record) []byte { return reccodec.Append(b, r) }

// decodeRecord decodes the value of the record of h. The record shares no
// memory with v.
func decodeRecord(h spent.Hash, v []byte) (spent.Record, error) {
	rec, err := reccodec.Decode(h, v)
	if err != nil {
		return rec, fmt.Errorf("%w: record %s: %w", ErrCorrupt, h, err)
	}
	return rec, nil
}

// decodeRecordLimit is decodeRecord that leaves out a result longer than
// limit (when limit is positive) without copying it, and returns its length.
// The value itself has come over the network whole: etcd cannot send part of
// a value.
func decodeRecordLimit(h spent.Hash, v []byte, limit int) (spent.Record, int, error) {
	rec, omitted, err := reccodec.DecodeLimit(h, v, limit)
	if err != nil {
		return rec, 0, fmt.Errorf("%w: record %s: %w", ErrCorrupt, h, err)
	}
	return rec, omitted, nil
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
	b = binary.AppendVarint(b, c.expiresAt.Unix())
	return binary.AppendUvarint(b, uint64(c.expiresAt.Nanosecond()))
}

func decodeCounter(h spent.Hash, v []byte) (counter, error) {
	if len(v) < 1 || v[0] != counterVersion {
		return counter{}, fmt.Errorf("%w: counter %s", ErrCorrupt, h)
	}
	bad := fmt.Errorf("%w: counter %s", ErrCorrupt, h)
	b := v[1:]
	value, n := binary.Uvarint(b)
	if n <= 0 {
		return counter{}, bad
	}
	b = b[n:]
	sec, n := binary.Varint(b)
	if n <= 0 {
		return counter{}, bad
	}
	b = b[n:]
	nsec, n := binary.Uvarint(b)
	if n <= 0 || nsec >= 1e9 || n != len(b) {
		return counter{}, bad
	}
	return counter{value: value, expiresAt: makeTime(sec, int64(nsec))}, nil
}
