package privacypass

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
)

// DefaultNamespace is the ledger namespace tokens are spent in unless
// configured otherwise. It must be a refuse-mode namespace with the hold
// policy (see NamespacePolicy).
const DefaultNamespace = "privacypass"

// KeySource gives an origin the keys it verifies tokens with: a *Keyring
// (the issuer's own keys, both types) or a *DirectoryKeys (the public keys
// of a remote issuer's directory, type 0x0002 only).
type KeySource interface {
	// Lookup returns the key of type t with token_key_id id.
	Lookup(t TokenType, id [KeyIDSize]byte) (*VerificationKey, bool)
	// Current returns the key of type t that clients use at now: the one
	// challenges name in their token-key attribute.
	Current(t TokenType, now time.Time) (*VerificationKey, bool)
}

// The key sources.
var (
	_ KeySource = (*Keyring)(nil)
	_ KeySource = (*DirectoryKeys)(nil)
)

// OriginConfig configures an Origin.
type OriginConfig struct {
	// IssuerName is the issuer_name of the challenges.
	IssuerName string
	// OriginInfo are the origin names the challenges carry (joined with
	// commas); empty means a challenge valid for any origin of the issuer.
	OriginInfo []string
	// TokenTypes are the types challenged (one challenge each, in this
	// order) and accepted.
	TokenTypes []TokenType
	// Keys is where verification keys come from.
	Keys KeySource
	// Namespace is the ledger namespace of spends; empty means
	// DefaultNamespace.
	Namespace string
	// Place is recorded with each spend as the place it happened; empty
	// means the origin names (or the issuer name when there are none).
	Place string
	// Challenges remembers the challenges issued; nil means a set of its
	// own with the defaults. Share one set between origins of one process
	// so that each accepts tokens fetched for the others' challenges.
	Challenges *ChallengeSet
	// StaticChallenge sends challenges with an empty redemption context:
	// the same challenge every time, which any origin with the same names
	// accepts, so clients may fetch tokens ahead. The default is a fresh
	// random 32-byte context per challenge, which binds each token to one
	// challenge of this process (or of the origins sharing its set).
	StaticChallenge bool
	// OneStep records each spend complete in one ledger write. Faster, but
	// the wrapped handler cannot roll a spend back (Spend.Release returns
	// ErrNoRollback). The default is a two-step spend: a pending record
	// while the handler runs, completed after it returns unless released.
	OneStep bool
	// Skew is the clock-skew allowance for a key's not-before; zero means
	// DefaultSkew.
	Skew time.Duration
	// Rand is the source of redemption contexts; nil means crypto/rand.
	Rand io.Reader
	// Logger receives failures to complete spends; nil means slog.Default().
	Logger *slog.Logger
}

// Origin verifies tokens and spends them in the ledger: the redemption
// side of Privacy Pass, as net/http middleware (Middleware) or as a call
// (Redeem). It is safe for concurrent use.
type Origin struct {
	cfg    OriginConfig
	ledger *spent.Ledger
	log    *slog.Logger
	origin string // OriginInfo joined

	static map[[DigestSize]byte]bool

	redemptions *prometheus.CounterVec // MetricRedemptions
}

// NewOrigin checks cfg and returns an Origin that spends tokens in ledger.
// The namespace must be configured in the ledger in refuse mode with the
// hold policy, so that a spend is never retaken or answered as fresh
// twice.
func NewOrigin(ledger *spent.Ledger, cfg OriginConfig) (*Origin, error) {
	if ledger == nil {
		return nil, errors.New("privacypass: origin: no ledger")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Skew == 0 {
		cfg.Skew = DefaultSkew
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Challenges == nil {
		cfg.Challenges = NewChallengeSet(0, 0)
	}
	if cfg.Keys == nil {
		return nil, errors.New("privacypass: origin: no key source")
	}
	if len(cfg.TokenTypes) == 0 {
		return nil, errors.New("privacypass: origin: no token types")
	}
	for _, t := range cfg.TokenTypes {
		if !t.Supported() {
			return nil, fmt.Errorf("privacypass: origin: %w: %v", ErrTokenType, t)
		}
	}
	if cfg.Skew < 0 {
		return nil, errors.New("privacypass: origin: negative skew")
	}
	o := &Origin{cfg: cfg, ledger: ledger, log: cfg.Logger, origin: strings.Join(cfg.OriginInfo, ","),
		redemptions: newCounter(MetricRedemptions, "Privacy Pass redemptions, by token type and outcome (redeemed, or the code of the refusal).", outcomeRedeemed, cfg.TokenTypes)}
	probe := TokenChallenge{TokenType: cfg.TokenTypes[0], IssuerName: cfg.IssuerName, OriginInfo: o.origin}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("privacypass: origin: %w", err)
	}
	if o.cfg.Place == "" {
		o.cfg.Place = o.origin
		if o.cfg.Place == "" {
			o.cfg.Place = cfg.IssuerName
		}
	}
	if len(o.cfg.Place) > spent.MaxPlaceLen {
		return nil, fmt.Errorf("privacypass: origin: place of %d bytes: at most %d", len(o.cfg.Place), spent.MaxPlaceLen)
	}
	if err := checkPolicy(ledger, "privacypass: origin", cfg.Namespace, 0); err != nil {
		return nil, err
	}
	if cfg.StaticChallenge {
		o.static = map[[DigestSize]byte]bool{}
		for _, t := range cfg.TokenTypes {
			c := TokenChallenge{TokenType: t, IssuerName: cfg.IssuerName, OriginInfo: o.origin}
			raw, err := c.MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("privacypass: origin: %w", err)
			}
			o.static[ChallengeDigest(raw)] = true
		}
	}
	return o, nil
}

// checkPolicy refuses a namespace under which a spent token could be
// accepted again while it is still valid: one not in refuse mode, not hold
// on lease expiry (under retake a spend whose handler outlived the lease
// could be spent again), storing raw keys (a token's bytes), or, when life
// is set, keeping records for less than a token's life.
func checkPolicy(ledger *spent.Ledger, component, ns string, life time.Duration) error {
	return spent.RequirePolicy(ledger, ns, spent.PolicyNeed{
		Component: component, Mode: spent.ModeRefuse, OnLeaseExpiry: spent.LeaseExpiryHold, NoRawKey: true, Keep: life,
		Why: "a spent token must be refused for as long as it is acceptable (epoch + grace + skew), and a spend whose handler outlived its lease must not be spent again",
		Fix: "give it the policy of privacypass.NamespacePolicy",
	})
}

// NamespacePolicy returns the ledger policy of a token namespace for keys
// of the given epoch, grace and clock-skew allowance (Config.Epoch, Grace,
// Skew): refuse mode, hold on lease expiry, a 30-second lease for the
// wrapped handler, and a retention as long as a token can live (a token may
// be spent from skew before its key's epoch to grace after it). Every spend
// carries its own expiry, the key's last acceptance instant, so the
// retention is only a bound, which New checks.
func NamespacePolicy(epoch, grace, skew time.Duration) spent.Policy {
	return spent.Policy{Mode: spent.ModeRefuse, Retention: epoch + grace + skew, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold}
}

// Challenges returns fresh challenges, one per token type that has a
// current key, and remembers their digests. With StaticChallenge they are
// the same every time.
func (o *Origin) Challenges() []Challenge {
	now := o.ledger.Now()
	out := make([]Challenge, 0, len(o.cfg.TokenTypes))
	for _, t := range o.cfg.TokenTypes {
		key, ok := o.cfg.Keys.Current(t, now)
		if !ok {
			continue
		}
		c := Challenge{TokenChallenge: TokenChallenge{TokenType: t, IssuerName: o.cfg.IssuerName, OriginInfo: o.origin}, TokenKey: key.TokenKey, MaxAge: -1}
		if !o.cfg.StaticChallenge {
			c.TokenChallenge.RedemptionContext = make([]byte, RedemptionContextSize)
			if _, err := io.ReadFull(o.cfg.Rand, c.TokenChallenge.RedemptionContext); err != nil {
				o.log.Error("privacypass: redemption context", "err", err)
				continue
			}
			c.MaxAge = int(o.cfg.Challenges.TTL() / time.Second)
		}
		raw, err := c.TokenChallenge.MarshalBinary()
		if err != nil {
			o.log.Error("privacypass: challenge", "err", err)
			continue
		}
		c.Raw = raw
		if !o.cfg.StaticChallenge {
			o.cfg.Challenges.add(ChallengeDigest(raw), now)
		}
		out = append(out, c)
	}
	return out
}

// WriteChallenges adds fresh challenges to h's WWW-Authenticate field and
// reports whether there was at least one (there is none while no key is
// current).
func (o *Origin) WriteChallenges(h http.Header) bool {
	cs := o.Challenges()
	for i := range cs {
		h.Add("WWW-Authenticate", cs[i].String())
	}
	return len(cs) > 0
}

// RedeemError is why Redeem refused a token. Code is one of the Code*
// constants; for CodeDoubleSpend, Record is the ledger's record of the first
// spend (when and where).
type RedeemError struct {
	// Code is the stable error code (a Code* constant).
	Code string
	// Detail explains the refusal to a person.
	Detail string
	// Record is the ledger's record of the first spend, for
	// CodeDoubleSpend; nil otherwise.
	Record *spent.Record
	// Err is the cause, if any.
	Err error
}

// Error returns the code and the detail.
func (e *RedeemError) Error() string {
	if e.Err != nil {
		return "privacypass: " + e.Code + ": " + e.Detail + ": " + e.Err.Error()
	}
	return "privacypass: " + e.Code + ": " + e.Detail
}

// Unwrap returns the cause.
func (e *RedeemError) Unwrap() error { return e.Err }

func refused(code, format string, args ...any) *RedeemError {
	return &RedeemError{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// ErrNoRollback is returned by Spend.Release for a spend recorded in one
// step (OriginConfig.OneStep, or POST /v1/redeem).
var ErrNoRollback = errors.New("privacypass: this spend was recorded in one step and cannot be rolled back")

// Spend is an accepted token: the ledger holds its (key id, nonce) until
// its key's last acceptance instant.
type Spend struct {
	// Token is the token spent.
	Token Token
	// Key is the key that verified it.
	Key *VerificationKey
	// Record is the ledger's record of the spend.
	Record spent.Record

	origin  *Origin
	key     string
	oneStep bool

	mu    sync.Mutex
	state spendState
}

type spendState uint8

const (
	spendOpen spendState = iota
	spendReleased
	spendCompleted
)

// ExpiresAt is when the ledger forgets the spend: the key's last acceptance
// instant, from which the token is refused before the ledger is consulted.
func (s *Spend) ExpiresAt() time.Time { return s.Record.ExpiresAt }

// Release rolls the spend back, so that the token can be presented again:
// for a handler that rejects the request for a reason that is not the
// token's fault. Call it before the handler returns. It is durable on
// return; a second call does nothing.
func (s *Spend) Release(ctx context.Context) error {
	if s.oneStep {
		return ErrNoRollback
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case spendReleased:
		return nil
	case spendCompleted:
		return errors.New("privacypass: release after the handler returned: the spend is complete")
	}
	err := s.origin.ledger.Release(ctx, spent.Release{Namespace: s.origin.cfg.Namespace, Key: s.key, Seq: s.Record.Seq})
	if err != nil {
		return fmt.Errorf("privacypass: release: %w", err)
	}
	s.state = spendReleased
	return nil
}

// Complete ends a two-step spend that was not released, recording it
// complete in the ledger (durable on return); Middleware calls it when the
// wrapped handler returns. Until then the record is pending, which refuses
// the token just the same; a spend left pending (a crash, say) keeps the
// token spent and is listed among the ledger's unknown outcomes once its
// lease runs out. It does nothing for a one-step spend, or after Release.
func (s *Spend) Complete(ctx context.Context) error {
	if s.oneStep {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != spendOpen {
		return nil
	}
	s.state = spendCompleted
	_, err := s.origin.ledger.Complete(ctx, spent.Completion{Namespace: s.origin.cfg.Namespace, Key: s.key, Seq: s.Record.Seq, Result: []byte{}})
	return err
}

type spendKey struct{}

// SpendFromContext returns the spend of the token the request presented,
// in a handler wrapped by Origin.Middleware.
func SpendFromContext(ctx context.Context) (*Spend, bool) {
	s, ok := ctx.Value(spendKey{}).(*Spend)
	return s, ok
}

// ledgerKey is the ledger key of a token: hex(token_key_id) ‖ hex(nonce).
func ledgerKey(t *Token) string {
	var b [2 * (KeyIDSize + NonceSize)]byte
	hex.Encode(b[:], t.KeyID[:])
	hex.Encode(b[2*KeyIDSize:], t.Nonce[:])
	return string(b[:])
}

// Redeem verifies the token in wire form and spends it. The checks run in
// this order, each refusing with its code: the token parses (bad_request,
// unsupported_token_type), its key is known (unknown_key) and accepts
// tokens now (key_expired: refused before the ledger is consulted), it
// answers a challenge this origin issued (challenge_mismatch,
// challenge_gone), its authenticator verifies (proof_invalid), and the
// ledger records (token_key_id, nonce) as fresh (double_spend), with the
// entry expiring at the key's last acceptance instant. A store failure is
// unavailable and spends nothing. Without OneStep the spend is pending:
// call Spend.Complete when the request it admitted succeeded, or
// Spend.Release when it failed for a reason that is not the token's.
func (o *Origin) Redeem(ctx context.Context, raw []byte) (*Spend, error) {
	return o.redeem(ctx, raw, o.cfg.OneStep)
}

// redeem is redeemToken, counted in MetricRedemptions.
func (o *Origin) redeem(ctx context.Context, raw []byte, oneStep bool) (*Spend, error) {
	s, err := o.redeemToken(ctx, raw, oneStep)
	o.countRedemption(wireType(raw), err)
	return s, err
}

// countRedemption counts a redemption of a token of type t that err
// refused, or that succeeded when err is nil.
func (o *Origin) countRedemption(t TokenType, err error) {
	outcome := outcomeRedeemed
	if err != nil {
		outcome = codeOf(err)
	}
	o.redemptions.WithLabelValues(typeLabel(t), outcome).Inc()
}

// credential returns the token of r's Authorization header, or the
// refusal of a request without one (missing says what to present), which
// it counts as a redemption refused.
func (o *Origin) credential(r *http.Request, missing string) ([]byte, error) {
	raw, ok, err := ParseAuthorization(r.Header)
	switch {
	case err != nil:
		err = &RedeemError{Code: CodeBadRequest, Detail: "malformed PrivateToken credential", Err: err}
	case !ok:
		err = refused(CodeTokenRequired, "%s", missing)
	default:
		return raw, nil
	}
	o.countRedemption(0, err)
	return nil, err
}

// redeemToken does the work of Redeem, with oneStep for OriginConfig.OneStep.
func (o *Origin) redeemToken(ctx context.Context, raw []byte, oneStep bool) (*Spend, error) {
	tok, err := ParseToken(raw)
	if err != nil {
		if errors.Is(err, ErrTokenType) {
			return nil, &RedeemError{Code: CodeTokenType, Detail: "token type not accepted", Err: err}
		}
		return nil, &RedeemError{Code: CodeBadRequest, Detail: "token does not parse", Err: err}
	}
	accepted := false
	for _, t := range o.cfg.TokenTypes {
		accepted = accepted || t == tok.TokenType
	}
	if !accepted {
		return nil, refused(CodeTokenType, "%v is not accepted here", tok.TokenType)
	}
	key, ok := o.cfg.Keys.Lookup(tok.TokenType, tok.KeyID)
	if !ok {
		return nil, refused(CodeUnknownKey, "no key of %v has id %s", tok.TokenType, hexID(tok.KeyID))
	}
	now := o.ledger.Now()
	if now.Before(key.NotBefore.Add(-o.cfg.Skew)) {
		return nil, refused(CodeKeyExpired, "key %s is not valid before %s", hexID(key.ID), key.NotBefore.Format(time.RFC3339))
	}
	if !now.Before(key.AcceptUntil()) {
		return nil, refused(CodeKeyExpired, "tokens of key %s were accepted until %s", hexID(key.ID), key.AcceptUntil().Format(time.RFC3339))
	}
	if !o.static[tok.ChallengeDigest] {
		known, live := o.cfg.Challenges.check(tok.ChallengeDigest, now)
		switch {
		case !known:
			return nil, refused(CodeChallengeMismatch, "the token answers no challenge issued here")
		case !live:
			return nil, refused(CodeChallengeGone, "the token's challenge expired")
		}
	}
	if !key.Verify(&tok) {
		return nil, refused(CodeProofInvalid, "the token's authenticator does not verify")
	}
	s := &Spend{Token: tok, Key: key, origin: o, key: ledgerKey(&tok), oneStep: oneStep}
	c := spent.Claim{Namespace: o.cfg.Namespace, Key: s.key, Place: o.cfg.Place, ExpiresAt: key.AcceptUntil()}
	if oneStep {
		c.Result = []byte{}
	}
	res, err := o.ledger.Claim(ctx, c)
	if err != nil && spent.ErrorCode(err) == spent.EInvalid && !o.ledger.Now().Before(key.AcceptUntil()) {
		// The key's window closed between the check above and the claim:
		// the ledger refuses an expiry that is not in the future.
		return nil, refused(CodeKeyExpired, "tokens of key %s were accepted until %s", hexID(key.ID), key.AcceptUntil().Format(time.RFC3339))
	}
	if err != nil {
		code := CodeUnavailable
		if ec := spent.ErrorCode(err); ec != spent.EUnavailable && ec != spent.EInternal {
			code = CodeInternal
		}
		return nil, &RedeemError{Code: code, Detail: "the ledger could not record the spend; the token is not spent", Err: err}
	}
	switch res.Outcome {
	case spent.Fresh:
		s.Record = res.Record
		return s, nil
	case spent.Refused, spent.InProgress:
		r := res.Record
		return nil, &RedeemError{Code: CodeDoubleSpend, Record: &r,
			Detail: fmt.Sprintf("token spent at %s by %s", r.FirstSeen.UTC().Format(time.RFC3339Nano), r.Place)}
	}
	return nil, refused(CodeInternal, "unexpected ledger outcome %q", res.Outcome)
}

// Middleware returns a handler that admits a request to next only with a
// valid, unspent token in its Authorization header, spending it. A request
// without one gets 401 with fresh PrivateToken challenges (and a problem
// document saying why); a store failure gets 503 and spends nothing. The
// handler finds the spend with SpendFromContext and may Release it; unless
// released, a two-step spend is completed when next returns.
func (o *Origin) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := o.credential(r, "present a PrivateToken")
		if err != nil {
			o.refuse(w, err)
			return
		}
		s, err := o.redeem(r.Context(), raw, o.cfg.OneStep)
		if err != nil {
			o.refuse(w, err)
			return
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
			defer cancel()
			if err := s.Complete(ctx); err != nil {
				// The record stays pending under hold: the token stays
				// spent, and operators see it among unknown outcomes.
				o.log.Error("privacypass: completing a spend failed; the token stays spent", "err", err, "key_id", hexID(s.Token.KeyID))
			}
		}()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), spendKey{}, s)))
	})
}

// refuse answers a refused redemption: 401 with fresh challenges for the
// token's faults, 503 (no challenge needed: the token is intact) when the
// ledger failed, 500 for a bug.
func (o *Origin) refuse(w http.ResponseWriter, err error) {
	var re *RedeemError
	if !errors.As(err, &re) {
		re = &RedeemError{Code: CodeInternal, Detail: "internal error", Err: err}
	}
	switch re.Code {
	case CodeUnavailable:
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, re.Code, re.Detail)
		return
	case CodeInternal:
		o.log.Error("privacypass: redemption failed", "err", err)
		writeProblem(w, http.StatusInternalServerError, re.Code, re.Detail)
		return
	}
	if !o.WriteChallenges(w.Header()) {
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, CodeUnavailable, "no issuer key is ready")
		return
	}
	writeProblem(w, http.StatusUnauthorized, re.Code, re.Detail)
}

// retryAfter formats a duration as whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}
