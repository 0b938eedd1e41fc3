package etcd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spentledger/spent/internal/dsn"
	"github.com/spentledger/spent/internal/tlsfiles"
)

// Options configures a Store. Start from [DefaultOptions] and set Endpoints,
// or parse a DSN with [ParseURL].
type Options struct {
	// Endpoints are the client endpoints of the cluster's members, as
	// host:port. List every member: the client fails over between them.
	// Required.
	Endpoints []string

	// Prefix starts every key the store writes, so that one cluster can
	// hold several ledgers (and other data) apart. Default "/spent/".
	Prefix string

	// Username and Password authenticate to a cluster with auth enabled.
	// Both empty (the default) sends no credentials.
	Username string
	Password string

	// TLS, when set, makes every connection TLS with this configuration.
	// Nil (the default) means plaintext.
	TLS *tls.Config

	// DialTimeout bounds the start-up check of Open: each member must
	// answer its status request within it. Default 5s.
	DialTimeout time.Duration

	// RequestTimeout bounds each call of the store (a claim, say, with its
	// retries) unless the caller's context ends first. During a leader
	// election etcd holds requests for a second or two; a call that runs out
	// of time returns an error and its outcome is unknown. Zero means no
	// bound but the caller's context. Default 10s.
	RequestTimeout time.Duration

	// LeaseBucket is the width of the time buckets that share one etcd
	// lease: a record is attached to the lease of the bucket that ends at or
	// after its ExpiresAt, so etcd forgets it no earlier than ExpiresAt and
	// about one bucket later at most. It must be a whole number of seconds,
	// at least one. Default 1 minute.
	LeaseBucket time.Duration

	// MaxTxnOps is the most operations the store puts in one transaction
	// (ClaimBatch sends one per key and round). It must not exceed the
	// server's --max-txn-ops (default 128). Default 128.
	MaxTxnOps int

	// MaxTxnBytes is the most record bytes the store puts in one
	// transaction before it starts another. It must stay below the server's
	// --max-request-bytes (default 1.5 MiB). A single record larger than
	// the server's limit cannot be stored: its claim fails. Default 1 MiB.
	MaxTxnBytes int

	// AllowNonDurable is accepted for the --allow-non-durable flag and has
	// no effect: etcd syncs its WAL on a majority before it answers, and a
	// member started with --unsafe-no-fsync cannot be told apart by a
	// client. Open logs that at warn level when it is set.
	AllowNonDurable bool

	// Logger receives the store's messages: members that did not answer the
	// start-up check, and the meaning of AllowNonDurable. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the options Open is meant to run with, without
// endpoints: prefix "/spent/", a 5s start-up check, 10s per call, 1-minute
// lease buckets, and transactions of at most 128 operations and 1 MiB.
func DefaultOptions() Options {
	return Options{
		Prefix:         "/spent/",
		DialTimeout:    5 * time.Second,
		RequestTimeout: 10 * time.Second,
		LeaseBucket:    time.Minute,
		MaxTxnOps:      128,
		MaxTxnBytes:    1 << 20,
	}
}

// Limits on options.
const (
	// minTxnOps leaves room for one claim's nested transaction.
	minTxnOps = maxNestedOps + 1
	// minTxnBytes is far below any useful request size.
	minTxnBytes = 4 << 10
)

// Validate refuses unusable options.
func (o *Options) Validate() error {
	if len(o.Endpoints) == 0 {
		return errors.New("etcd: no endpoints")
	}
	for _, ep := range o.Endpoints {
		if strings.TrimSpace(ep) == "" || strings.ContainsAny(ep, ", ") {
			return fmt.Errorf("etcd: endpoint %q: want host:port", ep)
		}
	}
	switch {
	case o.Prefix == "":
		return errors.New("etcd: empty prefix")
	case o.DialTimeout <= 0:
		return fmt.Errorf("etcd: dial timeout %v: must be positive", o.DialTimeout)
	case o.RequestTimeout < 0:
		return fmt.Errorf("etcd: request timeout %v: must not be negative", o.RequestTimeout)
	case o.LeaseBucket < time.Second || o.LeaseBucket%time.Second != 0:
		return fmt.Errorf("etcd: lease bucket %v: must be a whole number of seconds, at least 1s", o.LeaseBucket)
	case o.MaxTxnOps < minTxnOps:
		return fmt.Errorf("etcd: max txn ops %d: must be at least %d", o.MaxTxnOps, minTxnOps)
	case o.MaxTxnBytes < minTxnBytes:
		return fmt.Errorf("etcd: max txn bytes %d: must be at least %d", o.MaxTxnBytes, minTxnBytes)
	case (o.Username == "") != (o.Password == ""):
		return errors.New("etcd: give both a username and a password, or neither")
	}
	return nil
}

// ParseURL parses a DSN into options, starting from [DefaultOptions]:
//
//	etcd://[user:password@]host:port,host:port,host:port[/prefix][?param=value&...]
//	etcds://...   the same over TLS
//
// The path, when present, is the key prefix (a trailing "/" is added:
// etcd://h:2379/ledger-a uses "/ledger-a/"); without a path the prefix is
// "/spent/". The parameters are:
//
//	dial_timeout=5s       Options.DialTimeout
//	request_timeout=10s   Options.RequestTimeout (0 for none)
//	lease_bucket=1m       Options.LeaseBucket
//	max_txn_ops=128       Options.MaxTxnOps
//	max_txn_bytes=1048576 Options.MaxTxnBytes
//	allow_non_durable=1   Options.AllowNonDurable (no effect; see there)
//	ca=/path.pem          etcds: trust these CAs instead of the system's
//	cert=/path.pem        etcds: client certificate (with key)
//	key=/path.pem         etcds: the client certificate's key
//	server_name=name      etcds: the name to verify in the members' certificates
//
// ParseURL reads the files that ca, cert and key name. Unknown parameters
// are an error.
func ParseURL(s string) (Options, error) {
	o := DefaultOptions()
	d, err := dsn.Parse(s)
	if err == nil && d.Scheme != "etcd" && d.Scheme != "etcds" {
		err = dsn.ErrNoScheme
	}
	if errors.Is(err, dsn.ErrNoScheme) {
		return o, errors.New("etcd: dsn: want etcd://host:port,host:port,... or etcds://host:port,host:port,... (the members of the cluster)")
	}
	if err != nil {
		return o, fmt.Errorf("etcd: dsn: %w", err)
	}
	o.Username, o.Password = d.Username, d.Password
	if len(d.Hosts) == 0 {
		return o, errors.New("etcd: dsn: no endpoints")
	}
	for _, h := range d.Hosts {
		ep, err := dsn.HostPort(h, "")
		if err != nil {
			return o, fmt.Errorf("etcd: dsn: endpoint %q: want host:port", h)
		}
		o.Endpoints = append(o.Endpoints, ep)
	}
	if d.HasPath {
		p, err := url.PathUnescape(d.Path)
		if err != nil {
			return o, fmt.Errorf("etcd: dsn: prefix: %w", err)
		}
		o.Prefix = "/" + p
		if !strings.HasSuffix(o.Prefix, "/") {
			o.Prefix += "/"
		}
	}
	q, err := url.ParseQuery(d.RawQuery)
	if err != nil {
		return o, fmt.Errorf("etcd: dsn: %w", err)
	}
	var t tlsFiles
	for name, vals := range q {
		if err := o.setParam(&t, name, vals[len(vals)-1]); err != nil {
			return o, err
		}
	}
	if d.Scheme == "etcds" {
		if o.TLS, err = t.config(); err != nil {
			return o, err
		}
	} else if t != (tlsFiles{}) {
		return o, errors.New("etcd: dsn: ca, cert, key and server_name need the etcds:// scheme")
	}
	return o, o.Validate()
}

// tlsFiles are the TLS parameters of a DSN.
type tlsFiles struct {
	ca, cert, key, serverName string
}

// setParam sets the option a DSN parameter names, or the TLS parameter in t.
func (o *Options) setParam(t *tlsFiles, name, v string) error {
	var err error
	switch name {
	case "dial_timeout":
		o.DialTimeout, err = time.ParseDuration(v)
	case "request_timeout":
		o.RequestTimeout, err = parseDurationOrZero(v)
	case "lease_bucket":
		o.LeaseBucket, err = time.ParseDuration(v)
	case "max_txn_ops":
		o.MaxTxnOps, err = strconv.Atoi(v)
	case "max_txn_bytes":
		o.MaxTxnBytes, err = strconv.Atoi(v)
	case "allow_non_durable":
		o.AllowNonDurable, err = strconv.ParseBool(v)
	case "ca":
		t.ca = v
	case "cert":
		t.cert = v
	case "key":
		t.key = v
	case "server_name":
		t.serverName = v
	default:
		return fmt.Errorf("etcd: dsn: unknown parameter %q", name)
	}
	if err != nil {
		return fmt.Errorf("etcd: dsn: %s: %w", name, err)
	}
	return nil
}

func parseDurationOrZero(v string) (time.Duration, error) {
	if v == "0" {
		return 0, nil
	}
	return time.ParseDuration(v)
}

// config builds the client's TLS configuration from the PEM files.
func (t tlsFiles) config() (*tls.Config, error) {
	c, err := tlsfiles.ClientConfig(t.ca, t.cert, t.key)
	if err != nil {
		return nil, fmt.Errorf("etcd: dsn: %w", err)
	}
	c.ServerName = t.serverName
	return c, nil
}
