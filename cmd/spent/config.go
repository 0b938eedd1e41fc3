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
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/audit"
	"github.com/spentledger/spent/door"
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
	// MaxBody is the largest request body in bytes, by default the http
	// package's; 0 keeps the http package's default too.
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
	// MaxWait is the longest wait a claim may ask for (sphttp.Config.MaxWait):
	// the key max_wait.
	MaxWait time.Duration
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
	// TLSCert and TLSKey are the PEM files of the server's certificate and
	// key; empty serves plain HTTP. TLSClientCA, when set, is the PEM file
	// of the CAs whose client certificates are required and verified.
	TLSCert, TLSKey, TLSClientCA string
	// AllowPlaintext lets the server listen on a non-loopback address
	// without TLS (it then logs a warning).
	AllowPlaintext bool
	// RESP is the RESP listener (resp_listen and the [resp] section).
	RESP respConfig
	// Audit is the acceptance audit (the [audit] section): on when
	// Audit.Dir is set. Its Node is set at start.
	Audit audit.Config
	// Limits is the policy every listener follows (package door): the
	// top-level keys max_clients, max_unauthenticated, auth_timeout,
	// read_timeout, write_timeout, idle_timeout and max_auth_failures. Its
	// MaxInFlight is MaxBodies.
	Limits door.Limits
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
		MaxWait:         sphttp.DefaultMaxWait,
		FenceInterval:   defaultFenceInterval,
		MaxBody:         sphttp.DefaultMaxBody,
		MaxBodies:       sphttp.DefaultMaxBodies,
		LogLevel:        slog.LevelInfo,
		LogFormat:       "text",
		Store:           pebble.DefaultOptions(),
		Limits:          door.DefaultLimits(),
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

// fileConfig is the TOML file in its own layout, names and types: the keys
// of docs/configuration.md. parse decodes a file over a fileConfig that holds
// the defaults (newFileConfig), so that a key the file leaves out keeps its
// default, and then checks every value and puts it into a serveConfig, a
// section at a time (applyServer, fileStore.apply, applyNamespaces,
// resolveTokens).
type fileConfig struct {
	Node            int64     `toml:"node"`
	Listen          string    `toml:"listen"`
	Data            string    `toml:"data"`
	MaxBody         int64     `toml:"max_body"`
	MaxResult       int64     `toml:"max_result"`
	MaxBatchResult  int64     `toml:"max_batch_result"`
	MaxBodies       int64     `toml:"max_bodies"`
	MaxClients      int64     `toml:"max_clients"`
	MaxUnauth       int64     `toml:"max_unauthenticated"`
	AuthTimeout     duration  `toml:"auth_timeout"`
	ReadTimeout     duration  `toml:"read_timeout"`
	WriteTimeout    duration  `toml:"write_timeout"`
	IdleTimeout     duration  `toml:"idle_timeout"`
	MaxAuthFailures int64     `toml:"max_auth_failures"`
	SweepInterval   duration  `toml:"sweep_interval"`
	SweepBatch      int64     `toml:"sweep_batch"`
	ShutdownTimeout duration  `toml:"shutdown_timeout"`
	MaxWait         duration  `toml:"max_wait"`
	FenceInterval   duration  `toml:"fence_interval"`
	LogLevel        string    `toml:"log_level"`
	LogFormat       string    `toml:"log_format"`
	TLSCert         string    `toml:"tls_cert"`
	TLSKey          string    `toml:"tls_key"`
	TLSClientCA     string    `toml:"tls_client_ca"`
	AllowPlaintext  bool      `toml:"allow_plaintext"`
	RESPListen      string    `toml:"resp_listen"`
	RESP            fileRESP  `toml:"resp"`
	Store           fileStore `toml:"store"`
	Audit           fileAudit `toml:"audit"`
	// Namespaces are left undecoded by the first pass: a map's entries start
	// from zero, so decodePolicies decodes each over spent.DefaultPolicy.
	Namespaces map[string]toml.Primitive `toml:"namespaces"`
	Tokens     []fileToken               `toml:"tokens"`
	// Privacypass decodes itself over privacypass.DefaultConfig; it is in
	// force only when the file has the section.
	Privacypass privacypass.Config `toml:"privacypass"`
	// Ecash holds ecash's defaults; it is in force only when the file has
	// the section.
	Ecash fileEcash `toml:"ecash"`
}

// fileStore is the [store] section.
type fileStore struct {
	URL             string `toml:"url"`
	AllowNonDurable bool   `toml:"allow_non_durable"`
	ExpectedRecords int64  `toml:"expected_records"`
	CacheSize       int64  `toml:"cache_size"`
	MemTableSize    int64  `toml:"memtable_size"`
}

// fileAudit is the [audit] section.
type fileAudit struct {
	Dir         string `toml:"dir"`
	MaxFileSize int64  `toml:"max_file_size"`
}

// apply checks the [audit] section and sets it in cfg.
func (a fileAudit) apply(cfg *serveConfig) error {
	c := audit.Config{Dir: a.Dir, Node: 1, MaxFileSize: a.MaxFileSize}
	if a.Dir == "" {
		if a.MaxFileSize != 0 {
			return errors.New("[audit] max_file_size without dir: set dir to turn the audit on")
		}
		cfg.Audit = audit.Config{}
		return nil
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("[audit]: %w", err)
	}
	cfg.Audit = c
	return nil
}

// filePolicy is a [namespaces.NAME] table.
type filePolicy struct {
	Mode          spent.Mode        `toml:"mode"`
	Retention     duration          `toml:"retention"`
	Lease         duration          `toml:"lease"`
	OnLeaseExpiry spent.LeaseExpiry `toml:"on_lease_expiry"`
	StoreRawKey   bool              `toml:"store_raw_key"`
	MaxExpiry     duration          `toml:"max_expiry"`
	MinExpiry     duration          `toml:"min_expiry"`
}

// fileEcash is the [ecash] section; see docs/ecash.md.
type fileEcash struct {
	IssuerName    string   `toml:"issuer_name"`
	Denominations []uint64 `toml:"denominations"`
	Epoch         duration `toml:"epoch"`
	Grace         duration `toml:"grace"`
	Skew          duration `toml:"skew"`
	Price         uint64   `toml:"price"`
	Difficulty    uint8    `toml:"difficulty"`
	IssueValue    uint64   `toml:"issue_value"`
	ChallengeTTL  duration `toml:"challenge_ttl"`
}

// fileToken is one [[tokens]] entry.
type fileToken struct {
	Token      string   `toml:"token"`
	TokenEnv   string   `toml:"token_env"`
	Namespaces []string `toml:"namespaces"`
	Scopes     []string `toml:"scopes"`
}

// newFileConfig returns the file's keys holding the values of cfg, for a file
// to be decoded over.
func newFileConfig(cfg serveConfig) fileConfig {
	e := ecash.DefaultConfig()
	return fileConfig{
		Node: int64(cfg.Ledger.Node), Listen: cfg.Listen, Data: cfg.Data,
		MaxBody: cfg.MaxBody, MaxResult: int64(cfg.Ledger.MaxResult),
		MaxBatchResult: int64(cfg.Ledger.MaxBatchResult), MaxBodies: cfg.MaxBodies,
		MaxClients: int64(cfg.Limits.MaxClients), MaxUnauth: int64(cfg.Limits.MaxUnauthenticated),
		AuthTimeout: duration(cfg.Limits.AuthTimeout), ReadTimeout: duration(cfg.Limits.ReadTimeout),
		WriteTimeout: duration(cfg.Limits.WriteTimeout), IdleTimeout: duration(cfg.Limits.IdleTimeout),
		MaxAuthFailures: int64(cfg.Limits.MaxAuthFailures),
		SweepInterval:   duration(cfg.SweepInterval), SweepBatch: int64(cfg.SweepBatch),
		ShutdownTimeout: duration(cfg.ShutdownTimeout), FenceInterval: duration(cfg.FenceInterval),
		MaxWait:  duration(cfg.MaxWait),
		LogLevel: cfg.LogLevel.String(), LogFormat: cfg.LogFormat,
		TLSCert: cfg.TLSCert, TLSKey: cfg.TLSKey, TLSClientCA: cfg.TLSClientCA, AllowPlaintext: cfg.AllowPlaintext,
		RESPListen: cfg.RESP.Listen,
		Store: fileStore{
			URL: cfg.StoreURL, AllowNonDurable: cfg.AllowNonDurable,
			ExpectedRecords: int64(cfg.Store.ExpectedRecords), CacheSize: cfg.Store.CacheSize,
			MemTableSize: int64(cfg.Store.MemTableSize),
		},
		Ecash: fileEcash{
			IssuerName: e.IssuerName,
			// A clone: the decoder writes a list into the slice it finds
			// when that has room, and this one is ecash's package default.
			Denominations: slices.Clone(e.Denominations),
			Epoch:         duration(e.Epoch), Grace: duration(e.Grace), Skew: duration(e.Skew),
			Price: e.Price, Difficulty: e.Difficulty, IssueValue: e.IssueValue,
			ChallengeTTL: duration(e.ChallengeTTL),
		},
	}
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

// parse decodes the TOML document doc over cfg and checks the result. The
// decoder's metadata tells which sections the file has and which keys
// nothing decoded: those are unknown, and refused before any value is
// checked.
func (cfg *serveConfig) parse(doc string, getenv func(string) string) error {
	f := newFileConfig(*cfg)
	md, err := toml.Decode(doc, &f)
	if err != nil {
		return err
	}
	policies, err := decodePolicies(&md, f.Namespaces)
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
	if err := f.applyServer(cfg); err != nil {
		return err
	}
	if err := f.Store.apply(cfg); err != nil {
		return err
	}
	if err := f.Audit.apply(cfg); err != nil {
		return err
	}
	if err := f.applyNamespaces(cfg, policies, md); err != nil {
		return err
	}
	if err := f.RESP.apply(cfg); err != nil {
		return err
	}
	if cfg.Tokens, err = resolveTokens(f.Tokens, getenv, cfg.Ledger.Namespaces); err != nil {
		return err
	}
	return cfg.validate()
}

// decodePolicies decodes each [namespaces.NAME] table over
// spent.DefaultPolicy, so that a key a table leaves out keeps its default.
func decodePolicies(md *toml.MetaData, tables map[string]toml.Primitive) (map[string]spent.Policy, error) {
	policies := make(map[string]spent.Policy, len(tables))
	for name, table := range tables {
		d := spent.DefaultPolicy()
		fp := filePolicy{Mode: d.Mode, Retention: duration(d.Retention), Lease: duration(d.Lease),
			OnLeaseExpiry: d.OnLeaseExpiry, StoreRawKey: d.StoreRawKey}
		if err := md.PrimitiveDecode(table, &fp); err != nil {
			return nil, err
		}
		policies[name] = spent.Policy{Mode: fp.Mode, Retention: time.Duration(fp.Retention),
			Lease: time.Duration(fp.Lease), OnLeaseExpiry: fp.OnLeaseExpiry, StoreRawKey: fp.StoreRawKey,
			MaxExpiry: time.Duration(fp.MaxExpiry), MinExpiry: time.Duration(fp.MinExpiry)}
	}
	return policies, nil
}

// applyServer checks the top-level keys and sets them in cfg.
func (f *fileConfig) applyServer(cfg *serveConfig) error {
	var level slog.Level
	levelErr := level.UnmarshalText([]byte(f.LogLevel))
	switch {
	case f.Node < 1 || f.Node > 1<<32-1:
		return fmt.Errorf("node = %d: want 1 to %d", f.Node, uint32(1<<32-1))
	case f.Data == "":
		return errors.New(`data = "": want a directory`)
	case f.MaxBody <= 0:
		return fmt.Errorf("max_body = %d: must be positive", f.MaxBody)
	case f.MaxResult <= 0 || f.MaxResult > 1<<30:
		return fmt.Errorf("max_result = %d: want 1 to %d bytes", f.MaxResult, 1<<30)
	case f.MaxBatchResult <= 0 || f.MaxBatchResult > 1<<30:
		return fmt.Errorf("max_batch_result = %d: want 1 to %d bytes", f.MaxBatchResult, 1<<30)
	case f.MaxBodies <= 0:
		return fmt.Errorf("max_bodies = %d: must be positive", f.MaxBodies)
	case f.MaxBodies < f.MaxBody:
		return fmt.Errorf("max_bodies = %d: must be at least max_body (%d), or no request with the largest body could be served", f.MaxBodies, f.MaxBody)
	case f.SweepInterval <= 0:
		return fmt.Errorf("sweep_interval = %q: must be positive", time.Duration(f.SweepInterval))
	case f.SweepBatch <= 0 || f.SweepBatch > spent.MaxBatch:
		return fmt.Errorf("sweep_batch = %d: want 1 to %d", f.SweepBatch, spent.MaxBatch)
	case f.ShutdownTimeout <= 0:
		return fmt.Errorf("shutdown_timeout = %q: must be positive", time.Duration(f.ShutdownTimeout))
	case f.MaxWait <= 0 || time.Duration(f.MaxWait) > spent.MaxWait:
		return fmt.Errorf("max_wait = %q: want more than 0s and at most %s", time.Duration(f.MaxWait), spent.MaxWait)
	case time.Duration(f.FenceInterval) < time.Second:
		return fmt.Errorf("fence_interval = %q: want at least 1s", time.Duration(f.FenceInterval))
	case levelErr != nil:
		return fmt.Errorf("log_level = %q: want debug, info, warn or error", f.LogLevel)
	case f.LogFormat != "text" && f.LogFormat != "json":
		return fmt.Errorf("log_format = %q: want text or json", f.LogFormat)
	case f.MaxClients < 1 || f.MaxClients > 1<<20:
		return fmt.Errorf("max_clients = %d: want 1 to %d", f.MaxClients, 1<<20)
	case f.MaxUnauth < 1 || f.MaxUnauth > f.MaxClients:
		return fmt.Errorf("max_unauthenticated = %d: want 1 to max_clients (%d)", f.MaxUnauth, f.MaxClients)
	case f.MaxAuthFailures < 1 || f.MaxAuthFailures > 1000:
		return fmt.Errorf("max_auth_failures = %d: want 1 to 1000", f.MaxAuthFailures)
	}
	for _, t := range []struct {
		key string
		d   duration
	}{{"auth_timeout", f.AuthTimeout}, {"read_timeout", f.ReadTimeout}, {"write_timeout", f.WriteTimeout}, {"idle_timeout", f.IdleTimeout}} {
		if time.Duration(t.d) < time.Second || time.Duration(t.d) > 24*time.Hour {
			return fmt.Errorf("%s = %q: want 1s to 24h", t.key, time.Duration(t.d))
		}
	}
	cfg.Ledger.Node = uint32(f.Node)
	cfg.Ledger.MaxResult, cfg.Ledger.MaxBatchResult = int(f.MaxResult), int(f.MaxBatchResult)
	cfg.Listen, cfg.Data = f.Listen, f.Data
	cfg.MaxBody, cfg.MaxBodies = f.MaxBody, f.MaxBodies
	cfg.Limits = door.Limits{MaxInFlight: f.MaxBodies, MaxClients: int(f.MaxClients), MaxUnauthenticated: int(f.MaxUnauth),
		AuthTimeout: time.Duration(f.AuthTimeout), ReadTimeout: time.Duration(f.ReadTimeout),
		WriteTimeout: time.Duration(f.WriteTimeout), IdleTimeout: time.Duration(f.IdleTimeout),
		MaxAuthFailures: int(f.MaxAuthFailures)}
	cfg.SweepInterval, cfg.SweepBatch = time.Duration(f.SweepInterval), int(f.SweepBatch)
	cfg.ShutdownTimeout = time.Duration(f.ShutdownTimeout)
	cfg.MaxWait = time.Duration(f.MaxWait)
	cfg.FenceInterval = time.Duration(f.FenceInterval)
	cfg.LogLevel, cfg.LogFormat = level, f.LogFormat
	cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = f.TLSCert, f.TLSKey, f.TLSClientCA
	cfg.AllowPlaintext = f.AllowPlaintext
	cfg.RESP.Listen = f.RESPListen
	return nil
}

// apply checks the [store] section and sets it in cfg.
func (s fileStore) apply(cfg *serveConfig) error {
	if _, err := storeKind(s.URL); err != nil {
		return fmt.Errorf("[store] url: %w", err)
	}
	if s.ExpectedRecords < 0 {
		return fmt.Errorf("[store] expected_records = %d: must not be negative", s.ExpectedRecords)
	}
	if s.MemTableSize < 0 {
		return fmt.Errorf("[store] memtable_size = %d: must not be negative", s.MemTableSize)
	}
	cfg.StoreURL, cfg.AllowNonDurable = s.URL, s.AllowNonDurable
	cfg.Store.ExpectedRecords = int(s.ExpectedRecords)
	cfg.Store.CacheSize = s.CacheSize
	cfg.Store.MemTableSize = uint64(s.MemTableSize)
	if err := cfg.Store.Validate(); err != nil {
		return fmt.Errorf("[store]: %w", err)
	}
	return nil
}

// applyNamespaces checks the policies of the file's namespaces and the
// [privacypass] and [ecash] sections, and sets the ledger's namespaces: the
// file's, or the built-in "default" when it names none, plus those the token
// issuers need and the file does not configure.
func (f *fileConfig) applyNamespaces(cfg *serveConfig, policies map[string]spent.Policy, md toml.MetaData) error {
	namespaces := maps.Clone(cfg.Ledger.Namespaces)
	if len(policies) > 0 {
		namespaces = policies
	}
	for _, name := range sortedKeys(policies) {
		if err := policies[name].Validate(); err != nil {
			return fmt.Errorf("[namespaces.%s]: %w", name, err)
		}
	}
	if md.IsDefined("privacypass") {
		pc := f.Privacypass
		if err := pc.Validate(); err != nil {
			return fmt.Errorf("[privacypass]: %w", err)
		}
		if _, ok := namespaces[pc.Namespace]; !ok {
			// The token namespace is the server's to configure: refuse mode,
			// hold, and a retention as long as a token can live.
			namespaces[pc.Namespace] = privacypass.NamespacePolicy(pc.Epoch, pc.Grace, pc.Skew)
		}
		cfg.Privacypass = &pc
	}
	if md.IsDefined("ecash") {
		ec := f.Ecash.config()
		// Validate wants a secret; the real one is derived at start.
		probe := ec
		probe.Secret = make([]byte, spent.MinSecretLen)
		if err := probe.Validate(); err != nil {
			return fmt.Errorf("[ecash]: %w", err)
		}
		for name, p := range ecash.NamespacePolicies(ec) {
			if _, ok := namespaces[name]; !ok {
				namespaces[name] = p
			}
		}
		cfg.Ecash = &ec
	}
	cfg.Ledger.Namespaces = namespaces
	return nil
}

// config returns the issuer configuration of the section, without its secret.
func (f *fileEcash) config() ecash.Config {
	c := ecash.DefaultConfig()
	c.IssuerName, c.Denominations = f.IssuerName, f.Denominations
	c.Epoch, c.Grace, c.Skew = time.Duration(f.Epoch), time.Duration(f.Grace), time.Duration(f.Skew)
	c.Price, c.Difficulty, c.IssueValue = f.Price, f.Difficulty, f.IssueValue
	c.ChallengeTTL = time.Duration(f.ChallengeTTL)
	return c
}

// resolveTokens resolves the [[tokens]] entries (see fileToken.resolve) and
// refuses two with the same token.
func resolveTokens(fts []fileToken, getenv func(string) string, namespaces map[string]spent.Policy) ([]sphttp.Token, error) {
	var tokens []sphttp.Token
	seen := map[string]int{}
	for i, ft := range fts {
		t, err := ft.resolve(getenv, namespaces)
		if err != nil {
			return nil, fmt.Errorf("[[tokens]] #%d: %w", i+1, err)
		}
		if j, dup := seen[t.Token]; dup {
			return nil, fmt.Errorf("[[tokens]] #%d: the same token as #%d", i+1, j+1)
		}
		seen[t.Token] = i
		tokens = append(tokens, t)
	}
	return tokens, nil
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
	if err := checkListenAddr(cfg.Listen); err != nil {
		return err
	}
	if cfg.RESP.Listen != "" {
		if err := checkListenAddr(cfg.RESP.Listen); err != nil {
			return fmt.Errorf("resp_listen: %w", err)
		}
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

// checkListen refuses, for the HTTP and the RESP listener, a non-loopback
// address while no tokens are configured (without auth, anyone who can
// reach the port could claim and resolve keys), and one without TLS unless
// allow_plaintext says so (tokens and results would cross the network in
// the clear).
func (cfg *serveConfig) checkListen() error {
	if err := cfg.checkAddr("listen", cfg.Listen); err != nil {
		return err
	}
	if cfg.RESP.Listen != "" {
		return cfg.checkAddr("resp_listen", cfg.RESP.Listen)
	}
	return nil
}

// checkAddr is checkListen for one listener, key naming its setting.
func (cfg *serveConfig) checkAddr(key, addr string) error {
	if err := checkListenAddr(addr); err != nil {
		return err
	}
	loopback, err := isLoopback(addr)
	switch {
	case err != nil:
		return fmt.Errorf("%s %q: %w", key, addr, err)
	case loopback:
		return nil
	case len(cfg.Tokens) == 0:
		return fmt.Errorf("%s %q: no tokens are configured, so auth is off and spent only listens on a loopback address (127.0.0.1, [::1], localhost); add [[tokens]] to the config file to listen elsewhere", key, addr)
	case cfg.TLSCert == "" && !cfg.AllowPlaintext:
		return fmt.Errorf("%s %q: not a loopback address and TLS is off, so bearer tokens and results would cross the network in the clear; set tls_cert and tls_key (--tls-cert, --tls-key; see docs/operations.md), or allow_plaintext = true (--allow-plaintext) where a TLS-terminating proxy or a private network carries the traffic", key, addr)
	}
	return nil
}

// checkListenAddr refuses a listen address that is not host:port with a
// numeric port, with an example built from what was given: "7084" is a port
// without its host, "example.org" a host without its port.
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr == nil {
			return nil
		}
	}
	example := "127.0.0.1:7070"
	switch {
	case addr != "" && strings.Trim(addr, "0123456789") == "":
		example = "127.0.0.1:" + addr
	case addr != "" && !strings.Contains(addr, ":"):
		example = addr + ":7070"
	}
	return fmt.Errorf("listen %q: want host:port with a numeric port, e.g. %s", addr, example)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
