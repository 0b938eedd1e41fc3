package redis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spentledger/spent/internal/dsn"
)

// Options configures a Store. Start from [DefaultOptions] or [ParseURL].
type Options struct {
	// Addrs lists the servers as host:port. A single server takes exactly
	// one; with Cluster, any nodes of the cluster (the client discovers the
	// others from them). Default: 127.0.0.1:6379.
	Addrs []string

	// Cluster selects Redis Cluster: keys are spread over the primaries by
	// hash slot and every operation runs on the primary of its slot.
	// Default false (a single server, or the primary a proxy points at).
	Cluster bool

	// DB is the database number of a single server. A cluster has only
	// database 0. Default 0.
	DB int

	// Username and Password authenticate with AUTH (ACL user, or the
	// requirepass password with an empty Username). Default none.
	Username string
	Password string

	// TLS, when not nil, connects with TLS (the rediss:// schemes). Default
	// nil: plain TCP.
	TLS *tls.Config

	// Prefix starts every key the store writes. Stores with different
	// prefixes share a server without seeing each other's records. It must
	// not contain '{' or '}', which would change the keys' hash slots.
	// Default "spent:".
	Prefix string

	// AllowNonDurable lets Open run on a server that does not promise to
	// keep acknowledged writes (appendonly no, appendfsync everysec or no, an
	// evicting maxmemory-policy, or a server that hides its CONFIG). Open
	// then logs, through Logger, what a crash can lose. Default false: Open
	// refuses such a server with ErrNotDurable.
	AllowNonDurable bool

	// WaitReplicas, when positive, makes every write wait (WAIT) until that
	// many replicas of its primary have acknowledged it, or WaitTimeout has
	// passed; with fewer acknowledgements the call returns an error wrapping
	// ErrNotReplicated and its outcome is unknown. This shrinks, but does not
	// close, the window in which a failover loses acknowledged claims
	// (replication stays asynchronous). Default 0: do not wait.
	WaitReplicas int

	// WaitTimeout bounds each WAIT. It must be shorter than ReadTimeout.
	// Default 1s.
	WaitTimeout time.Duration

	// AutoPipeline sends the single calls of concurrent callers (Claim,
	// Complete, Release, Count, ReserveSeq) together, as pipelines on one
	// connection per server, one pipeline in flight at a time: one write, one
	// read and one fsync of the server answer many callers, which roughly
	// doubles the claims/s of a loaded store (see BENCHMARKS.md), at the cost
	// of up to one more round trip of latency under load. Every call is still
	// its own atomic step, and nothing is resent after a network error.
	// Calls with WaitReplicas and ClaimBatch use their own pipelines.
	// Default true.
	AutoPipeline bool

	// PoolSize is the most connections kept to each server. Concurrent calls
	// beyond it wait for a connection. Default 64.
	PoolSize int

	// DialTimeout, ReadTimeout and WriteTimeout bound connecting, reading a
	// reply and writing a request. A call that times out has an unknown
	// outcome (the ledger reads the key back). Defaults 5s, 5s, 5s.
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration

	// Logger receives the warnings of AllowNonDurable. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the options for one durable server on the local
// default port, with the defaults documented on each field.
func DefaultOptions() Options {
	return Options{
		Addrs:        []string{"127.0.0.1:6379"},
		Prefix:       "spent:",
		AutoPipeline: true,
		WaitTimeout:  time.Second,
		PoolSize:     64,
		DialTimeout:  5 * time.Second,
		ReadTimeout:  5 * time.Second,
		WriteTimeout: 5 * time.Second,
	}
}

// Validate refuses unusable options.
func (o *Options) Validate() error {
	switch {
	case len(o.Addrs) == 0:
		return errors.New("redis: no server address")
	case !o.Cluster && len(o.Addrs) != 1:
		return fmt.Errorf("redis: %d addresses for a single server: give one, or use a cluster", len(o.Addrs))
	case o.Cluster && o.DB != 0:
		return fmt.Errorf("redis: database %d: a cluster has only database 0", o.DB)
	case o.DB < 0:
		return fmt.Errorf("redis: database %d: must not be negative", o.DB)
	case strings.ContainsAny(o.Prefix, "{}"):
		return fmt.Errorf("redis: prefix %q: must not contain '{' or '}'", o.Prefix)
	case o.WaitReplicas < 0:
		return fmt.Errorf("redis: wait replicas %d: must not be negative", o.WaitReplicas)
	case o.WaitReplicas > 0 && o.WaitTimeout <= 0:
		return errors.New("redis: wait timeout must be positive when waiting for replicas")
	case o.WaitReplicas > 0 && o.ReadTimeout > 0 && o.WaitTimeout >= o.ReadTimeout:
		return fmt.Errorf("redis: wait timeout %v: must be shorter than the read timeout %v", o.WaitTimeout, o.ReadTimeout)
	case o.PoolSize < 0:
		return fmt.Errorf("redis: pool size %d: must not be negative", o.PoolSize)
	case o.DialTimeout < 0 || o.ReadTimeout < 0 || o.WriteTimeout < 0:
		return errors.New("redis: timeouts must not be negative")
	}
	for _, a := range o.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("redis: address %q: %w", a, err)
		}
	}
	return nil
}

// ParseURL returns DefaultOptions changed by a DSN:
//
//	redis://[[user]:password@]host:port[/db][?param=value&...]
//	rediss://...                       the same over TLS
//	redis-cluster://[[user]:password@]host:port,host:port,...[?param=value&...]
//	rediss-cluster://...               the same over TLS
//
// The port defaults to 6379. Parameters: allow_non_durable (true or false),
// wait_replicas (count), wait_timeout (Go duration, as 500ms), prefix,
// auto_pipeline (true or false), pool_size, dial_timeout, read_timeout,
// write_timeout. An unknown parameter
// is an error, so that a typo never silently drops a setting.
func ParseURL(s string) (Options, error) {
	o := DefaultOptions()
	d, err := dsn.Parse(s)
	if errors.Is(err, dsn.ErrNoScheme) {
		return o, fmt.Errorf("redis: DSN %q: want redis://host:port or redis-cluster://host:port,host:port,... (the nodes of the cluster)", dsn.Redact(s))
	}
	if err != nil {
		return o, fmt.Errorf("redis: DSN %w", err)
	}
	switch d.Scheme {
	case "redis":
	case "rediss":
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	case "redis-cluster":
		o.Cluster = true
	case "rediss-cluster":
		o.Cluster = true
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	default:
		return o, fmt.Errorf("redis: DSN scheme %q: want redis, rediss, redis-cluster or rediss-cluster", d.Scheme)
	}
	o.Username, o.Password = d.Username, d.Password
	if len(d.Hosts) == 0 {
		return o, fmt.Errorf("redis: DSN %q: %w", dsn.Redact(s), dsn.ErrEmptyHost)
	}
	o.Addrs = nil
	for _, h := range d.Hosts {
		addr, err := dsn.HostPort(h, "6379")
		if err != nil {
			return o, fmt.Errorf("redis: DSN %q: %w", dsn.Redact(s), err)
		}
		o.Addrs = append(o.Addrs, addr)
	}
	if d.Path != "" {
		db, err := strconv.Atoi(d.Path)
		if err != nil {
			return o, fmt.Errorf("redis: DSN database %q: want a number", d.Path)
		}
		o.DB = db
	}
	q, err := url.ParseQuery(d.RawQuery)
	if err != nil {
		return o, fmt.Errorf("redis: DSN parameters: %w", err)
	}
	for name, vals := range q {
		if err := o.setParam(name, vals[len(vals)-1]); err != nil {
			return o, err
		}
	}
	return o, o.Validate()
}

// setParam sets the option a DSN parameter names.
func (o *Options) setParam(name, v string) error {
	var err error
	switch name {
	case "allow_non_durable":
		o.AllowNonDurable, err = strconv.ParseBool(v)
	case "wait_replicas":
		o.WaitReplicas, err = strconv.Atoi(v)
	case "wait_timeout":
		o.WaitTimeout, err = time.ParseDuration(v)
	case "prefix":
		o.Prefix = v
	case "auto_pipeline":
		o.AutoPipeline, err = strconv.ParseBool(v)
	case "pool_size":
		o.PoolSize, err = strconv.Atoi(v)
	case "dial_timeout":
		o.DialTimeout, err = time.ParseDuration(v)
	case "read_timeout":
		o.ReadTimeout, err = time.ParseDuration(v)
	case "write_timeout":
		o.WriteTimeout, err = time.ParseDuration(v)
	default:
		return fmt.Errorf("redis: unknown DSN parameter %q", name)
	}
	if err != nil {
		return fmt.Errorf("redis: DSN parameter %s: %w", name, err)
	}
	return nil
}
