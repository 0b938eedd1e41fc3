package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/internal/crashpoint"
	"github.com/spentledger/spent/node"
	"github.com/spentledger/spent/pebble"
)

// retiredDir is where epoch retire moves the issuers' keys, under the data
// directory.
const retiredDir = "retired"

func (m *Main) epochCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "epoch",
		Short: "Start a new epoch (operators, with the server stopped)",
		Long: `An epoch is what a data directory's fence, secret and issuing keys vouch for.
"spent epoch retire" ends the current one: the only way forward after the
store went backwards (a restored snapshot) and the server refuses to start.`,
	}
	c.AddCommand(m.epochRetireCommand())
	return c
}

func (m *Main) epochRetireCommand() *cobra.Command {
	var configPath, data, storeURL string
	var yes, acceptDamage bool
	c := &cobra.Command{
		Use:   "retire --yes [--accept-damage] [--config FILE] [--data DIR] [--store DSN]",
		Short: "Rotate every issuing key and move the fence to a new generation",
		Long: `Retire the current epoch, with the server stopped. It

  - moves the Privacy Pass and ecash issuing keys of the data directory aside
    (to DATA/retired/), so that the next start makes new keys: every token of
    the old keys is refused from then on, before the ledger is consulted;
  - empties the token namespaces of the configuration: the [privacypass]
    namespace and the [ecash] spend namespace lose every record, live or not
    (harmless: the tokens they name can no longer be presented), and the
    command prints how many each lost. It reads every record of the store to
    find them. The [ecash] issue namespace is kept: a challenge is valid
    until its own expiry whatever the keys, so its record must stay until
    then (challenge_ttl + grace), or the challenge could be used twice;
  - starts a new fence generation and writes its first canary into the store,
    so that the server accepts the store as it now is.

Keys of echo and refuse namespaces are not tokens and cannot be rotated: a
store restored from a snapshot has forgotten what was claimed since, and
retiring the epoch accepts that loss for them. Decide that first
(docs/operations.md, "Restoring a store").

An embedded store that spent refuses as damaged (its MANIFEST or newest WAL
holds less than it acknowledged) is retired the same way with
--accept-damage: the store is opened with what survived, and the keys of
echo and refuse namespaces it lost may be claimed fresh again. Copy the
damaged directory aside first (docs/operations.md, "A damaged store").`,
		Example: `  spent epoch retire --yes --data /var/lib/spent --config /etc/spent.toml`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg := defaultServeConfig()
			if configPath != "" {
				var err error
				if cfg, err = loadConfig(configPath, m.getenv); err != nil {
					return &usageError{err}
				}
			}
			if c.Flags().Changed("data") {
				cfg.Data = data
			}
			if c.Flags().Changed("store") {
				if _, err := storeKind(storeURL); err != nil {
					return &usageError{err}
				}
				cfg.StoreURL = storeURL
			}
			if !yes {
				return usagef("epoch retire rotates every issuing key and accepts the store as it is now: add --yes")
			}
			cfg.Store.AcceptDamage = acceptDamage
			m.run = func(ctx context.Context) error { return m.retireEpoch(ctx, cfg) }
			return nil
		},
	}
	f := c.Flags()
	f.StringVarP(&configPath, "config", "c", "", "the server's configuration `file`")
	f.StringVar(&data, "data", defaultData, "the server's data `directory`")
	f.StringVar(&storeURL, "store", "", "the server's store `DSN` (default: the file's [store] url, else pebble in DATA)")
	f.BoolVar(&yes, "yes", false, "confirm")
	f.BoolVar(&acceptDamage, "accept-damage", false, "open an embedded store refused as damaged with what survived (see docs/operations.md, \"A damaged store\")")
	return c
}

// retireEpoch does the work of epoch retire, through node.Retire: that
// locks the data directory, checks the store against the secret, takes the
// node lease on a shared store and, once the keys are moved aside and the
// token namespaces emptied (here), starts the fence's new generation. Each
// step can be cut short (a failure, a crash) and a rerun finishes the work:
// keys already moved are not there to move, a purge goes on from what is
// left, and the fence's new canary is adopted.
func (m *Main) retireEpoch(ctx context.Context, cfg serveConfig) error {
	log := newLogger(m.Stderr, cfg)
	nc := m.nodeConfig(cfg, false, nil, log)
	open := nc.OpenStore
	var kind string
	nc.OpenStore = func(ctx context.Context) (node.Opened, error) {
		opened, err := open(ctx)
		kind = opened.Kind
		if errors.Is(err, pebble.ErrDamaged) && !cfg.Store.AcceptDamage {
			return opened, fmt.Errorf("%w. If you decided to go on with what survived, run spent epoch retire --yes --accept-damage", err)
		}
		return opened, err
	}
	gen, err := node.Retire(ctx, nc, func(ctx context.Context, store spent.Store, secret []byte) error {
		if err := m.retireKeys(cfg); err != nil {
			return err
		}
		return m.emptyTokenNamespaces(ctx, cfg, store, secret)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "fence: generation %d, canary %d (seq %s) written to the %s store\n", gen.Generation, gen.Canary, gen.Seq, kind)
	return nil
}

// retireKeys moves the issuers' keys of the data directory aside, under
// DATA/retired, so that the next start makes new ones.
func (m *Main) retireKeys(cfg serveConfig) error {
	stamp := time.Now().UTC().Format("20060102T150405Z")
	for _, dir := range []string{privacypassDir, ecashDir} {
		from := filepath.Join(cfg.Data, dir)
		if _, err := os.Stat(from); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		to := filepath.Join(cfg.Data, retiredDir, dir+"."+stamp)
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return err
		}
		if err := os.Rename(from, to); err != nil {
			return fmt.Errorf("moving the keys aside: %w", err)
		}
		fmt.Fprintf(m.Stdout, "retired keys: %s -> %s\n", from, to)
		crashpoint.Hit("retire.keys-moved:" + dir)
	}
	return nil
}

// emptyTokenNamespaces purges the token namespaces of cfg whose records are
// keyed by tokens of the retired keys, and prints one line per namespace.
// The ecash issue namespace is kept, with a line that says why: its records
// are keyed by challenges, which stay valid until their own expiry.
func (m *Main) emptyTokenNamespaces(ctx context.Context, cfg serveConfig, store spent.Store, secret []byte) error {
	purge, keep := tokenNamespaces(cfg)
	if len(purge) == 0 && len(keep) == 0 {
		return nil
	}
	lc := cfg.Ledger
	lc.Secret = secret
	lc.SeqBlock = 1 // the ledger claims nothing: reserve the least
	ledger, err := spent.NewLedger(ctx, store, lc)
	if err != nil {
		return fmt.Errorf("emptying the token namespaces: %w", err)
	}
	for _, ns := range purge {
		n, err := ledger.Purge(ctx, ns)
		if err != nil {
			return fmt.Errorf("emptying the token namespace %q (%d records removed; run epoch retire again to finish): %w", ns, n, err)
		}
		unit := "records"
		if n == 1 {
			unit = "record"
		}
		fmt.Fprintf(m.Stdout, "token namespace %s emptied: %d %s removed\n", ns, n, unit)
		crashpoint.Hit("retire.purged:" + ns)
	}
	for _, ns := range keep {
		fmt.Fprintf(m.Stdout, "token namespace %s kept: its challenges outlive the keys; the records expire by themselves\n", ns)
	}
	return nil
}

// tokenNamespaces returns the namespaces of cfg's token sections that epoch
// retire empties, and those it keeps: the [privacypass] namespace and the
// [ecash] spend namespace hold records of tokens of the retired keys; the
// [ecash] issue namespace holds records of challenges.
func tokenNamespaces(cfg serveConfig) (purge, keep []string) {
	if cfg.Privacypass != nil {
		purge = append(purge, cfg.Privacypass.Namespace)
	}
	if cfg.Ecash != nil {
		for _, ns := range slices.Sorted(maps.Keys(ecash.NamespacePolicies(*cfg.Ecash))) {
			if ns == cfg.Ecash.IssueNamespace {
				keep = append(keep, ns)
			} else if !slices.Contains(purge, ns) {
				purge = append(purge, ns)
			}
		}
	}
	return purge, keep
}
