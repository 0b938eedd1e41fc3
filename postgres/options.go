package postgres

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configures a Store. Start from [DefaultOptions] or [ParseURL].
type Options struct {
	// ConnString says how to reach the server, in any form pgx accepts: a
	// postgres:// URL or "host=... dbname=..." keywords, with pgx's own
	// parameters (sslmode, connect_timeout, pool_max_conns, ...). Required;
	// no default.
	ConnString string

	// Schema holds the store's tables (records, counters, seqs and
	// schema_migrations). Open creates it when it is missing. Default
	// "spent", so that the ledger's tables never mix with an application's
	// own in "public". Several stores may share one database, each in its
	// own schema. Letters, digits and underscores, at most 63 bytes, not
	// starting with a digit.
	Schema string

	// MaxConns is the size of the connection pool: at most this many
	// statements run at once, and so at most this many commits share one
	// WAL flush. Default 32. Zero leaves pgxpool's own default
	// (pool_max_conns in ConnString, else the larger of 4 and the number of
	// CPUs).
	MaxConns int32

	// MinConns is how many connections Open makes before it returns, and
	// the pool keeps open from then on, so that the first claims do not
	// wait for a connection to be made. Default 4. At most MaxConns.
	MinConns int32

	// MaxRetries is how many times a statement that failed with a
	// serialization failure (SQLSTATE 40001) or a deadlock (40P01), or that
	// failed before it was sent, is run again before the error is returned.
	// Default 5.
	MaxRetries int

	// RetryBackoff is the first wait before a retry; each further retry
	// waits up to twice as long, with random jitter, capped at one second.
	// Default 5ms.
	RetryBackoff time.Duration

	// AllowNonDurable lets Open use a server that may lose acknowledged
	// commits (synchronous_commit=off or fsync=off). Open then logs, at
	// warning level, what can be lost. Default false: Open refuses such a
	// server with [ErrNonDurable]. This is the --allow-non-durable escape
	// hatch of spent serve.
	AllowNonDurable bool

	// PartitionPeriod is the span of expiry times each partition of the
	// records table holds: a record lands in the partition of the period
	// its expires_at falls in (periods are counted from the Unix epoch, so
	// daily ones start at midnight UTC), and a sweep drops a partition as a
	// whole once its period has ended. Each claim looks its key up in every
	// partition, so a period of about a fifth of the longest retention or
	// more keeps that cost small (docs/stores.md has figures). Default 24h; a whole number of seconds
	// from one minute to 366 days. Changing it later is safe: new
	// partitions are cut so as not to overlap the ones already made.
	PartitionPeriod time.Duration

	// Logger receives the store's messages: the durability report of Open
	// and what AllowNonDurable lets through. Nil means slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the options Open is meant to run with; only
// ConnString must still be set.
func DefaultOptions() Options {
	return Options{
		Schema:       "spent",
		MaxConns:     32,
		MinConns:     4,
		MaxRetries:   5,
		RetryBackoff: 5 * time.Millisecond,

		PartitionPeriod: 24 * time.Hour,
	}
}

// maxPartitionPeriod is the longest Options.PartitionPeriod: 366 days.
const maxPartitionPeriod = 366 * 24 * time.Hour

var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Validate refuses unusable options.
func (o *Options) Validate() error {
	switch {
	case o.ConnString == "":
		return errors.New("postgres: no connection string")
	case !schemaName.MatchString(o.Schema):
		return fmt.Errorf("postgres: schema %q: want letters, digits and underscores, at most 63 bytes, not starting with a digit", o.Schema)
	case o.MaxConns < 0:
		return fmt.Errorf("postgres: max conns %d: must not be negative", o.MaxConns)
	case o.MinConns < 0 || (o.MaxConns > 0 && o.MinConns > o.MaxConns):
		return fmt.Errorf("postgres: min conns %d: must be 0 to max conns (%d)", o.MinConns, o.MaxConns)
	case o.MaxRetries < 0 || o.MaxRetries > 100:
		return fmt.Errorf("postgres: max retries %d: must be 0 to 100", o.MaxRetries)
	case o.RetryBackoff < 0 || o.RetryBackoff > 10*time.Second:
		return fmt.Errorf("postgres: retry backoff %v: must be 0 to 10s", o.RetryBackoff)
	case o.PartitionPeriod < time.Minute || o.PartitionPeriod > maxPartitionPeriod || o.PartitionPeriod%time.Second != 0:
		return fmt.Errorf("postgres: partition period %v: must be a whole number of seconds from 1m to %v", o.PartitionPeriod, maxPartitionPeriod)
	}
	return nil
}

// The query parameters of a DSN that are spent's own; ParseURL removes them
// before pgx sees the URL (pgx would send unknown ones to the server as
// run-time settings).
const (
	paramSchema          = "schema"
	paramAllowNonDurable = "allow_non_durable"
	paramMaxRetries      = "max_retries"
	paramRetryBackoff    = "retry_backoff"
	paramPartition       = "partition_period"
)

// ParseURL returns [DefaultOptions] set from a postgres:// or postgresql://
// URL. Its query parameters schema, allow_non_durable (a boolean),
// max_retries, retry_backoff and partition_period (Go durations) set the
// options of the same names and are removed; every other parameter stays in ConnString for pgx
// (sslmode, connect_timeout, application_name, pool_max_conns, ...). The
// parameters pool_max_conns and pool_min_conns also set MaxConns and
// MinConns.
//
//	postgres://spent:secret@db.internal:5432/ledger?sslmode=verify-full&schema=spent&pool_max_conns=64
func ParseURL(dsn string) (Options, error) {
	o := DefaultOptions()
	u, err := url.Parse(dsn)
	if err != nil {
		// url.Error repeats the URL, password included: say less.
		return o, errors.New("postgres: DSN is not a valid URL")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return o, fmt.Errorf("postgres: DSN scheme %q: want postgres:// or postgresql://", u.Scheme)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return o, fmt.Errorf("postgres: DSN query: %w", err)
	}
	if v, ok := q[paramSchema]; ok {
		o.Schema = last(v)
	}
	if v, ok := q[paramAllowNonDurable]; ok {
		b, err := strconv.ParseBool(last(v))
		if err != nil {
			return o, fmt.Errorf("postgres: DSN parameter %s=%q: want true or false", paramAllowNonDurable, last(v))
		}
		o.AllowNonDurable = b
	}
	if v, ok := q[paramMaxRetries]; ok {
		n, err := strconv.Atoi(last(v))
		if err != nil {
			return o, fmt.Errorf("postgres: DSN parameter %s=%q: want an integer", paramMaxRetries, last(v))
		}
		o.MaxRetries = n
	}
	if v, ok := q[paramRetryBackoff]; ok {
		d, err := time.ParseDuration(last(v))
		if err != nil {
			return o, fmt.Errorf("postgres: DSN parameter %s=%q: want a duration such as 5ms", paramRetryBackoff, last(v))
		}
		o.RetryBackoff = d
	}
	if v, ok := q[paramPartition]; ok {
		d, err := time.ParseDuration(last(v))
		if err != nil {
			return o, fmt.Errorf("postgres: DSN parameter %s=%q: want a duration such as 24h", paramPartition, last(v))
		}
		o.PartitionPeriod = d
	}
	for _, p := range []string{paramSchema, paramAllowNonDurable, paramMaxRetries, paramRetryBackoff, paramPartition} {
		q.Del(p)
	}
	u.RawQuery = q.Encode()
	o.ConnString = u.String()
	cfg, err := pgxpool.ParseConfig(o.ConnString)
	if err != nil {
		return o, fmt.Errorf("postgres: DSN: %w", err) // pgx masks the password
	}
	if _, ok := q["pool_max_conns"]; ok {
		o.MaxConns = cfg.MaxConns
		o.MinConns = min(o.MinConns, o.MaxConns)
	}
	if _, ok := q["pool_min_conns"]; ok {
		o.MinConns = cfg.MinConns
	}
	return o, o.Validate()
}

func last(v []string) string { return v[len(v)-1] }
