package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/spentledger/spent"
)

// Generation is where the fence stands after [Retire]: its generation and
// its newest canary.
type Generation struct {
	// Generation is the fence's new generation.
	Generation uint64
	// Canary is the number of the canary written in it.
	Canary uint64
	// Seq is the canary record's seq.
	Seq spent.Seq
}

// Retire ends the current epoch of the data directory cfg.Dir, with no node
// running on it: it accepts the store as it is now, the only way forward
// once Open refuses the store as rolled back. It locks the data directory
// (which must exist), reads its secret, loads the fence, opens the store,
// checks the secret against it, takes the node lease on a shared store, and
// calls work, which does what the epoch's end means to the caller (rotate
// keys, empty namespaces). Then it starts a new fence generation, writes
// its first canary and releases the canaries of earlier generations, and
// closes the store and the lock.
//
// Each step can be cut short (a failure, a crash) and a rerun finishes the
// work, provided work is itself safe to run again: the new generation's
// canary is found with the data directory's proof and adopted, and the old
// canaries are released by whichever run gets there. An error that a rerun
// may cure says "run spent epoch retire again".
func Retire(ctx context.Context, cfg Config, work func(ctx context.Context, store spent.Store, secret []byte) error) (Generation, error) {
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return Generation{}, err
	}
	log := cfg.Logger
	lock, err := lockDataDir(cfg.Dir, false, "stop the server first")
	if err != nil {
		return Generation{}, fmt.Errorf("epoch retire: %w", err)
	}
	defer lock.Close()
	removeStaleFiles(cfg.Dir, log)
	secret, err := readSecret(filepath.Join(cfg.Dir, SecretFile))
	if err != nil {
		return Generation{}, fmt.Errorf("epoch retire needs the data directory of a server: %w", err)
	}
	f := &fence{path: fenceFilePath(cfg.Dir), node: cfg.Ledger.Node, now: cfg.Now, log: log, writeFile: cfg.WriteFile}
	old, err := retireLoadFence(f, cfg)
	if err != nil {
		return Generation{}, err
	}

	opened, err := cfg.OpenStore(ctx)
	if err != nil {
		return Generation{}, err
	}
	defer opened.Store.Close()
	f.store = opened.Store
	if _, err := checkSecret(ctx, opened.Store, secret, cfg.Ledger.Node, cfg.Now()); err != nil {
		if errors.Is(err, ErrSecretMismatch) {
			return Generation{}, err
		}
		return Generation{}, retireAgain(err)
	}
	f.state = old
	if cfg.Shared {
		defer f.close(context.Background())
		if err := f.takeLease(ctx, cfg.Dir, cfg.FenceInterval); err != nil {
			if errors.Is(err, ErrNodeInUse) {
				return Generation{}, err
			}
			return Generation{}, retireAgain(err)
		}
	}
	if err := work(ctx, opened.Store, secret); err != nil {
		return Generation{}, retireAgain(err)
	}
	return retireFence(ctx, f, old, log)
}

// retireAgain says that a rerun of epoch retire finishes what err cut
// short.
func retireAgain(err error) error {
	return fmt.Errorf("epoch retire did not finish: %w. Nothing is lost: run spent epoch retire again to finish it", err)
}

// retireLoadFence reads the fence epoch retire starts from. A version 1
// fence is upgraded and written back first: its new id must not change
// between a run and its rerun. A missing or unreadable fence starts after
// generation 1 with a new id.
func retireLoadFence(f *fence, cfg Config) (fenceState, error) {
	old, upgraded, err := readFenceState(f.path, cfg.Rand)
	switch {
	case err == nil && upgraded:
		if err := f.save(old); err != nil {
			return old, fmt.Errorf("epoch retire: upgrading the fence: %w; nothing has changed yet: run spent epoch retire again", err)
		}
	case err != nil:
		if !errors.Is(err, fs.ErrNotExist) {
			cfg.Logger.Warn("epoch retire: the old fence is unreadable; starting after generation 1", "err", err)
		}
		return newFenceState(cfg.Rand, 1, cfg.Ledger.Node)
	}
	return old, nil
}

// retireFence starts the generation after old's and writes its first
// canary. The new generation keeps old's id: a rerun after a crash finds
// its canary with this data directory's proof. The old generation's canary
// is released once the new fence is written.
func retireFence(ctx context.Context, f *fence, old fenceState, log *slog.Logger) (Generation, error) {
	f.state = fenceState{Version: fenceVersion, ID: old.ID, Generation: old.Generation + 1, Node: f.node, Release: old.Release}
	if old.Canary > 0 {
		f.state.Release = append(f.state.Release, canaryRef{Key: old.Key, Seq: old.Seq})
	}
	if err := f.advance(ctx); err != nil {
		return Generation{}, retireAgain(err)
	}
	if n, err := f.releaseOlderGenerations(ctx); err != nil {
		log.Warn("epoch retire: releasing the canaries of earlier generations; they stay in the store, harmless", "released", n, "err", err)
	}
	log.Info("epoch retired", "generation", f.state.Generation)
	return Generation{Generation: f.state.Generation, Canary: f.state.Canary, Seq: f.state.Seq}, nil
}
