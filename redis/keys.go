package redis

import (
	"encoding/hex"
	"strconv"
	"sync"

	"github.com/spentledger/spent"
)

// Key layout. With prefix P (Options.Prefix) and T the hash tag of a key's
// first byte (see tags):
//
//	P{T}:r:<hash hex>    record: the encoded record (codec.go), PXAT its expiry
//	P{T}:p               pending index: sorted set of the hashes of pending
//	                     records under tag T, scored by lease_until (Unix ms)
//	P{T}:t               trim cursor: the rank in P{T}:p where the next
//	                     Store.DeleteExpired goes on looking for entries of
//	                     records that the engine has forgotten
//	P{T}:c:<hash hex>    counter: value, expires_at; PXAT its expiry
//	P{T}:q:<node>        seq index: sorted set of the hashes of the records
//	                     of node under tag T, scored by seq counter
//	P{T}:u:<node>        trim cursor of the seq index (as P{T}:t)
//	P{seq}:s:<node>      last seq counter reserved for node (INCRBY)
//	P{seq}:n             the nodes that reserved seqs (a set)
//	P{seq}:format        the layout version, written by the first Open
//
// and one pub/sub channel, which is no key:
//
//	Pends                the hex hashes of records completed or released
//	                     (store.WatchEnds)
//
// Every operation touches keys of one tag only, so in Redis Cluster each
// script runs on one slot of one node.
const (
	seqTag    = "seq"
	numTags   = 256
	numSlots  = 16384
	slotSpace = numSlots / numTags // slots between two consecutive tags
	layout    = "1"                // value of the format key
)

// tags[i] is the hash tag of the keys whose hash starts with byte i. Each tag
// is the shortest base-36 string whose Redis Cluster slot is i*64, so the
// 256 tags sit at evenly spaced slots: however a cluster splits the slot
// range into contiguous shares, each node holds tags (and so, records) in
// proportion to its share. Keys are HMACs, uniform over the first byte.
var tags = sync.OnceValue(func() [numTags]string {
	var out [numTags]string
	found := 0
	for n := uint64(0); found < numTags; n++ {
		s := strconv.FormatUint(n, 36)
		slot := int(crc16(s) % numSlots)
		if slot%slotSpace != 0 {
			continue
		}
		if i := slot / slotSpace; out[i] == "" {
			out[i] = s
			found++
		}
	}
	return out
})

// crc16 is the CRC-16/XMODEM checksum (polynomial 0x1021, initial value 0)
// that Redis Cluster maps keys to slots with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// keyspace holds the key names of one store, built once at Open.
type keyspace struct {
	prefix  string          // P
	record  [numTags]string // P{T}:r:
	counter [numTags]string // P{T}:c:
	pending [numTags]string // P{T}:p
	trim    [numTags]string // P{T}:t
	seqIdx  [numTags]string // P{T}:q:
	seqTrim [numTags]string // P{T}:u:
	seq     string          // P{seq}:s:
	nodes   string          // P{seq}:n
	format  string          // P{seq}:format
	ends    string          // Pends, the channel of ends
}

func newKeyspace(prefix string) *keyspace {
	ks := &keyspace{
		prefix: prefix,
		seq:    prefix + "{" + seqTag + "}:s:",
		format: prefix + "{" + seqTag + "}:format",
		nodes:  prefix + "{" + seqTag + "}:n",
		ends:   prefix + "ends",
	}
	for i, t := range tags() {
		base := prefix + "{" + t + "}:"
		ks.record[i] = base + "r:"
		ks.counter[i] = base + "c:"
		ks.pending[i] = base + "p"
		ks.trim[i] = base + "t"
		ks.seqIdx[i] = base + "q:"
		ks.seqTrim[i] = base + "u:"
	}
	return ks
}

// member is the hex form of h: the member of the index sets, and the tail of
// its record and counter keys.
func member(h *spent.Hash) string { return hex.EncodeToString(h[:]) }

func (ks *keyspace) recordKey(h *spent.Hash, m string) string { return ks.record[h[0]] + m }

func (ks *keyspace) counterKey(h *spent.Hash) string { return ks.counter[h[0]] + member(h) }

func (ks *keyspace) seqKey(node uint32) string {
	return ks.seq + strconv.FormatUint(uint64(node), 10)
}

// seqIndexKey returns the seq index of node under tag t.
func (ks *keyspace) seqIndexKey(t byte, node uint32) string {
	return ks.seqIdx[t] + strconv.FormatUint(uint64(node), 10)
}

// seqTrimKey returns the trim cursor of the seq index of node under tag t.
func (ks *keyspace) seqTrimKey(t int, node uint32) string {
	return ks.seqTrim[t] + strconv.FormatUint(uint64(node), 10)
}
