package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxLeaseTTL is etcd's largest lease TTL in seconds (lease.MaxLeaseTTL in
// go.etcd.io/etcd/server/v3, about 285 years). A record that expires later
// than that gets no lease: etcd then keeps it until it is overwritten.
const maxLeaseTTL = 9_000_000_000

// leaseGrantTimeout bounds the requests that fetch or grant a bucket's lease,
// which run apart from any one caller's context: the callers that wait for
// the same bucket share them.
const leaseGrantTimeout = 10 * time.Second

// leases hands out one etcd lease per time bucket. Buckets are
// Options.LeaseBucket wide and aligned on the Unix epoch; a bucket is named
// by its end, in Unix seconds. A record expiring at t gets the lease of the
// bucket whose end is the first at or after t, granted with a TTL that runs
// to that end on the real clock, so etcd forgets the record no earlier than
// t.
//
// Every process sharing the prefix uses the same lease for a bucket: its ID
// is published under the bucket's key, itself attached to that lease, so the
// key lives exactly as long as the lease. Granted leases are cached; a lease
// that etcd no longer knows (expired or revoked) is dropped from the cache by
// the caller that got ErrLeaseNotFound, and fetched or granted again.
type leases struct {
	cli    *clientv3.Client
	keys   keys
	bucket int64 // seconds
	now    func() time.Time

	mu    sync.Mutex
	slots map[int64]*leaseSlot
}

// leaseSlot is one bucket's lease, or the fetch of it in progress.
type leaseSlot struct {
	ready chan struct{} // closed when id and err are set
	id    clientv3.LeaseID
	err   error
}

func newLeases(cli *clientv3.Client, k keys, bucket time.Duration) *leases {
	return &leases{cli: cli, keys: k, bucket: int64(bucket / time.Second), now: time.Now, slots: map[int64]*leaseSlot{}}
}

// bucketEnd returns the end, in Unix seconds, of the bucket of records that
// expire at exp.
func (l *leases) bucketEnd(exp time.Time) int64 {
	sec := exp.Unix()
	if exp.Nanosecond() > 0 {
		sec++
	}
	// Round up to a multiple of the bucket, also for negative seconds.
	r := sec % l.bucket
	if r < 0 {
		r += l.bucket
	}
	if r != 0 {
		sec += l.bucket - r
	}
	return sec
}

// forExpiry returns the lease for a record expiring at exp and the bucket it
// belongs to. The lease is 0 (none) when exp lies beyond etcd's longest TTL.
func (l *leases) forExpiry(ctx context.Context, exp time.Time) (clientv3.LeaseID, int64, error) {
	end := l.bucketEnd(exp)
	if end-l.now().Unix() > maxLeaseTTL {
		return clientv3.NoLease, end, nil
	}
	l.mu.Lock()
	s, ok := l.slots[end]
	if !ok {
		s = &leaseSlot{ready: make(chan struct{})}
		l.slots[end] = s
		l.prune()
		l.mu.Unlock()
		go l.fill(end, s)
	} else {
		l.mu.Unlock()
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return 0, end, ctx.Err()
	}
	if s.err != nil {
		return 0, end, s.err
	}
	return s.id, end, nil
}

// drop forgets the cached lease of bucket end if it is still id, after etcd
// said it does not know id.
func (l *leases) drop(end int64, id clientv3.LeaseID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.slots[end]; ok {
		select {
		case <-s.ready:
			if s.id == id || s.err != nil {
				delete(l.slots, end)
			}
		default:
		}
	}
}

// prune forgets buckets that ended over a bucket ago; l.mu is held.
func (l *leases) prune() {
	old := l.now().Unix() - l.bucket
	for end, s := range l.slots {
		if end < old {
			select {
			case <-s.ready:
				delete(l.slots, end)
			default:
			}
		}
	}
}

// fill fetches bucket end's lease from its key, or grants one and publishes
// it, and sets s. A failed slot is removed so that the next caller tries
// again.
func (l *leases) fill(end int64, s *leaseSlot) {
	ctx, cancel := context.WithTimeout(l.cli.Ctx(), leaseGrantTimeout)
	defer cancel()
	s.id, s.err = l.fetch(ctx, end)
	if s.err != nil {
		s.err = fmt.Errorf("lease for bucket %d: %w", end, s.err)
		l.mu.Lock()
		if l.slots[end] == s {
			delete(l.slots, end)
		}
		l.mu.Unlock()
	}
	close(s.ready)
}

func (l *leases) fetch(ctx context.Context, end int64) (clientv3.LeaseID, error) {
	key := l.keys.lease(end)
	resp, err := l.cli.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 1 {
		return parseLeaseID(resp.Kvs[0].Value)
	}
	ttl := max(end-l.now().Unix(), 1)
	g, err := l.cli.Grant(ctx, ttl)
	if err != nil {
		return 0, err
	}
	txn, err := l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.FormatInt(int64(g.ID), 16), clientv3.WithLease(g.ID))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return 0, err
	}
	if txn.Succeeded {
		return g.ID, nil
	}
	// Another process published its lease for the bucket first: use that
	// one, and give ours back (it holds nothing; if the revoke fails, it
	// simply expires with the bucket).
	_, _ = l.cli.Revoke(ctx, g.ID)
	kvs := txn.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 {
		return 0, errors.New("the bucket's lease vanished while it was published")
	}
	return parseLeaseID(kvs[0].Value)
}

func parseLeaseID(v []byte) (clientv3.LeaseID, error) {
	id, err := strconv.ParseInt(string(v), 16, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: lease id %q", ErrCorrupt, v)
	}
	return clientv3.LeaseID(id), nil
}

// isLeaseNotFound reports whether etcd refused a write because a lease it
// names no longer exists.
func isLeaseNotFound(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound)
}
