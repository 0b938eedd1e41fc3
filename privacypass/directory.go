package privacypass

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/cloudflare/circl/oprf"
	"github.com/spentledger/spent/internal/strictjson"
)

// Well-known path and media types of RFC 9578 and RFC 9577.
const (
	// DirectoryPath is where an issuer publishes its directory.
	DirectoryPath = "/.well-known/private-token-issuer-directory"
	// DirectoryMediaType is the content type of the directory.
	DirectoryMediaType = "application/private-token-issuer-directory"
	// RequestMediaType is the content type of a TokenRequest body.
	RequestMediaType = "application/private-token-request"
	// ResponseMediaType is the content type of a TokenResponse body.
	ResponseMediaType = "application/private-token-response"
)

// ErrDirectoryConflict is returned by Directory.Check when the directory
// shows two keys for one token type and epoch: an issuer that could tell
// its clients apart by the key it hands each of them.
var ErrDirectoryConflict = errors.New("privacypass: directory shows two keys for one epoch")

// Directory is an issuer directory (RFC 9578 §4).
type Directory struct {
	// IssuerRequestURI is the token-request endpoint: an absolute URI or a
	// path relative to the issuer's origin.
	IssuerRequestURI string
	// TokenKeys are the published keys, in the order of the document.
	TokenKeys []DirectoryKey
}

// DirectoryKey is one entry of "token-keys".
type DirectoryKey struct {
	// TokenType is the key's token type.
	TokenType TokenType
	// TokenKey is the encoded public key (RSASSA-PSS SPKI for 0x0002, the
	// compressed point for 0x0001).
	TokenKey []byte
	// NotBefore is when clients may start using the key; zero when absent.
	NotBefore time.Time
}

// ID returns the key's token_key_id.
func (k *DirectoryKey) ID() [KeyIDSize]byte { return KeyID(k.TokenKey) }

// MarshalJSON writes the directory in the member names of RFC 9578:
// "issuer-request-uri" and "token-keys", each key with "token-type",
// "token-key" (padded base64url) and, when set, "not-before" (Unix seconds).
func (d *Directory) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"issuer-request-uri":`)
	u, err := json.Marshal(d.IssuerRequestURI)
	if err != nil {
		return nil, err
	}
	b.Write(u)
	b.WriteString(`,"token-keys":[`)
	for i, k := range d.TokenKeys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"token-type":`)
		b.WriteString(formatType(k.TokenType))
		b.WriteString(`,"token-key":"`)
		b.WriteString(base64.URLEncoding.EncodeToString(k.TokenKey))
		b.WriteByte('"')
		if !k.NotBefore.IsZero() {
			b.WriteString(`,"not-before":`)
			b.WriteString(strconv.FormatInt(k.NotBefore.Unix(), 10))
		}
		b.WriteByte('}')
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}

// ParseDirectory parses an issuer directory by the rules of package
// strictjson (exact member names, no duplicates, valid UTF-8, nothing after
// the object, at most 1 MiB). Members this package does not know are
// ignored, as RFC 9578 asks; the known ones must have the right
// JSON types: a string URI, integer token types in 1..65535, base64url
// token keys, integer not-before times. Keys of unsupported types are kept
// (they are simply never used). Call Check before trusting it.
func ParseDirectory(b []byte) (*Directory, error) {
	var raw struct {
		URI  *string `json:"issuer-request-uri"`
		Keys *[]struct {
			Type      json.Number `json:"token-type"`
			Key       *string     `json:"token-key"`
			NotBefore json.Number `json:"not-before"`
		} `json:"token-keys"`
	}
	if err := (strictjson.Rules{SkipUnknown: true}).Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: directory: %w", ErrMalformed, err)
	}
	if raw.URI == nil || *raw.URI == "" {
		return nil, fmt.Errorf("%w: directory: no issuer-request-uri", ErrMalformed)
	}
	if raw.Keys == nil {
		return nil, fmt.Errorf("%w: directory: no token-keys", ErrMalformed)
	}
	d := &Directory{IssuerRequestURI: *raw.URI}
	for i, k := range *raw.Keys {
		t, err := strconv.ParseUint(k.Type.String(), 10, 16)
		if err != nil || t == 0 {
			return nil, fmt.Errorf("%w: directory: token-keys[%d]: token-type %q", ErrMalformed, i, k.Type)
		}
		if k.Key == nil {
			return nil, fmt.Errorf("%w: directory: token-keys[%d]: no token-key", ErrMalformed, i)
		}
		key, err := decodeB64URL(*k.Key)
		if err != nil {
			return nil, fmt.Errorf("directory: token-keys[%d]: token-key: %w", i, err)
		}
		dk := DirectoryKey{TokenType: TokenType(t), TokenKey: key}
		if k.NotBefore != "" {
			nb, err := strconv.ParseInt(k.NotBefore.String(), 10, 64)
			if err != nil || nb < 0 || nb > math.MaxInt64/int64(time.Second) {
				return nil, fmt.Errorf("%w: directory: token-keys[%d]: not-before %q", ErrMalformed, i, k.NotBefore)
			}
			dk.NotBefore = time.Unix(nb, 0).UTC()
		}
		d.TokenKeys = append(d.TokenKeys, dk)
	}
	return d, nil
}

// Check refuses a directory a client must not use: a key of a supported
// type that does not parse, or two keys of one type in one epoch
// (ErrDirectoryConflict), which would let the issuer give each client its
// own key and recognise its tokens. With epoch > 0, keys are in one epoch
// when their not-before times fall in the same epoch-long interval counted
// from the Unix epoch (spent's issuers align keys so); with epoch 0, when
// their not-before times are equal (absent counts as equal).
func (d *Directory) Check(epoch time.Duration) error {
	type slot struct {
		t TokenType
		n int64
	}
	seen := map[slot]bool{}
	for i := range d.TokenKeys {
		k := &d.TokenKeys[i]
		if !k.TokenType.Supported() {
			continue
		}
		if err := checkTokenKey(k.TokenType, k.TokenKey); err != nil {
			return fmt.Errorf("directory: token-keys[%d]: %w", i, err)
		}
		s := slot{t: k.TokenType, n: k.NotBefore.Unix()}
		if k.NotBefore.IsZero() {
			s.n = math.MinInt64
		} else if epoch > 0 {
			s.n = floorDiv(k.NotBefore.UnixNano(), int64(epoch))
		}
		if seen[s] {
			return fmt.Errorf("%w: token type %v, not-before %s", ErrDirectoryConflict, k.TokenType, k.NotBefore.Format(time.RFC3339))
		}
		seen[s] = true
	}
	return nil
}

// Key returns the key a client should use for type t at now: the one with
// the latest not-before at or before now.
func (d *Directory) Key(t TokenType, now time.Time) (DirectoryKey, bool) {
	var best DirectoryKey
	found := false
	for _, k := range d.TokenKeys {
		if k.TokenType != t || k.NotBefore.After(now) {
			continue
		}
		if !found || k.NotBefore.After(best.NotBefore) {
			best, found = k, true
		}
	}
	return best, found
}

// checkTokenKey checks that key is a valid encoded public key of type t.
func checkTokenKey(t TokenType, key []byte) error {
	switch t {
	case TypeBlindRSA:
		_, err := ParsePublicKey(key)
		return err
	case TypeVOPRF:
		_, err := parseVOPRFPublicKey(key)
		return err
	}
	return fmt.Errorf("%w: %v", ErrTokenType, t)
}

// parseVOPRFPublicKey parses a compressed P-384 point strictly.
func parseVOPRFPublicKey(b []byte) (*oprf.PublicKey, error) {
	if len(b) != voprfNe || b[0] != 2 && b[0] != 3 {
		return nil, fmt.Errorf("%w: type 0x0001 token-key must be a %d-byte compressed P-384 point", ErrMalformed, voprfNe)
	}
	pk := new(oprf.PublicKey)
	if err := pk.UnmarshalBinary(oprf.SuiteP384, b); err != nil {
		return nil, fmt.Errorf("%w: type 0x0001 token-key: %w", ErrMalformed, err)
	}
	return pk, nil
}

// floorDiv returns a/b rounded towards minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
