package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spentledger/spent"
)

// The rollback fence. A ledger restored from an earlier snapshot forgets the
// claims made since: spent tokens would be accepted again and paid requests
// run again. So the server keeps, outside the store (in the data directory),
// a fence: the generation and the number of the newest canary, a record it
// wrote to the store and made durable before writing the fence. On start the
// canary the fence names must be in the store; if it is not, the store went
// backwards (or is another store) and the server refuses to start.
//
// The server writes a new canary at start, every fence interval and at a
// graceful shutdown, and then releases the previous one, so at most two
// canaries per node are live. A restore of a snapshot taken after the newest
// canary (less than one interval before a crash) goes unnoticed; anything
// older is refused.

const (
	fenceFile      = "fence"
	fenceNamespace = spent.ReservedPrefix + "fence"
	// canaryLife is the life of a canary record (its lease is half of it):
	// it lives until the next canary releases it.
	canaryLife = 100 * 365 * 24 * time.Hour
)

// errStoreWentBack says that the store does not hold the canary the fence
// names.
var errStoreWentBack = errors.New("the store went backwards")

// fenceState is the fence file's content.
type fenceState struct {
	Version    int    `json:"version"`
	Generation uint64 `json:"generation"`
	Node       uint32 `json:"node"`
	Canary     uint64 `json:"canary"`
	// Seq is the canary record's seq: every claim this server acknowledged
	// before the canary was written has a lower seq.
	Seq spent.Seq `json:"seq"`
}

// canaryKey is the store key of canary n of node in generation gen. It is
// not keyed by the secret, so it names the same record whatever the secret.
func canaryKey(gen uint64, node uint32, n uint64) spent.Hash {
	var b [8 + 4 + 8]byte
	binary.BigEndian.PutUint64(b[:], gen)
	binary.BigEndian.PutUint32(b[8:], node)
	binary.BigEndian.PutUint64(b[12:], n)
	sum := sha256.Sum256(append([]byte("spent: fence canary v1\x00"), b[:]...))
	var h spent.Hash
	copy(h[:], sum[:])
	return h
}

// fence advances the rollback fence of one server.
type fence struct {
	path  string
	store spent.Store
	node  uint32
	now   func() time.Time
	log   *slog.Logger

	mu    sync.Mutex
	state fenceState
}

// openFence reads the fence in dir and checks the store against it. A
// missing fence is a first start: the fence begins now. It returns
// errStoreWentBack, wrapped with an explanation, when the store lacks the
// canary the fence names.
func openFence(ctx context.Context, dir string, store spent.Store, node uint32, now func() time.Time, log *slog.Logger) (*fence, error) {
	f := &fence{path: filepath.Join(dir, fenceFile), store: store, node: node, now: now, log: log}
	st, err := readFenceState(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.state = fenceState{Version: 1, Generation: 1, Node: node}
	case err != nil:
		return nil, err
	default:
		f.state = st
		key := canaryKey(f.state.Generation, f.state.Node, f.state.Canary)
		_, err := store.Get(ctx, key, now())
		if errors.Is(err, spent.ErrNotFound) {
			return nil, fmt.Errorf("%w: the fence %s names canary %d of node %d (seq %s, generation %d), and the store does not hold it. "+
				"The store was restored from an earlier snapshot, or is another store. Serving from it would accept again "+
				"everything claimed since the snapshot: spent tokens, paid requests. Point --store at the store this server "+
				"was using. If the loss is deliberate, read \"Restoring a store\" in docs/operations.md, then run spent epoch retire",
				errStoreWentBack, f.path, f.state.Canary, f.state.Node, f.state.Seq, f.state.Generation)
		}
		if err != nil {
			return nil, fmt.Errorf("fence: reading the canary: %w", err)
		}
	}
	if err := f.advance(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// readFenceState reads the fence file at path. A missing file is reported
// with fs.ErrNotExist in the chain.
func readFenceState(path string) (fenceState, error) {
	var st fenceState
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return st, err
		}
		return st, fmt.Errorf("fence: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Version != 1 || st.Generation == 0 || st.Node == 0 {
		return fenceState{}, fmt.Errorf("fence %s is damaged (%v): restore it from a backup of the data directory; do not delete it, or a store restored from a snapshot would go unnoticed", path, err)
	}
	return st, nil
}

// advance writes the next canary to the store, durably, then the fence file
// that names it, then releases the previous canary.
func (f *fence) advance(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	first, err := f.store.ReserveSeq(ctx, f.node, 1)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	next := f.state
	next.Node = f.node
	next.Canary++
	next.Seq = spent.Seq{Node: f.node, Counter: first}
	now := f.now()
	rec := spent.Record{
		Namespace: fenceNamespace, Key: canaryKey(next.Generation, next.Node, next.Canary), FirstSeen: now,
		Place: "fence", State: spent.StatePending, ExpiresAt: now.Add(canaryLife), LeaseUntil: now.Add(canaryLife / 2),
		Seq: next.Seq,
	}
	res, err := f.store.Claim(ctx, spent.ClaimOp{Record: rec, Now: now})
	if err != nil {
		return fmt.Errorf("fence: writing canary %d: %w", next.Canary, err)
	}
	if !res.Inserted && res.Record.Seq != rec.Seq {
		// A canary of this number exists already: another server runs with
		// this node and generation over the same store, or the fence file
		// is older than the store. Either way the fence cannot order them.
		return fmt.Errorf("fence: canary %d of node %d is already in the store: another server with node %d shares this store, or %s was restored from an older backup; give every server its own node",
			next.Canary, f.node, f.node, f.path)
	}
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(f.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	prev := f.state
	f.state = next
	if prev.Canary > 0 && prev.Node == f.node {
		err := f.store.Release(ctx, canaryKey(prev.Generation, prev.Node, prev.Canary), prev.Seq, now)
		if err != nil && !errors.Is(err, spent.ErrNotFound) {
			// The old canary only lingers until it expires; the fence holds.
			f.log.Warn("fence: releasing the previous canary", "canary", prev.Canary, "err", err)
		}
	}
	return nil
}

// run advances the fence every interval until ctx ends. A failure is logged
// and retried at the next tick: the fence then lags, which widens the window
// of an unnoticed restore but never refuses a good store.
func (f *fence) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := f.advance(ctx); err != nil && ctx.Err() == nil {
				f.log.Warn("fence: advancing", "err", err)
			}
		}
	}
}
