package pebble

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures a Store. Start from [DefaultOptions].
type Options struct {
	// ExpectedRecords sizes the existence filter up front for this many
	// records (about 16 bytes each), so that it does not double (a pause of
	// the claim path proportional to its size) while the store fills up.
	// Zero starts small and grows on demand; Open also sizes the filter for
	// what the store held at its last Close.
	ExpectedRecords int

	// MaxBatchRound is the most claims decided in one round, that is, in one
	// pebble batch sharing one WAL sync. A larger ClaimBatch still goes into
	// a single round of its own.
	MaxBatchRound int

	// CacheSize is the size in bytes of pebble's block cache; zero means
	// pebble's default (8 MiB).
	CacheSize int64

	// MemTableSize is the size in bytes of one pebble memtable. Larger
	// memtables mean fewer flushes under heavy claim load.
	MemTableSize uint64

	// Logger receives pebble's messages: informational ones at debug level,
	// errors at error level. Nil means slog.Default().
	Logger *slog.Logger

	// AcceptDamage opens a store that Open would refuse with ErrDamaged:
	// pebble then opens what it can read, which may have lost records the
	// store acknowledged, and the witness starts again from what was
	// opened. It is for an operator who decided to go on with the loss
	// (see "A damaged store" in docs/operations.md), never a default.
	AcceptDamage bool

	// fs is the file system; nil means the operating system's. Tests set a
	// crashable in-memory one.
	fs vfs.FS
	// plainWAL turns off the WAL zero-filling (prefill.go), for the
	// benchmark that measures what it gains.
	plainWAL bool
	// filterSaveEvery, when set, saves the filter after this many inserts
	// instead of the default (tests).
	filterSaveEvery int
	// noJournal writes no filter journal (tests: a spent of before it).
	noJournal bool
}

// DefaultOptions returns the options Open is meant to run with: a filter that
// starts small, rounds of up to 8,192 claims, a 64 MiB block cache and 64 MiB
// memtables.
func DefaultOptions() Options {
	return Options{
		MaxBatchRound: 8192,
		CacheSize:     64 << 20,
		MemTableSize:  64 << 20,
	}
}

// Limits on options: beyond them a typo would allocate tens of gigabytes.
const (
	maxExpectedRecords = 1 << 32
	maxBatchRound      = 1 << 20
)

// Validate refuses unusable options.
func (o *Options) Validate() error {
	switch {
	case o.ExpectedRecords < 0 || o.ExpectedRecords > maxExpectedRecords:
		return fmt.Errorf("pebble: expected records %d: must be 0 to %d", o.ExpectedRecords, maxExpectedRecords)
	case o.MaxBatchRound < 1 || o.MaxBatchRound > maxBatchRound:
		return fmt.Errorf("pebble: max batch round %d: must be 1 to %d", o.MaxBatchRound, maxBatchRound)
	case o.CacheSize < 0:
		return fmt.Errorf("pebble: cache size %d: must not be negative", o.CacheSize)
	case o.MemTableSize < 1<<20:
		return fmt.Errorf("pebble: memtable size %d: must be at least 1 MiB", o.MemTableSize)
	case o.MemTableSize >= 4<<30:
		return errors.New("pebble: memtable size must be under 4 GiB")
	}
	return nil
}

// logger adapts a *slog.Logger to pebble's Logger interface.
type logger struct{ l *slog.Logger }

func (g logger) Infof(format string, args ...any) { g.l.Debug(fmt.Sprintf(format, args...)) }

func (g logger) Errorf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }

// Fatalf logs and panics: pebble calls it when it cannot go on, and expects
// it not to return. Where pebble calls it on the store's own goroutines (a
// commit after a failed WAL write), the store turns the panic into a failure
// and reopens the database (see unpanic); on pebble's goroutines (a failed
// MANIFEST write) it ends the process, which fails closed.
func (g logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	g.l.Error(msg)
	panic(fatalPanic("pebble: fatal: " + msg))
}

// fatalPanic is the value logger.Fatalf panics with.
type fatalPanic string
