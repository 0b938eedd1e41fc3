package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/reccodec"
)

// Key layout. Every key starts with a two-byte prefix naming its keyspace:
//
//	r/ hash                                 → encoded record
//	x/ expires_at hash                      → empty (expiry index)
//	p/ lease_until seq.node seq.ctr hash    → namespace (pending index)
//	s/ seq.node seq.ctr                     → hash (index by seq, seqindex.go)
//	c/ hash                                 → counter: expires_at, value (uint64)
//	y/ expires_at hash                      → empty (counter expiry index)
//	m/format                                → format version (one byte)
//	m/filter-size                           → filter entries at the last Close (uint64, a hint)
//	m/filter-id                             → 16 random bytes naming this store in SPENT-FILTER
//	m/journal-floor                         → the journal up to this round was deleted (uint64)
//	j/ round                                → fingerprints the round inserted (uint64s, filterfile.go)
//	m/seq/ node                             → last reserved counter (uint64)
//	m/rounds                                → number of the last round that wrote (uint64, see witness.go)
//	m/witnessed                             → present once the store keeps a witness
//	m/seq-index                             → present once the index by seq is complete
//
// Instants in keys are [timeLen] bytes that sort like the instants they
// encode (see putTime), so both indexes are ordered by time and walked from
// their start.
const (
	prefixRecord  = "r/"
	prefixExpiry  = "x/"
	prefixPending = "p/"
	prefixMeta    = "m/"
	prefixCounter = "c/"
	prefixCExpiry = "y/"

	timeLen       = 12
	recordKeyLen  = len(prefixRecord) + spent.HashSize
	expiryKeyLen  = len(prefixExpiry) + timeLen + spent.HashSize
	pendingKeyLen = len(prefixPending) + timeLen + 4 + 8 + spent.HashSize
	formatVersion = 1
)

var (
	keyFormat   = []byte(prefixMeta + "format")
	keySizeHint = []byte(prefixMeta + "filter-size")
	keyRounds   = []byte(prefixMeta + "rounds")
	keyWitness  = []byte(prefixMeta + "witnessed")
	seqKeyBase  = prefixMeta + "seq/"
)

// ErrCorrupt is returned when a stored record or key cannot be decoded: the
// directory was written by something else, or damaged.
var ErrCorrupt = errors.New("pebble: corrupt data")

// putTime writes t as 12 bytes that sort as the instants do: the Unix second
// with its sign bit flipped, big-endian, then the nanosecond, big-endian. It
// covers every time.Time, unlike UnixNano.
func putTime(b []byte, t time.Time) {
	binary.BigEndian.PutUint64(b, uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
}

// getTime reverses putTime.
func getTime(b []byte) time.Time {
	sec := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
	return makeTime(sec, int64(binary.BigEndian.Uint32(b[8:])))
}

// makeTime returns the instant, keeping the zero time.Time zero.
func makeTime(sec, nsec int64) time.Time { return reccodec.MakeTime(sec, nsec) }

// appendRecordKey appends the record key of h to dst.
func appendRecordKey(dst []byte, h *spent.Hash) []byte {
	dst = append(dst, prefixRecord...)
	return append(dst, h[:]...)
}

func recordKey(h *spent.Hash) []byte { return appendRecordKey(make([]byte, 0, recordKeyLen), h) }

// appendExpiryKey appends the expiry-index key of a record to dst.
func appendExpiryKey(dst []byte, exp time.Time, h *spent.Hash) []byte {
	dst = append(dst, prefixExpiry...)
	var t [timeLen]byte
	putTime(t[:], exp)
	dst = append(dst, t[:]...)
	return append(dst, h[:]...)
}

// expiryBound is the first expiry-index key after every entry with
// expires_at <= now.
func expiryBound(now time.Time) []byte {
	k := make([]byte, len(prefixExpiry)+timeLen)
	copy(k, prefixExpiry)
	putTime(k[len(prefixExpiry):], now.Add(time.Nanosecond))
	return k
}

// parseExpiryKey returns the hash an expiry-index key names and the encoded
// instant it carries.
func parseExpiryKey(k []byte) (spent.Hash, []byte, error) {
	var h spent.Hash
	if len(k) != expiryKeyLen || !bytes.HasPrefix(k, []byte(prefixExpiry)) {
		return h, nil, fmt.Errorf("%w: expiry key %x", ErrCorrupt, k)
	}
	copy(h[:], k[len(prefixExpiry)+timeLen:])
	return h, k[len(prefixExpiry) : len(prefixExpiry)+timeLen], nil
}

// appendCounterKey appends the key of a counter to dst.
func appendCounterKey(dst []byte, h *spent.Hash) []byte {
	dst = append(dst, prefixCounter...)
	return append(dst, h[:]...)
}

// appendCounterExpiryKey appends the counter-expiry-index key of a counter
// to dst.
func appendCounterExpiryKey(dst []byte, exp time.Time, h *spent.Hash) []byte {
	dst = append(dst, prefixCExpiry...)
	var t [timeLen]byte
	putTime(t[:], exp)
	dst = append(dst, t[:]...)
	return append(dst, h[:]...)
}

// counterValueLen is the length of an encoded counter: expires_at, value.
const counterValueLen = timeLen + 8

func appendCounter(dst []byte, c *spent.CountAnswer) []byte {
	var t [timeLen]byte
	putTime(t[:], c.ExpiresAt)
	dst = append(dst, t[:]...)
	return binary.BigEndian.AppendUint64(dst, c.Value)
}

func decodeCounter(v []byte) (spent.CountAnswer, error) {
	if len(v) != counterValueLen {
		return spent.CountAnswer{}, fmt.Errorf("%w: counter value %x", ErrCorrupt, v)
	}
	return spent.CountAnswer{ExpiresAt: getTime(v[:timeLen]), Value: binary.BigEndian.Uint64(v[timeLen:])}, nil
}

// appendPendingKey appends the pending-index key of a record to dst.
func appendPendingKey(dst []byte, lease time.Time, seq spent.Seq, h *spent.Hash) []byte {
	dst = append(dst, prefixPending...)
	var t [timeLen]byte
	putTime(t[:], lease)
	dst = append(dst, t[:]...)
	dst = binary.BigEndian.AppendUint32(dst, seq.Node)
	dst = binary.BigEndian.AppendUint64(dst, seq.Counter)
	return append(dst, h[:]...)
}

// pendingBound is the first pending-index key after every entry with
// lease_until <= t.
func pendingBound(t time.Time) []byte {
	k := make([]byte, len(prefixPending)+timeLen)
	copy(k, prefixPending)
	putTime(k[len(prefixPending):], t.Add(time.Nanosecond))
	return k
}

func parsePendingKey(k []byte) (lease time.Time, seq spent.Seq, h spent.Hash, err error) {
	if len(k) != pendingKeyLen || !bytes.HasPrefix(k, []byte(prefixPending)) {
		return lease, seq, h, fmt.Errorf("%w: pending key %x", ErrCorrupt, k)
	}
	n := len(prefixPending)
	lease = getTime(k[n:])
	n += timeLen
	seq.Node = binary.BigEndian.Uint32(k[n:])
	seq.Counter = binary.BigEndian.Uint64(k[n+4:])
	copy(h[:], k[n+12:])
	return lease, seq, h, nil
}

func seqKey(node uint32) []byte {
	k := make([]byte, len(seqKeyBase)+4)
	copy(k, seqKeyBase)
	binary.BigEndian.PutUint32(k[len(seqKeyBase):], node)
	return k
}

// prefixEnd returns the first key after every key that starts with p.
func prefixEnd(p string) []byte {
	e := []byte(p)
	e[len(e)-1]++
	return e
}

// appendRecord appends the version-1 encoding of r, without its hash (the
// key carries it): the format of internal/reccodec, shared with the etcd
// store.
func appendRecord(b []byte, r *spent.Record) []byte { return reccodec.Append(b, r) }

// decodeRecord decodes a record stored under key h. The record owns its
// memory: nothing aliases v.
func decodeRecord(h spent.Hash, v []byte) (spent.Record, error) {
	r, err := reccodec.Decode(h, v)
	if err != nil {
		return r, fmt.Errorf("%w: record %s: %w", ErrCorrupt, h, err)
	}
	return r, nil
}
