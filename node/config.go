package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/atomicfile"
)

// Defaults of [DefaultConfig].
const (
	// DefaultFenceInterval is the pause between two advances of the
	// rollback fence.
	DefaultFenceInterval = 10 * time.Second
	// DefaultSweepInterval is the pause between two sweeps of expired
	// records.
	DefaultSweepInterval = time.Minute
	// DefaultSweepBatch is how many records one store call of the sweeper
	// forgets.
	DefaultSweepBatch = 1000
	// DefaultInUseHint ends the refusal a second process gets when it opens
	// a data directory in use.
	DefaultInUseHint = "stop it first, or give this node its own data directory"
)

// Opened is a store as [Config].OpenStore returns it: the store and what the
// node says about it.
type Opened struct {
	// Store is the store the ledger runs on.
	Store spent.Store
	// Kind names the engine, for messages and logs: "pebble", "redis",
	// "postgres", "etcd".
	Kind string
	// Where says where the store is, for messages and logs, without
	// credentials: a directory, a list of addresses.
	Where string
	// Collector exports the engine's metrics, or is nil. The node registers
	// it with Config.Registerer.
	Collector prometheus.Collector
}

// Config is the configuration of a [Node]. Start from [DefaultConfig] and
// set Dir, Ledger's namespaces and OpenStore.
type Config struct {
	// Dir is the data directory: the lock, the secret and the fence, and
	// usually the embedded store. It is created (mode 0700) when missing.
	Dir string
	// Ledger is the ledger's configuration without its secret, which the
	// node reads from Dir (Ledger.Secret must stay empty). A nil Ledger.Now
	// takes Now. With a Registerer, the ledger's Observer is Ledger.Observer
	// (kept, and told first) chained with the node's, which counts the
	// ledger's claims, errors and timings.
	Ledger spent.Config
	// OpenStore opens the store. The node calls it once, after it has
	// locked Dir, read the secret and loaded the fence, and closes the store
	// at Close (or when Open fails after it).
	OpenStore func(ctx context.Context) (Opened, error)
	// Shared is set for a store that other nodes may share (Redis,
	// PostgreSQL, etcd): the node then holds a lease on its node number.
	Shared bool
	// EmbeddedDir is the embedded store's directory, empty for a shared
	// store. The node looks at it before OpenStore: files there mean the
	// store holds records, which a data directory without a fence must not
	// accept silently. Inside Dir, it also keeps a new secret from being
	// generated beside it.
	EmbeddedDir string
	// NewFence accepts a store that holds records when Dir has no fence
	// yet: the deliberate first start of a data directory on such a store
	// (a new node joining a shared store, or a fence known to be lost). It
	// is refused once the fence names a canary.
	NewFence bool
	// FenceInterval is the pause between two advances of the rollback
	// fence; a node lease lasts three of them.
	FenceInterval time.Duration
	// SweepInterval is the pause between two sweeps of expired records.
	SweepInterval time.Duration
	// SweepBatch is how many records one store call of the sweeper forgets,
	// 1 to spent.MaxBatch.
	SweepBatch int
	// Registerer receives the node's metrics: the ledger's (claims by
	// namespace and outcome, errors, operation times; see
	// MetricLedgerClaims), the sweeper's, the store's Collector, and the Go
	// and process collectors when ProcessMetrics is set. Nil registers them
	// nowhere, and the ledger gets Ledger.Observer alone.
	Registerer prometheus.Registerer
	// ProcessMetrics adds the Go runtime and process collectors.
	ProcessMetrics bool
	// InUseHint ends the refusal a second process gets when it opens Dir
	// while this node holds it: what to do about it.
	InUseHint string
	// Logger receives the node's log.
	Logger *slog.Logger
	// Now is the node's clock: the fence's canaries, the node lease, the
	// secret check.
	Now func() time.Time
	// Rand is the source of a new secret and of the fence's id.
	Rand io.Reader
	// WriteFile writes the files of Dir (the secret, the fence) so that a
	// crash leaves the old file or the whole new one. Tests replace it to
	// fail a write.
	WriteFile func(path string, data []byte, perm os.FileMode) error
}

// DefaultConfig returns a Config with the default intervals, the ledger's
// default configuration, the system clock and randomness, atomic file
// writes and slog's default logger. Dir and OpenStore are left to set.
func DefaultConfig() Config {
	return Config{
		Ledger:        spent.DefaultConfig(),
		FenceInterval: DefaultFenceInterval,
		SweepInterval: DefaultSweepInterval,
		SweepBatch:    DefaultSweepBatch,
		InUseHint:     DefaultInUseHint,
		Logger:        slog.Default(),
		Now:           time.Now,
		Rand:          rand.Reader,
		WriteFile:     atomicfile.WriteFile,
	}
}

// Validate refuses a Config a node cannot run on. It checks the node's own
// fields; the ledger's are checked by spent.NewLedger once the secret is
// read.
func (c *Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("node: Dir is empty: set the data directory")
	case c.OpenStore == nil:
		return errors.New("node: OpenStore is nil: set the function that opens the store")
	case len(c.Ledger.Secret) != 0:
		return errors.New("node: Ledger.Secret is set: the node reads the secret from its data directory; leave it empty")
	case c.Ledger.Node == 0:
		return errors.New("node: Ledger.Node must be at least 1")
	case c.Shared && c.EmbeddedDir != "":
		return errors.New("node: Shared and EmbeddedDir are both set: a store is either shared or embedded")
	case c.FenceInterval <= 0:
		return fmt.Errorf("node: FenceInterval %s: must be positive", c.FenceInterval)
	case c.SweepInterval <= 0:
		return fmt.Errorf("node: SweepInterval %s: must be positive", c.SweepInterval)
	case c.SweepBatch <= 0 || c.SweepBatch > spent.MaxBatch:
		return fmt.Errorf("node: SweepBatch %d: want 1 to %d", c.SweepBatch, spent.MaxBatch)
	}
	return nil
}

// fill sets the injectable fields left nil to their defaults.
func (c *Config) fill() {
	d := DefaultConfig()
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.Rand == nil {
		c.Rand = d.Rand
	}
	if c.WriteFile == nil {
		c.WriteFile = d.WriteFile
	}
	if c.InUseHint == "" {
		c.InUseHint = d.InUseHint
	}
	if c.Ledger.Now == nil {
		c.Ledger.Now = c.Now
	}
}
