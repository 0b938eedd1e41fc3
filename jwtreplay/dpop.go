package jwtreplay

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejson "github.com/go-jose/go-jose/v4/json"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spentledger/spent"
)

// ProofType is the typ header of a DPoP proof (RFC 9449 section 4.2).
const ProofType = "dpop+jwt"

// MinRSABits is the smallest RSA modulus accepted in a DPoP proof's jwk.
const MinRSABits = 2048

// DPoPOptions configures a [DPoP]. Start from [DefaultDPoPOptions].
type DPoPOptions struct {
	// Namespace is the ledger namespace of the (key thumbprint, jti)
	// markers: a refuse namespace whose retention is at least ProofAge + 2
	// × Skew (see [DPoPOptions.Policy]). Default "dpop-jti".
	Namespace string
	// Algorithms are the accepted alg header values, all asymmetric.
	// Default [AsymmetricAlgorithms].
	Algorithms []jose.SignatureAlgorithm
	// ProofAge is how long after its iat a proof is accepted. Default 60
	// seconds.
	ProofAge time.Duration
	// Skew is the clock skew allowed between the client and this server:
	// a proof's iat may be up to Skew in the future, and it is accepted up
	// to ProofAge + Skew after iat. Default 5 seconds.
	Skew time.Duration
	// MaxProofLen is the longest proof accepted, in bytes. Default 8 KiB.
	MaxProofLen int
	// URI returns the URI of a request as the client addressed it, which a
	// proof's htu must match (query and fragment are ignored). Default
	// [RequestURI]: the scheme of the connection, the Host header and the
	// path. Behind a proxy that changes any of them, set it to return the
	// public URI.
	URI func(r *http.Request) string
	// AccessToken returns the access token a request presents, whose hash
	// the proof's ath must then be; "" when none. Default [DPoPToken]: the
	// token of an "Authorization: DPoP" header.
	AccessToken func(r *http.Request) string
	// Place is written into every record as the place that saw the proof.
	// Default empty.
	Place string
	// Now is the clock. Nil means the service's clock when it has a Now
	// method (a *spent.Ledger does), else time.Now.
	Now func() time.Time
	// Logger receives what an operator must know: ledger failures and
	// misconfigurations (answered 503 and 500). Nil discards.
	Logger *slog.Logger
}

// DefaultDPoPOptions returns the defaults described on each field of
// DPoPOptions.
func DefaultDPoPOptions() DPoPOptions {
	return DPoPOptions{
		Namespace:   "dpop-jti",
		Algorithms:  slices.Clone(AsymmetricAlgorithms),
		ProofAge:    60 * time.Second,
		Skew:        5 * time.Second,
		MaxProofLen: 8 << 10,
		URI:         RequestURI,
		AccessToken: DPoPToken,
	}
}

// Validate refuses unusable or unsafe options.
func (o *DPoPOptions) Validate() error {
	switch {
	case o.Namespace == "":
		return errors.New("jwtreplay: dpop options: no Namespace")
	case o.ProofAge <= 0:
		return fmt.Errorf("jwtreplay: dpop options: ProofAge %v: must be positive", o.ProofAge)
	case o.Skew < 0:
		return fmt.Errorf("jwtreplay: dpop options: Skew %v: must not be negative", o.Skew)
	case o.MaxProofLen <= 0:
		return fmt.Errorf("jwtreplay: dpop options: MaxProofLen %d: must be positive", o.MaxProofLen)
	case o.URI == nil:
		return errors.New("jwtreplay: dpop options: no URI function (RequestURI is the default)")
	case o.AccessToken == nil:
		return errors.New("jwtreplay: dpop options: no AccessToken function (DPoPToken is the default)")
	case len(o.Place) > spent.MaxPlaceLen:
		return fmt.Errorf("jwtreplay: dpop options: Place of %d bytes: at most %d", len(o.Place), spent.MaxPlaceLen)
	}
	return checkAlgorithms("dpop", o.Algorithms, false)
}

// Retention returns the shortest retention the namespace needs: ProofAge +
// 2 × Skew, the furthest a marker's expires_at can lie from now (a proof
// whose iat is Skew ahead is remembered until iat + ProofAge + Skew).
func (o DPoPOptions) Retention() time.Duration { return o.ProofAge + 2*o.Skew }

// Policy returns the ledger policy of o.Namespace: refuse, retention
// [DPoPOptions.Retention].
func (o DPoPOptions) Policy() spent.Policy { return policy(o.Retention()) }

// DPoP checks DPoP proofs (RFC 9449) and refuses each (key thumbprint, jti)
// after its first presentation, for as long as the proof is accepted. Build
// it with [NewDPoP]; use [DPoP.Verify] or the middleware [DPoP.Handler]. It
// is safe for concurrent use.
type DPoP struct {
	svc  spent.Service
	o    DPoPOptions
	now  func() time.Time
	log  *slog.Logger
	auth string // the WWW-Authenticate challenge without an error
}

// NewDPoP returns a DPoP over svc, as [NewJTI] does: when svc reports its
// namespace policies, it refuses a namespace that is not in refuse mode or
// keeps records shorter than [DPoPOptions.Retention].
func NewDPoP(svc spent.Service, o DPoPOptions) (*DPoP, error) {
	if svc == nil {
		return nil, errors.New("jwtreplay: nil service")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := checkNamespace(svc, o.Namespace, o.Retention(), "ProofAge + 2 × Skew"); err != nil {
		return nil, err
	}
	o.Algorithms = slices.Clone(o.Algorithms)
	c := &DPoP{svc: svc, o: o, now: clockOf(svc, o.Now), log: o.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	names := make([]string, len(o.Algorithms))
	for i, a := range o.Algorithms {
		names[i] = string(a)
	}
	c.auth = challenge("DPoP", "algs", strings.Join(names, " "))
	return c, nil
}

// ProofRequest is what a proof is checked against.
type ProofRequest struct {
	// Proof is the DPoP header's value.
	Proof string
	// Method is the request's method, which htm must equal.
	Method string
	// URI is the request's absolute URI, which htu must match (query and
	// fragment ignored, both normalized as RFC 3986 section 6.2.2 and 6.2.3
	// say).
	URI string
	// AccessToken is the access token presented with the proof, or empty;
	// when set, the proof's ath must be its SHA-256, base64url-encoded.
	AccessToken string
}

// Proof is a checked DPoP proof whose (key thumbprint, jti) was claimed by
// this presentation.
type Proof struct {
	// Thumbprint is the JWK SHA-256 thumbprint of the proof's key (RFC
	// 7638), base64url without padding: the value an access token bound to
	// this key carries as cnf.jkt.
	Thumbprint string
	// Key is the proof's public key (its jwk header).
	Key jose.JSONWebKey
	// Algorithm is the proof's alg.
	Algorithm jose.SignatureAlgorithm
	// ID is the proof's jti.
	ID string
	// IssuedAt is the proof's iat.
	IssuedAt time.Time
	// AcceptedUntil is the first instant at which the proof is no longer
	// accepted, iat + ProofAge + Skew; the ledger remembers it until then.
	AcceptedUntil time.Time
	// Seq is the seq of the ledger record.
	Seq spent.Seq
}

// privateMembers are the JWK members that carry private key material (RFC
// 7518 section 6, RFC 8037) or a symmetric key.
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// proofClaims are the claims of a DPoP proof, decoded with decodeJSON: by
// their exact, case-sensitive names.
type proofClaims struct {
	ID       string           `json:"jti"`
	Method   string           `json:"htm"`
	URI      string           `json:"htu"`
	IssuedAt *jwt.NumericDate `json:"iat"`
	ATH      *string          `json:"ath"`
}

// Verify checks a DPoP proof against its request as RFC 9449 section 4.3
// says (but for server-provided nonces, which it does not support) and
// claims its (key thumbprint, jti) in the ledger. It returns the proof once,
// on its first presentation; every error is an *Error whose code says why.
func (c *DPoP) Verify(ctx context.Context, req ProofRequest) (*Proof, error) {
	p, key, err := c.check(req, c.now())
	if err != nil {
		return nil, err
	}
	seq, err := claimOnce(ctx, c.svc, c.o.Namespace, p.Thumbprint+":"+p.ID, c.o.Place, p.AcceptedUntil, "DPoP proof")
	if err != nil {
		if ErrorCode(err) == CodeLifetimeTooLong {
			// Not the client's doing: the ledger's max_expiry for the
			// namespace is shorter than the proof window.
			var e *Error
			errors.As(err, &e)
			return nil, refuseErr(CodeInternal, e.Err, "the ledger's max_expiry for namespace %q is shorter than ProofAge + 2 × Skew (%v)", c.o.Namespace, c.o.Retention())
		}
		return nil, err
	}
	p.Seq = seq
	p.Key = *key
	return p, nil
}

// check runs every check but the ledger's.
func (c *DPoP) check(req ProofRequest, now time.Time) (*Proof, *jose.JSONWebKey, error) {
	proof := req.Proof
	if proof == "" {
		return nil, nil, refuse(CodeProofMissing, "no DPoP proof")
	}
	if len(proof) > c.o.MaxProofLen {
		return nil, nil, refuse(CodeProofMalformed, "proof of %d bytes: at most %d", len(proof), c.o.MaxProofLen)
	}
	if err := c.checkHeader(proof); err != nil {
		return nil, nil, err
	}
	sig, err := jose.ParseSignedCompact(proof, c.o.Algorithms)
	if err != nil {
		return nil, nil, parseError(err, CodeProofMalformed, "proof")
	}
	h := sig.Signatures[0].Header
	key := h.JSONWebKey
	if key == nil || !key.Valid() || !key.IsPublic() {
		return nil, nil, refuse(CodeProofKey, "the proof's jwk is not an asymmetric public key")
	}
	if pub, ok := key.Key.(*rsa.PublicKey); ok && pub.N.BitLen() < MinRSABits {
		return nil, nil, refuse(CodeProofKey, "the proof's RSA key has %d bits: at least %d", pub.N.BitLen(), MinRSABits)
	}
	payload, err := sig.Verify(key)
	if err != nil {
		return nil, nil, refuseErr(CodeSignatureInvalid, err, "the proof's signature does not verify with its jwk")
	}
	var cl proofClaims
	if err := decodeJSON(payload, &cl); err != nil {
		return nil, nil, refuseErr(CodeClaimInvalid, err, "the proof's claims are not a JSON object with jti, htm and htu strings and a numeric iat, each named once")
	}
	switch {
	case cl.ID == "":
		return nil, nil, refuse(CodeClaimMissing, "the proof has no jti claim: its replay could not be detected")
	case cl.Method == "":
		return nil, nil, refuse(CodeClaimMissing, "the proof has no htm claim")
	case cl.URI == "":
		return nil, nil, refuse(CodeClaimMissing, "the proof has no htu claim")
	case cl.IssuedAt == nil:
		return nil, nil, refuse(CodeClaimMissing, "the proof has no iat claim")
	}
	if cl.Method != req.Method {
		return nil, nil, refuse(CodeMethodMismatch, "the proof is for method %s, the request is %s", spent.QuoteInput(cl.Method), spent.QuoteInput(req.Method))
	}
	if err := MatchURI(cl.URI, req.URI); err != nil {
		return nil, nil, refuseErr(CodeURIMismatch, err, "the proof is for URI %s, the request is for %s", spent.QuoteInput(cl.URI), spent.QuoteInput(req.URI))
	}
	iat := cl.IssuedAt.Time()
	until := iat.Add(c.o.ProofAge + c.o.Skew)
	switch {
	case iat.After(now.Add(c.o.Skew)):
		return nil, nil, refuse(CodeProofTime, "the proof was created at %s (iat), later than now (%s) plus the skew allowed (%v): check the client's clock", stamp(iat), stamp(now), c.o.Skew)
	case !now.Before(until):
		return nil, nil, refuse(CodeProofTime, "the proof was created at %s (iat) and is accepted for %v plus a skew of %v: make a new proof for each request", stamp(iat), c.o.ProofAge, c.o.Skew)
	}
	if req.AccessToken != "" {
		if cl.ATH == nil {
			return nil, nil, refuse(CodeClaimMissing, "the proof has no ath claim, and an access token is presented with it")
		}
		sum := sha256.Sum256([]byte(req.AccessToken))
		want := base64.RawURLEncoding.EncodeToString(sum[:])
		if subtle.ConstantTimeCompare([]byte(*cl.ATH), []byte(want)) != 1 {
			return nil, nil, refuse(CodeAccessTokenHash, "the proof's ath is not the hash of the access token presented with it")
		}
	}
	tp, err := key.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, nil, refuseErr(CodeProofKey, err, "the proof's jwk has no thumbprint")
	}
	jkt := base64.RawURLEncoding.EncodeToString(tp)
	if n := len(jkt) + 1 + len(cl.ID); n > spent.MaxKeyLen {
		return nil, nil, refuse(CodeClaimInvalid, "jti of %d bytes: at most %d", len(cl.ID), spent.MaxKeyLen-len(jkt)-1)
	}
	return &Proof{
		Thumbprint: jkt, Algorithm: jose.SignatureAlgorithm(h.Algorithm), ID: cl.ID,
		IssuedAt: iat, AcceptedUntil: until,
	}, key, nil
}

// checkHeader reads the proof's header before go-jose does, to refuse with
// a precise code what RFC 9449 section 4.3 refuses: another typ, none or a
// symmetric alg, no jwk, a jwk with private members.
func (c *DPoP) checkHeader(proof string) error {
	enc, _, ok := strings.Cut(proof, ".")
	if !ok {
		return refuse(CodeProofMalformed, "the proof is not one compact JWS")
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return refuseErr(CodeProofMalformed, err, "the proof's header is not base64url")
	}
	var h struct {
		Typ *string                        `json:"typ"`
		Alg string                         `json:"alg"`
		JWK map[string]josejson.RawMessage `json:"jwk"`
	}
	if err := decodeJSON(raw, &h); err != nil {
		return refuseErr(CodeProofMalformed, err, "the proof's header is not a JSON object that names each parameter once")
	}
	switch {
	case h.Typ == nil:
		return refuse(CodeProofType, "the proof has no typ header: want %s", ProofType)
	case !strings.EqualFold(*h.Typ, ProofType):
		return refuse(CodeProofType, "the proof's typ is %s: want %s", spent.QuoteInput(*h.Typ), ProofType)
	case !slices.Contains(c.o.Algorithms, jose.SignatureAlgorithm(h.Alg)):
		return refuse(CodeAlgorithmNotAllowed, "the proof's alg %s is not accepted here: want an asymmetric one of %s", spent.QuoteInput(h.Alg), c.algs())
	case h.JWK == nil:
		return refuse(CodeProofKey, "the proof has no jwk header")
	}
	for _, m := range privateMembers {
		if _, ok := h.JWK[m]; ok {
			return refuse(CodeProofKey, "the proof's jwk has the private or symmetric member %q: send the public key only", m)
		}
	}
	return nil
}

func (c *DPoP) algs() string {
	names := make([]string, len(c.o.Algorithms))
	for i, a := range c.o.Algorithms {
		names[i] = string(a)
	}
	return strings.Join(names, " ")
}
