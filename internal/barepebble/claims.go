package barepebble

import (
	"encoding/binary"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/spentledger/spent/pebble"
)

// ClaimOptions returns the options of a bare database that stands for the
// embedded store's writes of claims: its block cache and memtable sizes,
// its format (the pebble package pins the newest of pebble v2.1.7,
// unexported) and its bloom filters. Pebble's informational messages are
// dropped.
func ClaimOptions() *pdb.Options {
	so := pebble.DefaultOptions()
	po := &pdb.Options{CacheSize: so.CacheSize, MemTableSize: so.MemTableSize, FormatMajorVersion: pdb.FormatValueSeparation, Logger: quiet{}}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return po
}

// SetClaim stages in b the writes of one claim whose key hashes to h: its
// record (a 60-byte value under 'r' and h), the least a durable index of
// claims writes, and with all, as the embedded store also writes, its expiry
// index entry ('x', the expiry in milliseconds, h) and a seq index entry
// ('s', node 1, seq, giving h).
func SetClaim(b *pdb.Batch, h *[32]byte, expiry time.Time, seq uint64, all bool) error {
	var rec [1 + 32]byte
	rec[0] = 'r'
	copy(rec[1:], h[:])
	var val [60]byte
	if err := b.Set(rec[:], val[:], nil); err != nil || !all {
		return err
	}
	var x [1 + 8 + 32]byte
	x[0] = 'x'
	binary.BigEndian.PutUint64(x[1:], uint64(expiry.UnixMilli()))
	copy(x[9:], h[:])
	if err := b.Set(x[:], nil, nil); err != nil {
		return err
	}
	var s [1 + 4 + 8]byte
	s[0] = 's'
	binary.BigEndian.PutUint32(s[1:], 1)
	binary.BigEndian.PutUint64(s[5:], seq)
	return b.Set(s[:], h[:], nil)
}
