package redis

import "github.com/spentledger/spent"

// Test-only exports for the black-box tests in package redis_test.

// RecordKey returns the key of the record of h.
func (s *Store) RecordKey(h spent.Hash) string { return s.ks.recordKey(&h, member(&h)) }

// PendingKey returns the key of the pending index that holds h.
func (s *Store) PendingKey(h spent.Hash) string { return s.ks.pending[h[0]] }

// Tags returns the 256 hash tags.
func Tags() [256]string { return tags() }

// CRC16 returns the checksum Redis Cluster derives slots from.
func CRC16(s string) uint16 { return crc16(s) }

// EncodeRecord returns the stored value of r.
func EncodeRecord(r *spent.Record) []byte { return encodeRecord(r) }

// DecodeRecord decodes a stored value under key h.
func DecodeRecord(h spent.Hash, v []byte) (spent.Record, error) { return decodeRecord(h, v) }

// CeilMilli returns t in Unix milliseconds, rounded up.
var CeilMilli = ceilMilli

// SeqIndexKey returns the key of the seq index of node that holds h.
func (s *Store) SeqIndexKey(h spent.Hash, node uint32) string { return s.ks.seqIndexKey(h[0], node) }
