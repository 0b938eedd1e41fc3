package main

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/ecash"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/pebble"
	"github.com/spentledger/spent/privacypass"
)

// Defaults of the serve command, also documented in docs/configuration.md.
const (
	defaultListen          = "127.0.0.1:7070"
	defaultData            = "./spent-data"
	defaultSweepInterval   = time.Minute
	defaultSweepBatch      = 1000
	defaultShutdownTimeout = 30 * time.Second
	defaultFenceInterval   = 10 * time.Second
)

// serveConfig is the server's effective configuration: the file's values over
// the defaults, with command-line flags over both.
type serveConfig struct {
	// Ledger is the ledger's configuration without its secret, which is read
	// from the data directory at start.
	Ledger spent.Config
	// Listen is the TCP address to listen on.
	Listen string
	// Data is the data directory: the secret and the embedded store.
	Data string
	// Tokens are the bearer tokens; none means auth is off (loopback only).
	Tokens []sphttp.Token
	// MaxBody is the largest request body in bytes; 0 keeps the http
	// package's default.
	MaxBody int64
	// MaxBodies is the budget of request bodies in flight, in bytes (see
	// sphttp.LimitBodies); past it requests are answered 503.
	MaxBodies int64
	// SweepInterval is the pause between two sweeps of expired records.
	SweepInterval time.Duration
	// SweepBatch is how many records one store call forgets.
	SweepBatch int
	// ShutdownTimeout bounds the graceful shutdown.
	ShutdownTimeout time.Duration
	// FenceInterval is the pause between two advances of the rollback fence
	// (see fence.go): a store restored from a snapshot younger than this
	// before a crash goes unnoticed.
	FenceInterval time.Duration
	// LogLevel and LogFormat shape the log on stderr.
	LogLevel  slog.Level
	LogFormat string
	// Store tunes the embedded store; its Logger is set at start.
	Store pebble.Options
	// StoreURL names the store as a DSN (see storeSchemes); empty is the
	// embedded store in the data directory.
	StoreURL string
	// Privacypass, when set, turns on the Privacy Pass issuer and the
	// /v1/redeem endpoint (the file's [privacypass] section).
	Privacypass *privacypass.Config
	// Ecash, when set, turns on the value-token issuer (the file's [ecash]
	// section). Its Secret is derived from the ledger secret at start.
	Ecash *ecash.Config
	// AllowNonDurable lets a shared store start on an engine configured to
	// lose acknowledged writes (it then logs what can be lost).
	AllowNonDurable bool
}

// defaultServeConfig is the configuration without a file: one namespace,
// "default", under spent.DefaultPolicy.
func defaultServeConfig() serveConfig {
	return serveConfig{
		Ledger:          spent.DefaultConfig(),
		Listen:          defaultListen,
		Data:            defaultData,
		SweepInterval:   defaultSweepInterval,
		SweepBatch:      defaultSweepBatch,
		ShutdownTimeout: defaultShutdownTimeout,
		FenceInterval:   defaultFenceInterval,
		MaxBodies:       sphttp.DefaultMaxBodies,
		LogLevel:        slog.LevelInfo,
		LogFormat:       "text",
		Store:           pebble.DefaultOptions(),
	}
}

// duration is a time.Duration written in TOML as a Go duration string
// ("24h", "30s"). A bare integer is refused rather than read as nanoseconds.
type duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration: write it as a Go duration string such as \"30s\" or \"24h\"", b)
	}
	*d = duration(v)
	return nil
}

// fileConfig mirrors the TOML file. Pointer fields tell "absent" from "zero".
type fileConfig struct {
	Node            *int64                   `toml:"node"`
	Listen          *string                  `toml:"listen"`
	Data            *string                  `toml:"data"`
	MaxBody         *int64                   `toml:"max_body"`
	MaxResult       *int64                   `toml:"max_result"`
	MaxBatchResult  *int64                   `toml:"max_batch_result"`
	MaxBodies       *int64                   `toml:"max_bodies"`
	SweepInterval   *duration                `toml:"sweep_interval"`
	SweepBatch      *int64                   `toml:"sweep_batch"`
	ShutdownTimeout *duration                `toml:"shutdown_timeout"`
	FenceInterval   *duration                `toml:"fence_interval"`
	LogLevel        *string                  `toml:"log_level"`
	LogFormat       *string                  `toml:"log_format"`
	Namespaces      map[string]fileNamespace `toml:"namespaces"`
	Tokens          []fileToken              `toml:"tokens"`
	Store           fileStore                `toml:"store"`
	Privacypass     *privacypass.Config      `toml:"privacypass"`
	Ecash           *fileEcash               `toml:"ecash"`
}

// fileEcash mirrors the [ecash] section; see docs/ecash.md.
type fileEcash struct {
	IssuerName    *string   `toml:"issuer_name"`
	Denominations []uint64  `toml:"denominations"`
	Epoch         *duration `toml:"epoch"`
	Grace         *duration `toml:"grace"`
	Skew          *duration `toml:"skew"`
	Price         *uint64   `toml:"price"`
	Difficulty    *uint8    `toml:"difficulty"`
	IssueValue    *uint64   `toml:"issue_value"`
	ChallengeTTL  *duration `toml:"challenge_ttl"`
}

// config returns the issuer configuration of the section over ecash's
// defaults, without its secret.
func (f *fileEcash) config() ecash.Config {
	c := ecash.DefaultConfig()
	if f.IssuerName != nil {
		c.IssuerName = *f.IssuerName
	}
	if f.Denominations != nil {
		c.Denominations = f.Denominations
	}
	for _, d := range []struct {
		from *duration
		to   *time.Duration
	}{{f.Epoch, &c.Epoch}, {f.Grace, &c.Grace}, {f.Skew, &c.Skew}, {f.ChallengeTTL, &c.ChallengeTTL}} {
		if d.from != nil {
			*d.to = time.Duration(*d.from)
		}
	}
	if f.Price != nil {
		c.Price = *f.Price
	}
	if f.Difficulty != nil {
		c.Difficulty = *f.Difficulty
	}
	if f.IssueValue != nil {
		c.IssueValue = *f.IssueValue
	}
	return c
}

type fileStore struct {
	URL             *string `toml:"url"`
	AllowNonDurable *bool   `toml:"allow_non_durable"`
	ExpectedRecords *int64  `toml:"expected_records"`
	CacheSize       *int64  `toml:"cache_size"`
	MemTableSize    *int64  `toml:"memtable_size"`
}

type fileNamespace struct {
	Mode          *spent.Mode        `toml:"mode"`
	Retention     *duration          `toml:"retention"`
	Lease         *duration          `toml:"lease"`
	OnLeaseExpiry *spent.LeaseExpiry `toml:"on_lease_expiry"`
	StoreRawKey   *bool              `toml:"store_raw_key"`
}

type fileToken struct {
	Token      string   `toml:"token"`
	TokenEnv   string   `toml:"token_env"`
	Namespaces []string `toml:"namespaces"`
	Scopes     []string `toml:"scopes"`
}

// loadConfig reads the TOML file at path over the defaults. getenv resolves
// token_env. Every error names the file and the key at fault.
func loadConfig(path string, getenv func(string) string) (serveConfig, error) {
	cfg := defaultServeConfig()
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := cfg.parse(string(b), getenv); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// parse applies the TOML document doc to cfg.
func (cfg *serveConfig) parse(doc string, getenv func(string) string) error {
	var f fileConfig
	md, err := toml.Decode(doc, &f)
	if err != nil {
		return err
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return fmt.Errorf("unknown key %s (see docs/configuration.md for the keys)", strings.Join(keys, ", "))
	}

	if f.Node != nil {
		if *f.Node < 1 || *f.Node > 1<<32-1 {
			return fmt.Errorf("node = %d: want 1 to %d", *f.Node, uint32(1<<32-1))
		}
		cfg.Ledger.Node = uint32(*f.Node)
	}
	if f.Listen != nil {
		cfg.Listen = *f.Listen
	}
	if f.Data != nil {
		if *f.Data == "" {
			return errors.New("data = \"\": want a directory")
		}
		cfg.Data = *f.Data
	}
	if f.MaxBody != nil {
		if *f.MaxBody <= 0 {
			return fmt.Errorf("max_body = %d: must be positive", *f.MaxBody)
		}
		cfg.MaxBody = *f.MaxBody
	}
	if f.MaxResult != nil {
		if *f.MaxResult <= 0 || *f.MaxResult > 1<<30 {
			return fmt.Errorf("max_result = %d: want 1 to %d bytes", *f.MaxResult, 1<<30)
		}
		cfg.Ledger.MaxResult = int(*f.MaxResult)
	}
	if f.MaxBatchResult != nil {
		if *f.MaxBatchResult <= 0 || *f.MaxBatchResult > 1<<30 {
			return fmt.Errorf("max_batch_result = %d: want 1 to %d bytes", *f.MaxBatchResult, 1<<30)
		}
		cfg.Ledger.MaxBatchResult = int(*f.MaxBatchResult)
	}
	if f.MaxBodies != nil {
		if *f.MaxBodies <= 0 {
			return fmt.Errorf("max_bodies = %d: must be positive", *f.MaxBodies)
		}
		cfg.MaxBodies = *f.MaxBodies
	}
	if maxBody := cfg.maxBody(); cfg.MaxBodies < maxBody {
		return fmt.Errorf("max_bodies = %d: must be at least max_body (%d), or no request with the largest body could be served", cfg.MaxBodies, maxBody)
	}
	if f.SweepInterval != nil {
		if *f.SweepInterval <= 0 {
			return fmt.Errorf("sweep_interval = %q: must be positive", time.Duration(*f.SweepInterval))
		}
		cfg.SweepInterval = time.Duration(*f.SweepInterval)
	}
	if f.SweepBatch != nil {
		if *f.SweepBatch <= 0 || *f.SweepBatch > spent.MaxBatch {
			return fmt.Errorf("sweep_batch = %d: want 1 to %d", *f.SweepBatch, spent.MaxBatch)
		}
		cfg.SweepBatch = int(*f.SweepBatch)
	}
	if f.ShutdownTimeout != nil {
		if *f.ShutdownTimeout <= 0 {
			return fmt.Errorf("shutdown_timeout = %q: must be positive", time.Duration(*f.ShutdownTimeout))
		}
		cfg.ShutdownTimeout = time.Duration(*f.ShutdownTimeout)
	}
	if f.FenceInterval != nil {
		if time.Duration(*f.FenceInterval) < time.Second {
			return fmt.Errorf("fence_interval = %q: want at least 1s", time.Duration(*f.FenceInterval))
		}
		cfg.FenceInterval = time.Duration(*f.FenceInterval)
	}
	if f.LogLevel != nil {
		if err := cfg.LogLevel.UnmarshalText([]byte(*f.LogLevel)); err != nil {
			return fmt.Errorf("log_level = %q: want debug, info, warn or error", *f.LogLevel)
		}
	}
	if f.LogFormat != nil {
		if *f.LogFormat != "text" && *f.LogFormat != "json" {
			return fmt.Errorf("log_format = %q: want text or json", *f.LogFormat)
		}
		cfg.LogFormat = *f.LogFormat
	}

	if v := f.Store.URL; v != nil {
		if _, err := storeKind(*v); err != nil {
			return fmt.Errorf("[store] url: %w", err)
		}
		cfg.StoreURL = *v
	}
	if v := f.Store.AllowNonDurable; v != nil {
		cfg.AllowNonDurable = *v
	}
	if v := f.Store.ExpectedRecords; v != nil {
		if *v < 0 {
			return fmt.Errorf("[store] expected_records = %d: must not be negative", *v)
		}
		cfg.Store.ExpectedRecords = int(*v)
	}
	if v := f.Store.CacheSize; v != nil {
		cfg.Store.CacheSize = *v
	}
	if v := f.Store.MemTableSize; v != nil {
		if *v < 0 {
			return fmt.Errorf("[store] memtable_size = %d: must not be negative", *v)
		}
		cfg.Store.MemTableSize = uint64(*v)
	}
	if err := cfg.Store.Validate(); err != nil {
		return fmt.Errorf("[store]: %w", err)
	}

	if len(f.Namespaces) > 0 {
		// A file that names namespaces replaces the built-in "default".
		cfg.Ledger.Namespaces = make(map[string]spent.Policy, len(f.Namespaces))
		for name, ns := range f.Namespaces {
			p := spent.DefaultPolicy()
			if ns.Mode != nil {
				p.Mode = *ns.Mode
			}
			if ns.Retention != nil {
				p.Retention = time.Duration(*ns.Retention)
			}
			if ns.Lease != nil {
				p.Lease = time.Duration(*ns.Lease)
			}
			if ns.OnLeaseExpiry != nil {
				p.OnLeaseExpiry = *ns.OnLeaseExpiry
			}
			if ns.StoreRawKey != nil {
				p.StoreRawKey = *ns.StoreRawKey
			}
			if err := p.Validate(); err != nil {
				return fmt.Errorf("[namespaces.%s]: %w", name, err)
			}
			cfg.Ledger.Namespaces[name] = p
		}
	}

	if f.Privacypass != nil {
		pc := *f.Privacypass
		if err := pc.Validate(); err != nil {
			return fmt.Errorf("[privacypass]: %w", err)
		}
		if _, ok := cfg.Ledger.Namespaces[pc.Namespace]; !ok {
			// The token namespace is the server's to configure: refuse mode,
			// hold, and a retention as long as a token can live.
			if len(f.Namespaces) == 0 {
				cfg.Ledger.Namespaces = maps.Clone(cfg.Ledger.Namespaces)
			}
			cfg.Ledger.Namespaces[pc.Namespace] = privacypass.NamespacePolicy(pc.Epoch, pc.Grace, pc.Skew)
		}
		cfg.Privacypass = &pc
	}

	if f.Ecash != nil {
		ec := f.Ecash.config()
		// Validate wants a secret; the real one is derived at start.
		probe := ec
		probe.Secret = make([]byte, spent.MinSecretLen)
		if err := probe.Validate(); err != nil {
			return fmt.Errorf("[ecash]: %w", err)
		}
		for name, p := range ecash.NamespacePolicies(ec) {
			if _, ok := cfg.Ledger.Namespaces[name]; !ok {
				if len(f.Namespaces) == 0 && cfg.Privacypass == nil {
					cfg.Ledger.Namespaces = maps.Clone(cfg.Ledger.Namespaces)
				}
				cfg.Ledger.Namespaces[name] = p
			}
		}
		cfg.Ecash = &ec
	}

	seen := map[string]int{}
	for i, ft := range f.Tokens {
		t, err := ft.resolve(getenv, cfg.Ledger.Namespaces)
		if err != nil {
			return fmt.Errorf("[[tokens]] #%d: %w", i+1, err)
		}
		if j, dup := seen[t.Token]; dup {
			return fmt.Errorf("[[tokens]] #%d: the same token as #%d", i+1, j+1)
		}
		seen[t.Token] = i
		cfg.Tokens = append(cfg.Tokens, t)
	}
	return cfg.validate()
}

// resolve turns a file token into an http token, reading token_env through
// getenv and checking scopes and namespaces against those configured.
func (ft fileToken) resolve(getenv func(string) string, namespaces map[string]spent.Policy) (sphttp.Token, error) {
	var t sphttp.Token
	switch {
	case ft.Token != "" && ft.TokenEnv != "":
		return t, errors.New("set token or token_env, not both")
	case ft.TokenEnv != "":
		t.Token = getenv(ft.TokenEnv)
		if t.Token == "" {
			return t, fmt.Errorf("token_env = %q: the environment variable is unset or empty", ft.TokenEnv)
		}
	case ft.Token != "":
		t.Token = ft.Token
	default:
		return t, errors.New("no token: set token or token_env")
	}
	if len(t.Token) < sphttp.MinTokenLen {
		return t, fmt.Errorf("token of %d bytes: at least %d, so that it cannot be guessed", len(t.Token), sphttp.MinTokenLen)
	}
	if !sphttp.ValidToken(t.Token) {
		return t, errors.New("token: use only letters, digits and -._~+/ (then optional = padding), as a bearer token must")
	}
	if len(ft.Scopes) == 0 {
		return t, fmt.Errorf("scopes: none given; want %q, %q or both", sphttp.ScopeClaim, sphttp.ScopeAdmin)
	}
	for _, s := range ft.Scopes {
		switch sphttp.Scope(s) {
		case sphttp.ScopeClaim, sphttp.ScopeAdmin:
			if !slices.Contains(t.Scopes, sphttp.Scope(s)) {
				t.Scopes = append(t.Scopes, sphttp.Scope(s))
			}
		default:
			return t, fmt.Errorf("scope %q: want %q or %q", s, sphttp.ScopeClaim, sphttp.ScopeAdmin)
		}
	}
	for _, n := range ft.Namespaces {
		if _, ok := namespaces[n]; !ok {
			return t, fmt.Errorf("namespace %q is not configured (have %s)", n, strings.Join(sortedKeys(namespaces), ", "))
		}
	}
	t.Namespaces = append([]string(nil), ft.Namespaces...)
	return t, nil
}

// validate checks the whole configuration with the root Config.Validate. The
// secret is read from the data directory only at start, so a placeholder of
// the right size stands in for it here.
func (cfg *serveConfig) validate() error {
	lc := cfg.Ledger
	lc.Secret = make([]byte, spent.MinSecretLen)
	if err := lc.Validate(); err != nil {
		return err
	}
	if cfg.Listen == "" {
		return errors.New("listen: empty address")
	}
	if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		return fmt.Errorf("listen = %q: %w", cfg.Listen, err)
	}
	if cfg.Data == "" {
		return errors.New("data: empty directory")
	}
	return nil
}

// maxBody is the largest request body the server accepts.
func (cfg *serveConfig) maxBody() int64 {
	if cfg.MaxBody > 0 {
		return cfg.MaxBody
	}
	return sphttp.DefaultMaxBody
}

// checkListen refuses a non-loopback address while no tokens are configured:
// without auth, anyone who can reach the port could claim and resolve keys.
func (cfg *serveConfig) checkListen() error {
	if len(cfg.Tokens) > 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %q: %w", cfg.Listen, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen %q: no tokens are configured, so auth is off and spent only listens on a loopback address (127.0.0.1, [::1], localhost); add [[tokens]] to the config file to listen elsewhere", cfg.Listen)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
