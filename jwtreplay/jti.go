package jwtreplay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spentledger/spent"
)

// LifetimeMode says what [JTI] does with a token whose exp lies further away
// than MaxLifetime.
type LifetimeMode string

// The lifetime modes.
const (
	// LifetimeRefuse rejects a token whose exp − now exceeds MaxLifetime,
	// before any ledger write.
	LifetimeRefuse LifetimeMode = "refuse"
	// LifetimeCap accepts such a token until min(exp, iat + MaxLifetime)
	// only: the verifier itself rejects it as expired past iat +
	// MaxLifetime, so the ledger remembers its id for as long as it is
	// accepted. A token without iat cannot be capped and is refused.
	LifetimeCap LifetimeMode = "cap"
)

// KeyFunc returns the key that verifies a token of issuer iss with header h:
// a public key (*ecdsa.PublicKey, *rsa.PublicKey, ed25519.PublicKey), a
// jose.JSONWebKey or *jose.JSONWebKeySet, or an HMAC secret ([]byte) when an
// HS algorithm is allowed. iss is read from the token before its signature
// is checked: use it to pick a key, never to trust anything. An error
// refuses the token (key_unknown).
type KeyFunc func(ctx context.Context, iss string, h jose.Header) (any, error)

// StaticKeys returns a KeyFunc over one key set, for every issuer: the key
// whose kid is the header's, or the set's only key when the header has no
// kid. A key whose "alg" is set verifies only that algorithm.
func StaticKeys(set jose.JSONWebKeySet) KeyFunc {
	return func(_ context.Context, _ string, h jose.Header) (any, error) {
		return pick(set, h)
	}
}

// IssuerKeys returns a KeyFunc that verifies each issuer's tokens with its
// own key set only, chosen as [StaticKeys] does; an issuer without a set is
// refused.
func IssuerKeys(sets map[string]jose.JSONWebKeySet) KeyFunc {
	return func(_ context.Context, iss string, h jose.Header) (any, error) {
		set, ok := sets[iss]
		if !ok {
			return nil, fmt.Errorf("no keys for issuer %s", spent.QuoteInput(iss))
		}
		return pick(set, h)
	}
}

func pick(set jose.JSONWebKeySet, h jose.Header) (any, error) {
	var k jose.JSONWebKey
	switch {
	case h.KeyID != "":
		ks := set.Key(h.KeyID)
		if len(ks) != 1 {
			return nil, fmt.Errorf("%d keys with kid %s", len(ks), spent.QuoteInput(h.KeyID))
		}
		k = ks[0]
	case len(set.Keys) == 1:
		k = set.Keys[0]
	default:
		return nil, fmt.Errorf("no kid in the header, and %d keys to choose from", len(set.Keys))
	}
	if k.Algorithm != "" && k.Algorithm != h.Algorithm {
		return nil, fmt.Errorf("key %s is for %s, not %s", spent.QuoteInput(k.KeyID), k.Algorithm, spent.QuoteInput(h.Algorithm))
	}
	if k.IsPublic() {
		return k.Key, nil
	}
	if pub := k.Public(); pub.Key != nil {
		return pub.Key, nil
	}
	return k.Key, nil // an HMAC secret
}

// AsymmetricAlgorithms are the signature algorithms accepted by default:
// RSA PKCS#1 v1.5 and PSS, ECDSA and EdDSA. Never none, never HMAC.
var AsymmetricAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

func isHMAC(a jose.SignatureAlgorithm) bool {
	return a == jose.HS256 || a == jose.HS384 || a == jose.HS512
}

// JTIOptions configures a [JTI]. Start from [DefaultJTIOptions] and set
// Issuers, Audience and Keys.
type JTIOptions struct {
	// Namespace is the ledger namespace of the (issuer, jti) markers: a
	// refuse namespace whose retention is at least MaxLifetime + Skew (see
	// [JTIOptions.Policy]). Default "jwt-jti".
	Namespace string
	// Issuers are the accepted values of the iss claim. Required; a token
	// of any other issuer is refused (claim_invalid).
	Issuers []string
	// Audience are the accepted values of the aud claim: a token must name
	// at least one. Required.
	Audience []string
	// Keys returns the key that verifies a token. Required.
	Keys KeyFunc
	// Algorithms are the accepted alg header values. Default
	// [AsymmetricAlgorithms]; HS256/384/512 may be added when Keys returns
	// secrets; none is refused.
	Algorithms []jose.SignatureAlgorithm
	// Skew is the clock skew allowed between the issuer and this server, in
	// both directions: the leeway for exp, nbf and iat. Default 1 minute.
	Skew time.Duration
	// MaxLifetime bounds how long a token is accepted from now (refuse
	// mode) or from its iat (cap mode), and so how long the ledger keeps its
	// id. Default 24 hours.
	MaxLifetime time.Duration
	// Lifetime is LifetimeRefuse (the default) or LifetimeCap.
	Lifetime LifetimeMode
	// MaxTokenLen is the longest token accepted, in bytes. Default 16 KiB.
	MaxTokenLen int
	// Scheme is the Authorization scheme the middleware reads the token
	// from and names in WWW-Authenticate. Default "Bearer".
	Scheme string
	// Realm, when set, is sent as the realm of the WWW-Authenticate
	// challenge.
	Realm string
	// Place is written into every record as the place that saw the token
	// (a node or service name). Default empty.
	Place string
	// Now is the clock. Nil means the service's clock when it has a Now
	// method (a *spent.Ledger does), else time.Now.
	Now func() time.Time
	// Logger receives what an operator must know: ledger failures and
	// misconfigurations (answered 503 and 500). Nil discards.
	Logger *slog.Logger
}

// DefaultJTIOptions returns the defaults described on each field of
// JTIOptions. Issuers, Audience and Keys are left empty and must be set.
func DefaultJTIOptions() JTIOptions {
	return JTIOptions{
		Namespace:   "jwt-jti",
		Algorithms:  slices.Clone(AsymmetricAlgorithms),
		Skew:        time.Minute,
		MaxLifetime: 24 * time.Hour,
		Lifetime:    LifetimeRefuse,
		MaxTokenLen: 16 << 10,
		Scheme:      "Bearer",
	}
}

// MaxIssuerLen is the longest issuer accepted, in bytes; with the jti it
// must fit in a ledger key (spent.MaxKeyLen).
const MaxIssuerLen = 255

// Validate refuses unusable or unsafe options.
func (o *JTIOptions) Validate() error {
	switch {
	case o.Namespace == "":
		return errors.New("jwtreplay: jti options: no Namespace")
	case len(o.Issuers) == 0:
		return errors.New("jwtreplay: jti options: no Issuers: name the issuers whose tokens are accepted")
	case len(o.Audience) == 0:
		return errors.New("jwtreplay: jti options: no Audience: name this service as the tokens' aud says it")
	case o.Keys == nil:
		return errors.New("jwtreplay: jti options: no Keys: set StaticKeys, IssuerKeys or a KeyFunc of your own")
	case o.Skew < 0:
		return fmt.Errorf("jwtreplay: jti options: Skew %v: must not be negative", o.Skew)
	case o.MaxLifetime <= o.Skew:
		return fmt.Errorf("jwtreplay: jti options: MaxLifetime %v: must be longer than Skew %v", o.MaxLifetime, o.Skew)
	case o.Lifetime != LifetimeRefuse && o.Lifetime != LifetimeCap:
		return fmt.Errorf("jwtreplay: jti options: Lifetime %q: want refuse or cap", o.Lifetime)
	case o.MaxTokenLen <= 0:
		return fmt.Errorf("jwtreplay: jti options: MaxTokenLen %d: must be positive", o.MaxTokenLen)
	case o.Scheme == "" || strings.ContainsAny(o.Scheme, " \t\","):
		return fmt.Errorf("jwtreplay: jti options: Scheme %q: want one token, such as Bearer", o.Scheme)
	case len(o.Place) > spent.MaxPlaceLen:
		return fmt.Errorf("jwtreplay: jti options: Place of %d bytes: at most %d", len(o.Place), spent.MaxPlaceLen)
	}
	for _, iss := range o.Issuers {
		if iss == "" || len(iss) > MaxIssuerLen {
			return fmt.Errorf("jwtreplay: jti options: issuer %q: want 1 to %d bytes", iss, MaxIssuerLen)
		}
	}
	return checkAlgorithms("jti", o.Algorithms, true)
}

func checkAlgorithms(who string, algs []jose.SignatureAlgorithm, hmacOK bool) error {
	if len(algs) == 0 {
		return fmt.Errorf("jwtreplay: %s options: no Algorithms", who)
	}
	for _, a := range algs {
		switch {
		case strings.EqualFold(string(a), "none"):
			return fmt.Errorf("jwtreplay: %s options: algorithm none: unsigned tokens are never accepted", who)
		case isHMAC(a) && !hmacOK:
			return fmt.Errorf("jwtreplay: %s options: algorithm %s: a DPoP proof is signed with an asymmetric key (RFC 9449 section 4.2)", who, a)
		case !isHMAC(a) && !slices.Contains(AsymmetricAlgorithms, a):
			return fmt.Errorf("jwtreplay: %s options: algorithm %q is not supported", who, a)
		}
	}
	return nil
}

// Retention returns the shortest retention the namespace needs:
// MaxLifetime + Skew, the furthest a marker's expires_at can lie from now.
func (o JTIOptions) Retention() time.Duration { return o.MaxLifetime + o.Skew }

// Policy returns the ledger policy of o.Namespace: refuse, retention
// [JTIOptions.Retention]. The ledger's max_expiry for it (by default its
// retention) must be at least as long.
func (o JTIOptions) Policy() spent.Policy { return policy(o.Retention()) }

// JTI verifies JWTs and refuses each (issuer, jti) after its first
// presentation, until the token can no longer be accepted: every token is
// single-use. Build it with
// [NewJTI]; use [JTI.Verify] or the middleware [JTI.Handler]. It is safe for
// concurrent use.
type JTI struct {
	svc  spent.Service
	o    JTIOptions
	now  func() time.Time
	log  *slog.Logger
	auth string // the WWW-Authenticate challenge without an error
}

// NewJTI returns a JTI over svc: a *spent.Ledger in the same process, or the
// Go client of a remote spent server (package
// github.com/spentledger/spent/http). When svc reports its namespace
// policies (a *spent.Ledger does), NewJTI refuses a namespace that is not in
// refuse mode or keeps records shorter than [JTIOptions.Retention]; over a
// remote server that check is the operator's.
func NewJTI(svc spent.Service, o JTIOptions) (*JTI, error) {
	if svc == nil {
		return nil, errors.New("jwtreplay: nil service")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := checkNamespace(svc, o.Namespace, o.Retention(), "MaxLifetime + Skew"); err != nil {
		return nil, err
	}
	o.Issuers = slices.Clone(o.Issuers)
	o.Audience = slices.Clone(o.Audience)
	o.Algorithms = slices.Clone(o.Algorithms)
	c := &JTI{svc: svc, o: o, now: clockOf(svc, o.Now), log: o.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.auth = challenge(o.Scheme, "realm", o.Realm)
	return c, nil
}

// JTIKey returns the ledger key of a token's (issuer, jti): the issuer
// length-prefixed, "<len(iss)>:<iss>:<jti>", so that ("ab", "c") and ("a",
// "bc") differ. The ledger stores its HMAC only.
func JTIKey(iss, jti string) string {
	return strconv.Itoa(len(iss)) + ":" + iss + ":" + jti
}

// Token is a verified JWT whose (issuer, jti) was claimed by this
// presentation.
type Token struct {
	// Claims are the registered claims.
	Claims jwt.Claims
	// ConfirmationJKT is the cnf.jkt claim, the thumbprint of the key a
	// DPoP-bound token is bound to (RFC 9449 section 6.1), or empty.
	ConfirmationJKT string
	// Header is the protected header.
	Header jose.Header
	// Payload is the verified claims set as sent, to decode claims of the
	// caller's own.
	Payload []byte
	// AcceptedUntil is the first instant at which the token is no longer
	// accepted: exp + Skew, or in cap mode no later than iat +
	// MaxLifetime. The ledger remembers its id exactly until then.
	AcceptedUntil time.Time
	// Seq is the seq of the ledger record.
	Seq spent.Seq
}

// tokenClaims are the claims a JTI reads, decoded with decodeJSON: by
// their exact, case-sensitive names.
type tokenClaims struct {
	jwt.Claims
	Cnf *struct {
		JKT string `json:"jkt"`
	} `json:"cnf,omitempty"`
}

// Verify verifies token, checks its claims and claims its (issuer, jti) in
// the ledger. It returns the token once, on its first presentation; every
// error is an *Error whose code says why (replayed on a later
// presentation; unavailable when the ledger failed, in which case the token
// must not be accepted either).
func (c *JTI) Verify(ctx context.Context, token string) (*Token, error) {
	if token == "" {
		return nil, refuse(CodeTokenMissing, "no access token")
	}
	if len(token) > c.o.MaxTokenLen {
		return nil, refuse(CodeTokenMalformed, "token of %d bytes: at most %d", len(token), c.o.MaxTokenLen)
	}
	sig, err := jose.ParseSignedCompact(token, c.o.Algorithms)
	if err != nil {
		return nil, parseError(err, CodeTokenMalformed, "token")
	}
	h := sig.Signatures[0].Header
	var unverified struct {
		Issuer string `json:"iss"`
	}
	if err := decodeJSON(sig.UnsafePayloadWithoutVerification(), &unverified); err != nil {
		return nil, refuseErr(CodeTokenMalformed, err, "the token's claims are not a JSON object that names each claim once")
	}
	if unverified.Issuer == "" {
		return nil, refuse(CodeClaimMissing, "the token has no iss claim")
	}
	if !slices.Contains(c.o.Issuers, unverified.Issuer) {
		return nil, refuse(CodeClaimInvalid, "issuer %s is not accepted here", spent.QuoteInput(unverified.Issuer))
	}
	key, err := c.o.Keys(ctx, unverified.Issuer, h)
	if err != nil || key == nil {
		return nil, refuseErr(CodeKeyUnknown, err, "no key verifies tokens of issuer %s with kid %s", spent.QuoteInput(unverified.Issuer), spent.QuoteInput(h.KeyID))
	}
	payload, err := sig.Verify(key)
	if err != nil {
		return nil, refuseErr(CodeSignatureInvalid, err, "the token's signature does not verify with the issuer's key")
	}
	var cl tokenClaims
	if err := decodeJSON(payload, &cl); err != nil {
		return nil, refuseErr(CodeClaimInvalid, err, "the token's claims do not have the registered types, or name a claim twice")
	}
	now := c.now()
	acceptedUntil, err := c.check(&cl, now)
	if err != nil {
		return nil, err
	}
	seq, err := claimOnce(ctx, c.svc, c.o.Namespace, JTIKey(cl.Issuer, cl.ID), c.o.Place, acceptedUntil, "token id")
	if err != nil {
		return nil, err
	}
	t := &Token{Claims: cl.Claims, Header: h, Payload: payload, AcceptedUntil: acceptedUntil, Seq: seq}
	if cl.Cnf != nil {
		t.ConfirmationJKT = cl.Cnf.JKT
	}
	return t, nil
}

// check checks the claims at now and returns the first instant at which the
// token is no longer accepted.
func (c *JTI) check(cl *tokenClaims, now time.Time) (time.Time, error) {
	switch {
	case cl.Issuer == "":
		return time.Time{}, refuse(CodeClaimMissing, "the token has no iss claim")
	case !slices.Contains(c.o.Issuers, cl.Issuer):
		return time.Time{}, refuse(CodeClaimInvalid, "issuer %s is not accepted here", spent.QuoteInput(cl.Issuer))
	case cl.ID == "":
		return time.Time{}, refuse(CodeClaimMissing, "the token has no jti claim: its replay could not be detected")
	case cl.Expiry == nil:
		return time.Time{}, refuse(CodeClaimMissing, "the token has no exp claim: its id would have to be remembered forever")
	case c.o.Lifetime == LifetimeCap && cl.IssuedAt == nil:
		return time.Time{}, refuse(CodeClaimMissing, "the token has no iat claim: its lifetime cannot be capped at MaxLifetime (%v) after issue", c.o.MaxLifetime)
	}
	if n := len(JTIKey(cl.Issuer, cl.ID)); n > spent.MaxKeyLen {
		return time.Time{}, refuse(CodeClaimInvalid, "jti of %d bytes: with the issuer at most %d", len(cl.ID), spent.MaxKeyLen-(n-len(cl.ID)))
	}
	err := cl.ValidateWithLeeway(jwt.Expected{AnyAudience: c.o.Audience, Time: now}, c.o.Skew)
	switch {
	case errors.Is(err, jwt.ErrInvalidAudience):
		return time.Time{}, refuseErr(CodeClaimInvalid, err, "the token's aud does not name this service (%s)", strings.Join(c.o.Audience, ", "))
	case errors.Is(err, jwt.ErrNotValidYet):
		return time.Time{}, refuseErr(CodeTokenNotYetValid, err, "the token is not valid before %s (nbf), and the skew allowed is %v", stamp(cl.NotBefore.Time()), c.o.Skew)
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return time.Time{}, refuseErr(CodeTokenNotYetValid, err, "the token was issued at %s (iat), later than now plus the skew allowed (%v)", stamp(cl.IssuedAt.Time()), c.o.Skew)
	case errors.Is(err, jwt.ErrExpired):
		return time.Time{}, refuseErr(CodeTokenExpired, err, "the token expired at %s (exp), and the skew allowed is %v", stamp(cl.Expiry.Time()), c.o.Skew)
	case err != nil:
		return time.Time{}, refuseErr(CodeClaimInvalid, err, "the token's claims are not acceptable")
	}
	exp := cl.Expiry.Time()
	until := exp.Add(c.o.Skew)
	why := "exp plus the skew"
	switch c.o.Lifetime {
	case LifetimeRefuse:
		if left := exp.Sub(now); left > c.o.MaxLifetime {
			return time.Time{}, refuse(CodeLifetimeTooLong, "the token expires at %s, %v from now: longer than the MaxLifetime accepted here (%v); ask the issuer for a shorter-lived token",
				stamp(exp), left.Round(time.Second), c.o.MaxLifetime)
		}
	case LifetimeCap:
		if limit := cl.IssuedAt.Time().Add(c.o.MaxLifetime); limit.Before(until) {
			until, why = limit, "iat plus MaxLifetime"
		}
	}
	// The ledger forgets the id at until: the token must be refused from
	// that instant on, so the acceptance window is half open.
	if !now.Before(until) {
		return time.Time{}, refuse(CodeTokenExpired, "the token is accepted until %s (%s), and it is %s", stamp(until), why, stamp(now))
	}
	return until, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// parseError maps a go-jose parse error.
func parseError(err error, malformed, what string) error {
	var ua *jose.ErrUnexpectedSignatureAlgorithm
	if errors.As(err, &ua) {
		return refuseErr(CodeAlgorithmNotAllowed, err, "the %s's alg is not one accepted here", what)
	}
	return refuseErr(malformed, err, "the %s is not one compact JWS", what)
}
