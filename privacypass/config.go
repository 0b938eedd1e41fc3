package privacypass

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Attesters: how the issuer identifies a client for its quota.
const (
	// AttesterBearer identifies a client by the bearer token it sends
	// ("Authorization: Bearer …"), one of Config.AttesterTokens.
	AttesterBearer = "bearer"
	// AttesterMTLS identifies a client by the subject of its verified TLS
	// client certificate; the http.Server must be configured to request and
	// verify client certificates.
	AttesterMTLS = "mtls"
)

// Default paths and limits of the server.
const (
	// DefaultRequestPath is the default path of the token-request endpoint.
	DefaultRequestPath = "/token-request"
	// RedeemPath is the redemption endpoint for relays that delegate
	// verification to spent.
	RedeemPath = "/v1/redeem"
	// MinAttesterTokenLen is the shortest attester token accepted, in bytes.
	MinAttesterTokenLen = 8
)

// Config is the [privacypass] section of spent's configuration: an issuer
// (its directory and token-request endpoint) and the POST /v1/redeem
// endpoint over one ledger. Start from DefaultConfig and check it with
// Validate; the TOML keys are given with each field. It decodes from TOML
// directly (see UnmarshalTOML).
type Config struct {
	// IssuerName is the issuer_name of challenges. TOML issuer_name;
	// required.
	IssuerName string
	// OriginInfo are the origin names /v1/redeem's challenges carry. TOML
	// origin_info; default none (a challenge for any origin).
	OriginInfo []string
	// TokenTypes are the token types issued and redeemed, in the order
	// challenges list them. TOML token_types; default [2, 1].
	TokenTypes []TokenType
	// Epoch is the key epoch. TOML epoch; default 24h.
	Epoch time.Duration
	// Grace is how long after its epoch a key's tokens are accepted. TOML
	// grace; default 6h.
	Grace time.Duration
	// QuotaPerEpoch is how many tokens one client may obtain per epoch.
	// TOML quota_per_epoch; default 100.
	QuotaPerEpoch uint64
	// Attester is AttesterBearer or AttesterMTLS. TOML attester; default
	// bearer.
	Attester string
	// AttesterTokens are the bearer tokens that identify clients to the
	// issuer (at least MinAttesterTokenLen bytes; use 32 random bytes).
	// TOML attester_tokens; required with the bearer attester.
	AttesterTokens []string
	// Namespace is the ledger namespace of spends. TOML namespace; default
	// "privacypass".
	Namespace string
	// RequestPath is the token-request endpoint. TOML request_path;
	// default /token-request.
	RequestPath string
	// IssuerURL, when set, makes the directory's issuer-request-uri the
	// absolute IssuerURL + RequestPath; otherwise it is the path alone.
	// TOML issuer_url.
	IssuerURL string
	// Skew is the clock-skew allowance around key epochs. TOML skew;
	// default 5m.
	Skew time.Duration
	// ChallengeTTL is how long a challenge of /v1/redeem is accepted. TOML
	// challenge_ttl; default 10m.
	ChallengeTTL time.Duration
	// MaxChallenges bounds the challenges remembered. TOML max_challenges;
	// default 1048576.
	MaxChallenges int
	// StaticChallenge makes /v1/redeem send challenges with an empty
	// redemption context (see OriginConfig.StaticChallenge): needed when
	// several spent servers answer /v1/redeem for one origin. TOML
	// static_challenge; default false.
	StaticChallenge bool

	// Rand is the source of randomness; nil means crypto/rand. Not in TOML.
	Rand io.Reader
	// GenerateRSAKey makes 2048-bit RSA keys; nil means rsa.GenerateKey.
	// For tests. Not in TOML.
	GenerateRSAKey func() (*rsa.PrivateKey, error)
}

// DefaultConfig returns the defaults: token types [2, 1], 24 h epochs, 6 h
// grace, 100 tokens per client per epoch, bearer attester, namespace
// "privacypass", /token-request, 5 min skew, 10 min challenges. The issuer
// name and attester tokens must still be set.
func DefaultConfig() Config {
	return Config{
		TokenTypes:    []TokenType{TypeBlindRSA, TypeVOPRF},
		Epoch:         DefaultEpoch,
		Grace:         DefaultGrace,
		QuotaPerEpoch: 100,
		Attester:      AttesterBearer,
		Namespace:     DefaultNamespace,
		RequestPath:   DefaultRequestPath,
		Skew:          DefaultSkew,
		ChallengeTTL:  DefaultChallengeTTL,
		MaxChallenges: DefaultMaxChallenges,
	}
}

// Validate refuses unusable or unsafe settings. The safety rule behind it:
// a token's ledger entry expires exactly when its key stops accepting it
// (epoch end + grace, computed per key and stored with the key), so no
// setting may make the two differ; New checks the rest of that rule
// against the ledger's namespace policy.
func (c *Config) Validate() error {
	if !validName(c.IssuerName) {
		return fmt.Errorf("privacypass: issuer_name %q: 1 to %d bytes of visible ASCII", c.IssuerName, maxNameBytes)
	}
	for _, o := range c.OriginInfo {
		if !validName(o) || strings.Contains(o, ",") {
			return fmt.Errorf("privacypass: origin_info %q: a name of visible ASCII without commas", o)
		}
	}
	if len(c.TokenTypes) == 0 {
		return errors.New("privacypass: token_types: at least one of 2 (Blind RSA) and 1 (VOPRF)")
	}
	for i, t := range c.TokenTypes {
		if !t.Supported() {
			return fmt.Errorf("privacypass: token_types: %d is not supported (2 is Blind RSA, 1 is VOPRF)", t)
		}
		if slices.Contains(c.TokenTypes[:i], t) {
			return fmt.Errorf("privacypass: token_types: %d given twice", t)
		}
	}
	switch {
	case c.Epoch < time.Minute || c.Epoch > 366*24*time.Hour:
		return fmt.Errorf("privacypass: epoch %v: must be 1m to 366 days", c.Epoch)
	case c.Grace < 0 || c.Grace > 4*c.Epoch:
		return fmt.Errorf("privacypass: grace %v: must be 0 to 4 epochs", c.Grace)
	case c.Skew < 0 || c.Skew > c.Epoch/2:
		return fmt.Errorf("privacypass: skew %v: must be 0 to half an epoch", c.Skew)
	case c.QuotaPerEpoch < 1:
		return errors.New("privacypass: quota_per_epoch must be at least 1")
	case c.ChallengeTTL <= 0 || c.ChallengeTTL/time.Second > math.MaxInt32:
		// A challenge carries it as max-age, a 31-bit number of seconds.
		return fmt.Errorf("privacypass: challenge_ttl %v: must be positive and under 2^31 seconds (a challenge's max-age)", c.ChallengeTTL)
	case c.MaxChallenges < 1:
		return fmt.Errorf("privacypass: max_challenges %d: must be positive", c.MaxChallenges)
	case c.Namespace == "":
		return errors.New("privacypass: namespace must not be empty")
	case !strings.HasPrefix(c.RequestPath, "/") || c.RequestPath == RedeemPath || c.RequestPath == DirectoryPath:
		return fmt.Errorf("privacypass: request_path %q: an absolute path other than %s and %s", c.RequestPath, RedeemPath, DirectoryPath)
	}
	if c.IssuerURL != "" && !strings.HasPrefix(c.IssuerURL, "https://") && !strings.HasPrefix(c.IssuerURL, "http://") {
		return fmt.Errorf("privacypass: issuer_url %q: want an http(s) URL", c.IssuerURL)
	}
	switch c.Attester {
	case AttesterBearer:
		if len(c.AttesterTokens) == 0 {
			return errors.New("privacypass: attester_tokens: the bearer attester needs at least one token")
		}
		for i, t := range c.AttesterTokens {
			if len(t) < MinAttesterTokenLen || strings.ContainsFunc(t, func(r rune) bool { return r <= ' ' || r > '~' }) {
				return fmt.Errorf("privacypass: attester_tokens[%d]: at least %d bytes of visible ASCII", i, MinAttesterTokenLen)
			}
		}
	case AttesterMTLS:
		if len(c.AttesterTokens) != 0 {
			return errors.New("privacypass: attester_tokens are for the bearer attester; the mtls attester takes none")
		}
	default:
		return fmt.Errorf("privacypass: attester %q: want %q or %q", c.Attester, AttesterBearer, AttesterMTLS)
	}
	return nil
}

// UnmarshalTOML decodes the [privacypass] table (github.com/BurntSushi/toml
// calls it), on top of DefaultConfig: keys left out keep their defaults,
// unknown keys are an error, durations are Go duration strings ("24h").
func (c *Config) UnmarshalTOML(data any) error {
	m, ok := data.(map[string]any)
	if !ok {
		return errors.New("privacypass: want a table")
	}
	*c = DefaultConfig()
	for k, v := range m {
		var err error
		switch k {
		case "issuer_name":
			c.IssuerName, err = tomlString(v)
		case "origin_info":
			c.OriginInfo, err = tomlStrings(v)
		case "token_types":
			var ns []int64
			if ns, err = tomlInts(v); err == nil {
				c.TokenTypes = c.TokenTypes[:0]
				for _, n := range ns {
					if n < 0 || n > 0xffff {
						return fmt.Errorf("privacypass: token_types: %d is not a token type", n)
					}
					c.TokenTypes = append(c.TokenTypes, TokenType(n))
				}
			}
		case "epoch":
			c.Epoch, err = tomlDuration(v)
		case "grace":
			c.Grace, err = tomlDuration(v)
		case "skew":
			c.Skew, err = tomlDuration(v)
		case "challenge_ttl":
			c.ChallengeTTL, err = tomlDuration(v)
		case "quota_per_epoch":
			var n int64
			if n, err = tomlInt(v); err == nil {
				if n < 0 {
					return fmt.Errorf("privacypass: quota_per_epoch %d: must not be negative", n)
				}
				c.QuotaPerEpoch = uint64(n)
			}
		case "max_challenges":
			var n int64
			if n, err = tomlInt(v); err == nil {
				c.MaxChallenges = int(n)
			}
		case "attester":
			c.Attester, err = tomlString(v)
		case "attester_tokens":
			c.AttesterTokens, err = tomlStrings(v)
		case "namespace":
			c.Namespace, err = tomlString(v)
		case "request_path":
			c.RequestPath, err = tomlString(v)
		case "issuer_url":
			c.IssuerURL, err = tomlString(v)
		case "static_challenge":
			b, ok := v.(bool)
			if !ok {
				err = fmt.Errorf("want true or false, got %T", v)
			}
			c.StaticChallenge = b
		default:
			return fmt.Errorf("privacypass: unknown key %q", k)
		}
		if err != nil {
			return fmt.Errorf("privacypass: %s: %w", k, err)
		}
	}
	return nil
}

func tomlString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want a string, got %T", v)
	}
	return s, nil
}

func tomlStrings(v any) ([]string, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array of strings, got %T", v)
	}
	out := make([]string, 0, len(a))
	for _, e := range a {
		s, err := tomlString(e)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func tomlInt(v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("want an integer, got %T", v)
	}
	return n, nil
}

func tomlInts(v any) ([]int64, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array of integers, got %T", v)
	}
	out := make([]int64, 0, len(a))
	for _, e := range a {
		n, err := tomlInt(e)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func tomlDuration(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("want a duration string such as \"24h\", got %T", v)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: write it as a Go duration string such as \"6h\"", s)
	}
	return d, nil
}
