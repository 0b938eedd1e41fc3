package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/atomicfile"
)

// Node is a ledger with what runs it safely: its data directory (locked,
// with its secret), the store's secret check and node lease, the rollback
// fence and the sweeper. Open one with [Open]; Close it once done.
type Node struct {
	cfg    Config
	log    *slog.Logger
	lock   *os.File
	secret []byte
	opened Opened
	fence  *fence
	ledger *spent.Ledger
	sweep  *sweeper
	lm     *ledgerMetrics // nil without a Registerer
	// newStoreDir is set while a failed start should empty the embedded
	// store's directory: it held nothing, and the new secret is unwritten.
	newStoreDir bool

	stopping atomic.Bool
	// lost is closed once the node's lease has gone to another server;
	// lostErr, written before, says how.
	lost     chan struct{}
	lostOnce sync.Once
	lostErr  error
	// stop ends the background work; done is closed once it has ended.
	stop context.CancelFunc
	done sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Open opens the node of cfg.Dir and starts its background work (the
// sweeper and the fence's periodic advance). In order, it locks the data
// directory, removes the temporary files of interrupted writes, reads the
// secret or generates one, loads the fence, opens the store with
// cfg.OpenStore, checks the store against the secret and the fence (taking
// the node lease on a shared store), advances the fence, starts the ledger
// and registers the metrics. A generated secret is written only once the
// store has opened and its read-only checks have passed, before anything is
// written to the store. It refuses, and leaves nothing open, when any step fails:
// see the package documentation for the refusals.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, lost: make(chan struct{})}
	// The lock comes first: nothing in the data directory is touched while
	// another process uses it.
	lock, err := lockDataDir(cfg.Dir, true, cfg.InUseHint)
	if err != nil {
		return nil, err
	}
	n.lock = lock
	if err := n.open(ctx); err != nil {
		n.abort()
		return nil, err
	}
	n.start()
	return n, nil
}

// open does the work of Open between the lock and the background work.
func (n *Node) open(ctx context.Context) error {
	cfg := n.cfg
	removeStaleFiles(cfg.Dir, n.log)
	storeHadFiles := false
	if cfg.EmbeddedDir != "" {
		ents, _ := os.ReadDir(cfg.EmbeddedDir)
		storeHadFiles = len(ents) > 0
	}
	// A new secret is written only once the store has opened and passed
	// the checks that read it (fst.beforeWrite), before anything is written
	// to the store or the fence: a start refused before then (a store that
	// cannot be reached, one set up with another secret) leaves none.
	secret, created, err := readOrNewSecret(cfg)
	if err != nil {
		return err
	}
	n.secret = secret
	fst := &fenceStart{
		data: cfg.Dir, shared: cfg.Shared, storeHadFiles: storeHadFiles, newFence: cfg.NewFence, secret: secret,
		node: cfg.Ledger.Node, interval: cfg.FenceInterval, now: cfg.Now, rnd: cfg.Rand, log: n.log, writeFile: cfg.WriteFile,
	}
	if created {
		n.newStoreDir = !storeHadFiles && ownStoreDir(cfg.Dir, cfg.EmbeddedDir) != ""
		fst.beforeWrite = func() error {
			if err := writeSecret(cfg, secret); err != nil {
				return err
			}
			n.newStoreDir = false
			n.log.Info("generated a new secret: this data directory starts a new epoch", "path", filepath.Join(cfg.Dir, SecretFile))
			return nil
		}
	}
	fstate, fenceMissing, err := fst.loadFence()
	if err != nil {
		return err
	}

	opened, err := cfg.OpenStore(ctx)
	if err != nil {
		// (opened.Store may hold a typed nil: it is not the node's to close.)
		return err
	}
	n.opened = opened
	if n.opened.Store == nil {
		return errors.New("node: OpenStore returned no store and no error")
	}
	fst.store = n.opened.Store
	if n.fence, err = fst.open(ctx, fstate, fenceMissing, n.opened.Kind+" at "+n.opened.Where); err != nil {
		if errors.Is(err, ErrSecretMismatch) {
			return fmt.Errorf("%w: servers sharing a store must share %s (copy it from a server already running on this store)",
				err, filepath.Join(cfg.Dir, SecretFile))
		}
		return err
	}
	lc := cfg.Ledger
	lc.Secret = secret
	if cfg.Registerer != nil {
		n.lm = newLedgerMetrics(lc.Namespaces)
		lc.Observer = spent.Observers(cfg.Ledger.Observer, n.lm)
	}
	if n.ledger, err = spent.NewLedger(ctx, n.opened.Store, lc); err != nil {
		return fmt.Errorf("starting ledger: %w", err)
	}
	n.sweep = newSweeper(n.ledger, cfg.SweepInterval, cfg.SweepBatch, n.log)
	return n.register()
}

// register registers the node's metrics with cfg.Registerer.
func (n *Node) register() error {
	reg := n.cfg.Registerer
	if reg == nil {
		return nil
	}
	cs := append(n.sweep.collectors(), n.lm.collectors()...)
	if n.opened.Collector != nil {
		cs = append(cs, n.opened.Collector)
	}
	if n.cfg.ProcessMetrics {
		cs = append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("node: registering metrics: %w", err)
		}
	}
	return nil
}

// start starts the sweeper and the fence's periodic advance.
func (n *Node) start() {
	ctx, stop := context.WithCancel(context.Background())
	n.stop = stop
	n.done.Add(2)
	go func() {
		defer n.done.Done()
		n.sweep.run(ctx)
	}()
	go func() {
		defer n.done.Done()
		n.fence.run(ctx, n.cfg.FenceInterval, n.loseLease)
	}()
}

// loseLease records that another server holds the node's lease (err, a
// renewal's ErrNodeInUse), once.
func (n *Node) loseLease(err error) {
	n.lostOnce.Do(func() {
		n.lostErr = fmt.Errorf("node %d lost its lease on the shared store while running: this server did not renew it in time "+
			"(paused, or cut off from the store, for longer than the lease) and another server took the node. This server must stop. %w",
			n.cfg.Ledger.Node, err)
		n.log.Error("node lease lost: stop this server", "err", n.lostErr)
		close(n.lost)
	})
}

// Lost returns a channel that is closed when the node has lost its lease on
// a shared store to another server: a renewal found the other server's
// lease (this one was paused, or cut off from the store, for longer than
// its lease, and the other took the node meanwhile). The server
// must then stop, since both would write seqs of one node: spent serve
// shuts down and exits with [Node.LostErr]. Ready fails from then on. On
// the embedded store, which holds no lease, it is never closed.
func (n *Node) Lost() <-chan struct{} { return n.lost }

// LostErr returns why the node's lease was lost, naming the server that
// holds it now, or nil while it is held.
func (n *Node) LostErr() error {
	select {
	case <-n.lost:
		return n.lostErr
	default:
		return nil
	}
}

// abort releases what a failed Open took, in reverse order.
func (n *Node) abort() {
	if n.fence != nil {
		n.fence.close(context.Background())
	}
	if n.opened.Store != nil {
		if err := n.opened.Store.Close(); err != nil {
			n.log.Warn("closing the store after a refused start", "err", err)
		}
	}
	if n.newStoreDir {
		// The embedded store was empty and its secret never written:
		// what opening it made holds no record, and left in place it would
		// make the next start refuse to generate a secret beside it.
		ents, _ := os.ReadDir(n.cfg.EmbeddedDir)
		for _, e := range ents {
			os.RemoveAll(filepath.Join(n.cfg.EmbeddedDir, e.Name()))
		}
	}
	n.lock.Close()
}

// Ledger returns the node's ledger.
func (n *Node) Ledger() *spent.Ledger { return n.ledger }

// Secret returns the data directory's HMAC secret, for what derives its own
// keys from it. Do not modify it.
func (n *Node) Secret() []byte { return n.secret }

// Store returns the store the node runs on, as OpenStore returned it.
func (n *Node) Store() Opened { return n.opened }

// Ready reports whether the node can serve: nil when a read of the store
// succeeds, an error once Drain or Close was called or when the store
// fails. It is what a readiness probe asks.
func (n *Node) Ready(ctx context.Context) error {
	if n.stopping.Load() {
		return errors.New("shutting down")
	}
	if err := n.LostErr(); err != nil {
		return err
	}
	// A read of a key nobody holds proves the store answers.
	_, err := n.opened.Store.Get(ctx, spent.Hash{}, n.ledger.Now())
	if err != nil && !errors.Is(err, spent.ErrNotFound) {
		return err
	}
	return nil
}

// Drain marks the node as shutting down: Ready fails from now on, while the
// ledger goes on serving the requests in flight. Call it when a graceful
// shutdown begins, before waiting for those requests, then Close.
func (n *Node) Drain() { n.stopping.Store(true) }

// Close stops the node: it drains it, stops the sweeper and the fence's
// periodic advance, writes a last canary (which covers every claim made so
// far), releases the node lease, closes the store and releases the data
// directory's lock. Call it once every request has finished. Later calls do
// nothing and return what the first returned.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.Drain()
		n.stop()
		n.done.Wait()
		// Every request has finished: a last canary covers all they wrote
		// (unless the node's lease is lost: an advance renews it first,
		// and would only fail again).
		if n.LostErr() == nil {
			if err := n.fence.advance(context.Background()); err != nil {
				n.log.Warn("fence: last advance before stopping", "err", err)
			}
		}
		n.fence.close(context.Background())
		if err := n.opened.Store.Close(); err != nil {
			n.log.Error("closing store", "err", err)
			n.closeErr = fmt.Errorf("closing store: %w", err)
		}
		n.lock.Close()
	})
	return n.closeErr
}

// removeStaleFiles removes the temporary files that a write killed in the
// middle left in the data directory, and logs each.
func removeStaleFiles(dir string, log *slog.Logger) {
	removed, err := atomicfile.RemoveStale(dir)
	for _, p := range removed {
		log.Info("removed a temporary file left by an interrupted write", "path", p)
	}
	if err != nil {
		log.Warn("removing temporary files left by interrupted writes", "err", err)
	}
}
