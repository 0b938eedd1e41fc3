package etcd

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent"
)

// Test-only exports for the black-box tests in package etcd_test.

// EncodeRecord returns the stored value of r.
func EncodeRecord(r *spent.Record) []byte { return appendRecord(nil, r) }

// DecodeRecord decodes a stored value under hash h.
func DecodeRecord(h spent.Hash, v []byte) (spent.Record, error) { return decodeRecord(h, v) }

// RecordKey returns the etcd key of the record of h under prefix.
func RecordKey(prefix string, h spent.Hash) string { return keys{prefix}.record(h) }

// PendingKey returns the etcd key of r's pending-index entry under prefix.
func PendingKey(prefix string, r *spent.Record) string { return keys{prefix}.pending(r) }

// LeaseKey returns the etcd key that publishes the lease of the bucket
// ending at end (Unix seconds).
func LeaseKey(prefix string, end int64) string { return keys{prefix}.lease(end) }

// BucketEnd returns the end (Unix seconds) of the bucket of records that
// expire at exp, for buckets of width bucket.
func BucketEnd(bucket time.Duration, exp time.Time) int64 {
	return (&leases{bucket: int64(bucket / time.Second)}).bucketEnd(exp)
}

// Client returns the store's etcd client.
func (s *Store) Client() *clientv3.Client { return s.cli }
