package node

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/crashpoint"
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
//
// Every step can fail or be cut short by a crash, and a retry must finish
// the work, not mistake it for someone else's. So the fence file carries a
// random id of the data directory, and every canary carries a proof made
// with it (its Fingerprint, an HMAC of the canary's name under the id): a
// canary found in the store with our proof is our own earlier attempt, and
// is adopted. The canaries to release are listed in the fence file until
// they are released, so that a crash between the file write and the release
// leaves no canary behind for ever.

// FenceFile is the name of the data directory's rollback fence.
const FenceFile = "fence"

const (
	fenceNamespace = spent.ReservedPrefix + "fence"
	// fenceVersion is the version of the fence file this server writes.
	// Version 1 (no id, canaries without proof) is read and upgraded.
	fenceVersion = 2
	// canaryLife is the life of a canary record (its lease is half of it):
	// it lives until the next canary releases it.
	canaryLife = 100 * 365 * 24 * time.Hour
	// fenceIDLen is the size of a data directory's id, in bytes.
	fenceIDLen = 32
)

// ErrStoreWentBack is returned, wrapped in a message that names the fence
// and the way out, when the store does not hold the canary the fence names:
// it was restored from an earlier copy, or is another store.
var ErrStoreWentBack = errors.New("the store went backwards")

// ErrFenceMissing is returned, wrapped, when the fence file is missing
// beside a store that holds records and Config.NewFence is not set.
var ErrFenceMissing = errors.New("the rollback fence is missing")

// ErrNewFence is returned, wrapped, when Config.NewFence is set beside a
// fence that already names a canary.
var ErrNewFence = errors.New("node: NewFence beside an existing fence")

// canaryRef names one canary record in the store.
type canaryRef struct {
	Key spent.Hash `json:"key"`
	Seq spent.Seq  `json:"seq"`
}

// fenceState is the fence file's content.
type fenceState struct {
	Version int `json:"version"`
	// ID is the data directory's random id, in hex: the key of the proofs
	// its canaries and node lease carry.
	ID         string `json:"id"`
	Generation uint64 `json:"generation"`
	Node       uint32 `json:"node"`
	// Canary is the number of the newest canary, 0 before the first.
	Canary uint64 `json:"canary"`
	// Key is the newest canary's store key.
	Key spent.Hash `json:"key,omitzero"`
	// Seq is the canary record's seq: every claim this server acknowledged
	// before the canary was written has a lower seq.
	Seq spent.Seq `json:"seq"`
	// Release lists older canaries still to release.
	Release []canaryRef `json:"release,omitempty"`
}

// idBytes returns the id as bytes.
func (st *fenceState) idBytes() []byte {
	b, _ := hex.DecodeString(st.ID)
	return b
}

// newFenceState returns the state of a new fence: a new id from rnd,
// generation gen, no canary yet.
func newFenceState(rnd io.Reader, gen uint64, node uint32) (fenceState, error) {
	id := make([]byte, fenceIDLen)
	if _, err := io.ReadFull(rnd, id); err != nil {
		return fenceState{}, fmt.Errorf("fence: generating an id: %w", err)
	}
	return fenceState{Version: fenceVersion, ID: hex.EncodeToString(id), Generation: gen, Node: node}, nil
}

// canaryKey is the store key of canary n of node in generation gen of the
// data directory with id. It is not keyed by the secret, so it names the
// same record whatever the secret, and it differs between data directories,
// so that a node taken over by a new data directory never meets the
// canaries of the old one.
func canaryKey(id []byte, gen uint64, node uint32, n uint64) spent.Hash {
	h := sha256.New()
	h.Write([]byte("spent: fence canary v2\x00"))
	h.Write(id)
	h.Write(canaryName(gen, node, n))
	var k spent.Hash
	copy(k[:], h.Sum(nil))
	return k
}

// canaryKeyV1 is the store key of a canary of a version 1 fence.
func canaryKeyV1(gen uint64, node uint32, n uint64) spent.Hash {
	sum := sha256.Sum256(append([]byte("spent: fence canary v1\x00"), canaryName(gen, node, n)...))
	var h spent.Hash
	copy(h[:], sum[:])
	return h
}

// canaryName encodes (gen, node, n).
func canaryName(gen uint64, node uint32, n uint64) []byte {
	var b [8 + 4 + 8]byte
	binary.BigEndian.PutUint64(b[:], gen)
	binary.BigEndian.PutUint32(b[8:], node)
	binary.BigEndian.PutUint64(b[12:], n)
	return b[:]
}

// proof is what only the holder of id can write into a record of the given
// kind ("canary", "node lease") and name.
func proof(id []byte, kind string, name []byte) []byte {
	m := hmac.New(sha256.New, id)
	m.Write([]byte("spent: fence proof v1\x00"))
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write(name)
	return m.Sum(nil)
}

// canaryPlace is the Place of a canary record: it names the canary, so that
// an operator (and epoch retire) can tell whose it is.
func canaryPlace(gen uint64, node uint32, n uint64) string {
	return fmt.Sprintf("fence %d/%d/%d", gen, node, n)
}

// fence advances the rollback fence of one server.
type fence struct {
	path  string
	store spent.Store
	node  uint32
	now   func() time.Time
	log   *slog.Logger
	// writeFile writes the fence file atomically.
	writeFile func(path string, data []byte, perm os.FileMode) error
	// lease is the node's lease on a shared store, renewed at each
	// advance, or nil.
	lease *nodeLease

	mu    sync.Mutex
	state fenceState
}

// readFenceState reads the fence file at path. A missing file is reported
// with fs.ErrNotExist in the chain. A version 1 file is returned upgraded to
// the current version, with a new id from rnd, and upgraded reports it: the
// caller writes it back before any canary is written under the new id.
func readFenceState(path string, rnd io.Reader) (st fenceState, upgraded bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return st, false, err
		}
		return st, false, fmt.Errorf("fence: %w", err)
	}
	damaged := func(why string) error {
		return fmt.Errorf("fence %s is damaged (%s). Restore it from a backup of the data directory. If no copy is left, "+
			"the store can only be checked by hand: read \"The rollback fence\" in docs/operations.md, then remove %s and start "+
			"once with --new-fence, which accepts the store as it is now", path, why, path)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return fenceState{}, false, damaged(err.Error())
	}
	if st.Generation == 0 || st.Node == 0 {
		return fenceState{}, false, damaged("no generation or node")
	}
	switch st.Version {
	case 1:
		id, err := newFenceState(rnd, st.Generation, st.Node)
		if err != nil {
			return fenceState{}, false, err
		}
		st.Version, st.ID = fenceVersion, id.ID
		if st.Canary > 0 {
			st.Key = canaryKeyV1(st.Generation, st.Node, st.Canary)
		}
		return st, true, nil
	case fenceVersion:
		if id, err := hex.DecodeString(st.ID); err != nil || len(id) != fenceIDLen {
			return fenceState{}, false, damaged("its id is not 32 bytes of hex")
		}
		if st.Canary > 0 && (st.Key == spent.Hash{} || st.Seq.IsZero()) {
			return fenceState{}, false, damaged("its canary has no key or seq")
		}
		return st, false, nil
	}
	return fenceState{}, false, damaged(fmt.Sprintf("version %d", st.Version))
}

// save writes st to the fence file.
func (f *fence) save(st fenceState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if err := f.writeFile(f.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	return nil
}

// check returns errStoreWentBack, wrapped with an explanation, when the
// store lacks the canary the fence names.
func (f *fence) check(ctx context.Context) error {
	st := f.state
	if st.Canary == 0 {
		return nil
	}
	_, err := f.store.Get(ctx, st.Key, f.now())
	if errors.Is(err, spent.ErrNotFound) {
		return fmt.Errorf("%w: the fence %s names canary %d of node %d (seq %s, generation %d), and the store does not hold it. "+
			"The store was restored from an earlier snapshot, or is another store. Serving from it would accept again "+
			"everything claimed since the snapshot: spent tokens, paid requests. Point --store at the store this server "+
			"was using. If the loss is deliberate, read \"Restoring a store\" in docs/operations.md, then run spent epoch retire",
			ErrStoreWentBack, f.path, st.Canary, st.Node, st.Seq, st.Generation)
	}
	if err != nil {
		return fmt.Errorf("fence: reading the canary: %w", err)
	}
	return nil
}

// advance writes the next canary to the store, durably, then the fence file
// that names it, then releases the canaries it supersedes. On a shared store
// it first renews the node's lease. A canary of that number already in the
// store with this data directory's proof is an earlier attempt cut short (a
// crash, a failed file write, an ambiguous store error) and is adopted. The
// in-memory state changes only once the file is written, so a failed
// advance is simply tried again.
func (f *fence) advance(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	n := uint64(1)
	if f.lease != nil {
		n = 2
	}
	first, err := f.store.ReserveSeq(ctx, f.node, n)
	if err != nil {
		return fmt.Errorf("fence: reserving a seq: %w", err)
	}
	crashpoint.Hit("fence.seq-reserved")
	if f.lease != nil {
		if err := f.lease.acquire(ctx, spent.Seq{Node: f.node, Counter: first + 1}, now); err != nil {
			return err
		}
		crashpoint.Hit("fence.lease-renewed")
	}

	next := f.state
	next.Release = slices.Clone(f.state.Release)
	next.Node = f.node
	next.Canary++
	id := next.idBytes()
	name := canaryName(next.Generation, next.Node, next.Canary)
	next.Key = canaryKey(id, next.Generation, next.Node, next.Canary)
	pf := proof(id, "canary", name)
	rec := spent.Record{
		Namespace: fenceNamespace, Hash: next.Key, FirstSeen: now,
		Place: canaryPlace(next.Generation, next.Node, next.Canary), Fingerprint: pf,
		State: spent.StatePending, ExpiresAt: now.Add(canaryLife), LeaseUntil: now.Add(canaryLife / 2),
		Seq: spent.Seq{Node: f.node, Counter: first},
	}
	res, err := f.store.Claim(ctx, spent.ClaimOp{Record: rec, Now: now})
	if err != nil {
		return fmt.Errorf("fence: writing canary %d: %w", next.Canary, err)
	}
	crashpoint.Hit("fence.canary-written")
	if !res.Inserted {
		if !hmac.Equal(res.Record.Fingerprint, pf) {
			// The key is derived from this data directory's id: only a
			// forged or damaged record can sit there.
			return fmt.Errorf("fence: the store holds a record at the key of canary %d (%s) that this data directory did not write "+
				"(place %q, seq %s): the store or %s was tampered with. Do not start until that is explained",
				next.Canary, next.Key, res.Record.Place, res.Record.Seq, f.path)
		}
		f.log.Info("fence: adopting a canary written by an earlier attempt that did not record it", "canary", next.Canary, "seq", res.Record.Seq)
		rec = res.Record
	}
	next.Seq = rec.Seq
	if f.state.Canary > 0 {
		next.Release = append(next.Release, canaryRef{Key: f.state.Key, Seq: f.state.Seq})
	}
	if err := f.save(next); err != nil {
		return err
	}
	crashpoint.Hit("fence.file-written")
	f.state = next
	f.releaseOld(ctx, now)
	crashpoint.Hit("fence.released")
	return nil
}

// releaseOld releases the canaries the fence file lists as superseded. One
// that cannot be released now stays listed, for the next advance.
func (f *fence) releaseOld(ctx context.Context, now time.Time) {
	var kept []canaryRef
	for _, r := range f.state.Release {
		err := f.store.Release(ctx, r.Key, r.Seq, now)
		switch {
		case err == nil, errors.Is(err, spent.ErrNotFound), errors.Is(err, spent.ErrSeqMismatch), errors.Is(err, spent.ErrNotPending):
		default:
			kept = append(kept, r)
			if ctx.Err() == nil {
				// (A shutdown that cut the release short is no news:
				// the last advance releases it.)
				f.log.Warn("fence: releasing an old canary failed; retrying at the next advance", "key", r.Key, "seq", r.Seq, "err", err)
			}
		}
	}
	f.state.Release = kept
}

// run advances the fence every interval until ctx ends. A failure is logged
// and retried at the next tick: the fence then lags, which widens the window
// of an unnoticed restore but never refuses a good store. A renewal of the
// node lease that finds another server's lease (ErrNodeInUse) is no passing
// failure: run reports it to lost and stops.
func (f *fence) run(ctx context.Context, every time.Duration, lost func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := f.advance(ctx); err != nil && ctx.Err() == nil {
				if errors.Is(err, ErrNodeInUse) {
					lost(err)
					return
				}
				f.log.Warn("fence: advancing failed; retrying at the next interval", "err", err)
			}
		}
	}
}

// close releases the node's lease, at a graceful shutdown, so that another
// server may take the node at once.
func (f *fence) close(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease == nil {
		return
	}
	if err := f.lease.release(ctx, f.now()); err != nil {
		f.log.Warn("fence: releasing the node's lease; it runs out by itself", "node", f.node, "until", f.lease.held.LeaseUntil, "err", err)
	}
}

// fenceStart is what a server needs to start its fence.
type fenceStart struct {
	data  string
	store spent.Store
	// shared is set for a store that other servers may share: the node
	// then needs a lease.
	shared bool
	// storeHadFiles is set when the embedded store's directory held files
	// before it was opened.
	storeHadFiles bool
	// newFence is the --new-fence flag.
	newFence  bool
	secret    []byte
	node      uint32
	interval  time.Duration
	now       func() time.Time
	rnd       io.Reader
	log       *slog.Logger
	writeFile func(string, []byte, os.FileMode) error
	// beforeWrite, when set, is called by open once the checks that only
	// read have passed, before the first write to the fence or the store
	// (Open writes a new secret there).
	beforeWrite func() error
}

// fenceFilePath returns the fence file of the data directory dir.
func fenceFilePath(dir string) string { return filepath.Join(dir, FenceFile) }

// loadFence reads the fence of the data directory before the store is
// opened: a damaged fence is refused at once, and a version 1 fence is
// upgraded and written back before anything is written under its new id.
// missing reports a data directory without a fence. --new-fence is refused
// beside a fence that names a canary; a fence without one is what a first
// start left that was refused or cut short before its first canary.
func (s *fenceStart) loadFence() (st fenceState, missing bool, err error) {
	path := fenceFilePath(s.data)
	st, upgraded, err := readFenceState(path, s.rnd)
	if errors.Is(err, fs.ErrNotExist) {
		return st, true, nil
	}
	if err != nil {
		return st, false, err
	}
	if s.newFence && st.Canary > 0 {
		return st, false, &refusal{fmt.Sprintf("--new-fence: %s exists: remove --new-fence (it is for the first start of a data directory without a fence only)", path), ErrNewFence}
	}
	if upgraded {
		f := &fence{path: path, writeFile: s.writeFile}
		if err := f.save(st); err != nil {
			return st, false, fmt.Errorf("upgrading the fence: %w", err)
		}
		s.log.Info("fence: upgraded to version 2 (a data directory id, canaries with proof)", "path", path)
		crashpoint.Hit("fence.upgraded")
	}
	return st, false, nil
}

// open starts the fence from the state loadFence read, once the store is
// open: a missing fence beside a store that holds records is refused unless
// --new-fence, a new fence is written before anything else goes into the
// store, the node's lease is taken on a shared store, the store is checked
// against the fence, and the fence advances. The secret is checked against
// the store first, and recorded in it once the fence is written: it returns
// ErrSecretMismatch when the store was set up with another secret.
func (s *fenceStart) open(ctx context.Context, st fenceState, missing bool, where string) (*fence, error) {
	f := &fence{path: fenceFilePath(s.data), store: s.store, node: s.node, now: s.now, log: s.log, writeFile: s.writeFile}
	recorded, err := findSecretCheck(ctx, s.store, s.secret, s.now())
	if err != nil {
		return nil, err
	}
	if missing {
		if s.storeHadFiles || recorded {
			if !s.newFence {
				return nil, fmt.Errorf("%w: %s is missing, but the store (%s) already holds records. The fence is how this server "+
					"notices a store rolled back to an earlier snapshot; starting without it would accept the store as it is now, "+
					"even rolled back, and answer fresh again every key claimed since that snapshot. Restore %s from the backup of "+
					"the data directory. If this data directory is new on purpose (a new server joining a shared store) or its "+
					"fence is known to be lost while the store is intact, start once with --new-fence",
					ErrFenceMissing, f.path, where, f.path)
			}
			s.log.Warn("--new-fence: a new fence begins beside a store that holds records; the store is accepted as it is now", "path", f.path, "store", where)
		}
	}
	if s.beforeWrite != nil {
		if err := s.beforeWrite(); err != nil {
			return nil, err
		}
	}
	if missing {
		st, err = newFenceState(s.rnd, 1, s.node)
		if err != nil {
			return nil, err
		}
		if err := f.save(st); err != nil {
			return nil, err
		}
		s.log.Info("fence: a new fence begins", "path", f.path)
	}
	created, err := checkSecret(ctx, s.store, s.secret, s.node, s.now())
	if err != nil {
		return nil, err
	}
	if created {
		s.log.Info("recorded a MAC of the secret in the store: the first server on it", "store", where)
	}
	f.state = st
	if s.shared {
		if err := f.takeLease(ctx, s.data, s.interval); err != nil {
			return nil, err
		}
		crashpoint.Hit("fence.lease-taken")
	}
	if err := f.check(ctx); err != nil {
		f.close(ctx)
		return nil, err
	}
	if err := f.advance(ctx); err != nil {
		f.close(ctx)
		return nil, err
	}
	return f, nil
}

// takeLease takes the node's lease on a shared store for the data
// directory data, under the proof of f's id; the lease lasts three fence
// intervals and is renewed at each advance.
func (f *fence) takeLease(ctx context.Context, data string, interval time.Duration) error {
	f.lease = newNodeLease(f.store, f.node, f.state.idBytes(), leasePlace(data), 3*interval)
	first, err := f.store.ReserveSeq(ctx, f.node, 1)
	if err != nil {
		return fmt.Errorf("node lease: %w", err)
	}
	return f.lease.acquire(ctx, spent.Seq{Node: f.node, Counter: first}, f.now())
}

// leasePlace says who holds a node lease: host, pid and data directory.
func leasePlace(data string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("host %s, pid %d, data %s", host, os.Getpid(), data)
}

// releaseOlderGenerations releases the canaries of this data directory's
// node and earlier generations still in the store (those of the snapshot a
// store was restored from, say): once a new generation's fence is written
// they are of no use. It recognises them by their proof, and returns how
// many it released.
func (f *fence) releaseOlderGenerations(ctx context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	// Every canary's lease ends canaryLife/2 after it was written, and it
	// lives canaryLife: this lists all those of the last canaryLife/4.
	recs, err := f.store.ListPending(ctx, fenceNamespace, now.Add(canaryLife/4*3), 10000)
	if err != nil {
		return 0, fmt.Errorf("fence: listing canaries: %w", err)
	}
	id := f.state.idBytes()
	released := 0
	for _, rec := range recs {
		var gen, n uint64
		var node uint32
		if _, err := fmt.Sscanf(rec.Place, "fence %d/%d/%d", &gen, &node, &n); err != nil {
			continue
		}
		if node != f.node || gen >= f.state.Generation || !hmac.Equal(rec.Fingerprint, proof(id, "canary", canaryName(gen, node, n))) {
			continue
		}
		err := f.store.Release(ctx, rec.Hash, rec.Seq, now)
		if err != nil && !errors.Is(err, spent.ErrNotFound) {
			return released, fmt.Errorf("fence: releasing canary %d of generation %d: %w", n, gen, err)
		}
		released++
	}
	return released, nil
}
