package node

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/spentledger/spent"
)

// The node lease. Servers sharing a store must each have their own node:
// the node is the first half of every seq they write and names their fence's
// canaries. So a server on a shared store holds a lease on its node, a
// pending record at a fixed key per node, carrying its data directory's
// proof. It takes the lease at start, renews it at each fence advance and
// releases it at a graceful shutdown. A server that finds a live lease with
// another proof refuses to start; one that finds its own (a restart after
// kill -9) takes it over.
//
// The store offers no compare-and-swap, but its Claim judges a lease by the
// caller's time: a renewal claims the key "at" the end of the lease it holds,
// which replaces that record and no later one. A server that took the node
// after the lease ran out wrote a record whose lease ends later still, so
// the renewal finds it and fails instead of overwriting it. This relies on
// the servers' clocks agreeing to well within the lease.

// nodeLeaseNamespace holds the node leases.
const nodeLeaseNamespace = spent.ReservedPrefix + "node"

// nodeLeaseKey is the store key of node's lease.
func nodeLeaseKey(node uint32) spent.Hash {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], node)
	sum := sha256.Sum256(append([]byte("spent: node lease v1\x00"), b[:]...))
	var h spent.Hash
	copy(h[:], sum[:])
	return h
}

// ErrNodeInUse is returned, wrapped in a message that names the holder,
// when another data directory holds the lease of the node on a shared
// store.
var ErrNodeInUse = errors.New("node in use")

// nodeInUseError is ErrNodeInUse with the lease found.
type nodeInUseError struct {
	node  uint32
	lease spent.Record
	now   time.Time
}

func (e *nodeInUseError) Error() string {
	return fmt.Sprintf("node %d is in use on this store by another server (%s): its lease runs out at %s (in %s), "+
		"and it renews it while it runs. Two servers with one node would mix their seqs and their rollback fences. "+
		"Give every server on a shared store its own node (the node key of the configuration); if that server has "+
		"stopped for good, start this one after its lease runs out",
		e.node, e.lease.Place, e.lease.LeaseUntil.UTC().Format(time.RFC3339), e.lease.LeaseUntil.Sub(e.now).Round(time.Second))
}

func (e *nodeInUseError) Unwrap() error { return ErrNodeInUse }

// nodeLease is one server's lease on its node.
type nodeLease struct {
	store spent.Store
	node  uint32
	key   spent.Hash
	proof []byte
	// place says who holds the lease, for the message another server gets.
	place string
	life  time.Duration
	// held is the lease record this server wrote last, zero before.
	held spent.Record
}

// newNodeLease returns the lease of node for the data directory with id.
func newNodeLease(store spent.Store, node uint32, id []byte, place string, life time.Duration) *nodeLease {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], node)
	return &nodeLease{store: store, node: node, key: nodeLeaseKey(node), proof: proof(id, "node lease", b[:]), place: place, life: life}
}

// acquire takes the lease, or renews the one held, until now+life, writing
// a record with seq. It returns a *nodeInUseError when another data
// directory holds a live lease.
func (l *nodeLease) acquire(ctx context.Context, seq spent.Seq, now time.Time) error {
	rec := spent.Record{
		Namespace: nodeLeaseNamespace, Hash: l.key, FirstSeen: now, Place: l.place, Fingerprint: l.proof,
		State: spent.StatePending, LeaseUntil: now.Add(l.life), ExpiresAt: now.Add(l.life), Seq: seq,
	}
	at := now
	if l.held.LeaseUntil.After(at) {
		at = l.held.LeaseUntil
	}
	for range 3 {
		if !rec.ExpiresAt.After(at) {
			// The lease held already runs longer than a new one would.
			return nil
		}
		res, err := l.store.Claim(ctx, spent.ClaimOp{Record: rec, Now: at, Retake: true})
		if err != nil {
			return fmt.Errorf("node lease: %w", err)
		}
		if res.Inserted {
			l.held = rec
			return nil
		}
		cur := res.Record
		if !hmac.Equal(cur.Fingerprint, l.proof) {
			return &nodeInUseError{node: l.node, lease: cur, now: now}
		}
		// Our own lease, from before a restart or an ambiguous write:
		// replace it at its end.
		l.held = cur
		at = cur.LeaseUntil
	}
	return fmt.Errorf("node lease: the lease of node %d kept changing under this server", l.node)
}

// release gives the lease up.
func (l *nodeLease) release(ctx context.Context, now time.Time) error {
	if l.held.Seq.IsZero() {
		return nil
	}
	err := l.store.Release(ctx, l.key, l.held.Seq, now)
	if err != nil && !errors.Is(err, spent.ErrNotFound) && !errors.Is(err, spent.ErrSeqMismatch) {
		return fmt.Errorf("node lease: %w", err)
	}
	l.held = spent.Record{}
	return nil
}
