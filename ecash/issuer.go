package ecash

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/privacypass"
)

// Defaults of Config.
const (
	DefaultSpendNamespace = "ecash-spend"
	DefaultIssueNamespace = "ecash-issue"
	DefaultDifficulty     = 20
	DefaultIssueValue     = 100
	DefaultChallengeTTL   = 10 * time.Minute
	// OriginInfo is the origin_info of the TokenChallenge every value token
	// answers: value tokens are not tied to an origin.
	OriginInfo = "ecash"
)

// DefaultDenominations are the denominations issued by default.
var DefaultDenominations = []uint64{1, 2, 5, 10, 20, 50, 100}

// Config configures an Issuer. Start from DefaultConfig.
type Config struct {
	// IssuerName names the issuer in the TokenChallenge tokens answer.
	// Required.
	IssuerName string
	// Denominations are the values of the keys (one key each per epoch).
	Denominations []uint64
	// Epoch, Grace and Skew are the key schedule: a key issues during its
	// epoch (± Skew) and its tokens are accepted until epoch end + Grace.
	// Defaults: privacypass.DefaultEpoch, DefaultGrace, DefaultSkew.
	Epoch, Grace, Skew time.Duration
	// Price is the least charge of a spend: the change may not exceed the
	// input's value less Price. Default 0.
	Price uint64
	// Difficulty is the proof-of-work difficulty of challenges, in leading
	// zero bits of SHA-256(challenge ‖ solution). Default 20.
	Difficulty uint8
	// IssueValue is the value issued for one solved challenge. Default 100.
	IssueValue uint64
	// ChallengeTTL is how long a challenge may be consumed. A consumed
	// challenge's response can be replayed for ChallengeTTL + Grace.
	// Default 10m.
	ChallengeTTL time.Duration
	// SpendNamespace and IssueNamespace are the ledger namespaces (echo
	// mode; see NamespacePolicies). Defaults "ecash-spend", "ecash-issue".
	SpendNamespace, IssueNamespace string
	// Secret keys the MAC of challenges (at least 32 bytes). Issuers
	// sharing a ledger must share it. Required.
	Secret []byte
	// Rand supplies challenge ids; nil means crypto/rand.
	Rand io.Reader
	// Logger receives signing faults; nil means slog.Default().
	Logger *slog.Logger
	// OnFresh, when set, is called after each new ledger record with its
	// kind ("spend" or "issue"), its ledger key and the response: for
	// metrics and tests.
	OnFresh func(kind, key string, r *Response)
}

// DefaultConfig returns the defaults; IssuerName and Secret must be set.
func DefaultConfig() Config {
	return Config{
		Denominations:  DefaultDenominations,
		Epoch:          privacypass.DefaultEpoch,
		Grace:          privacypass.DefaultGrace,
		Skew:           privacypass.DefaultSkew,
		Difficulty:     DefaultDifficulty,
		IssueValue:     DefaultIssueValue,
		ChallengeTTL:   DefaultChallengeTTL,
		SpendNamespace: DefaultSpendNamespace,
		IssueNamespace: DefaultIssueNamespace,
	}
}

// Validate refuses unusable settings.
func (c *Config) Validate() error {
	switch {
	case c.IssuerName == "":
		return errors.New("ecash: no issuer name")
	case len(c.Secret) < 32:
		return fmt.Errorf("ecash: secret of %d bytes: need at least 32", len(c.Secret))
	case len(c.Denominations) == 0:
		return errors.New("ecash: no denominations")
	case c.Epoch < time.Minute || c.Grace < 0 || c.Skew < 0:
		return fmt.Errorf("ecash: epoch %v (at least 1m), grace %v, skew %v", c.Epoch, c.Grace, c.Skew)
	case c.Difficulty > 40:
		return fmt.Errorf("ecash: difficulty %d: at most 40", c.Difficulty)
	case c.IssueValue == 0:
		return errors.New("ecash: issue value 0")
	case c.ChallengeTTL <= 0:
		return errors.New("ecash: challenge TTL must be positive")
	case c.SpendNamespace == "" || c.IssueNamespace == "" || c.SpendNamespace == c.IssueNamespace:
		return errors.New("ecash: spend and issue namespaces must be set and differ")
	}
	seen := map[uint64]bool{}
	for _, d := range c.Denominations {
		if d == 0 || seen[d] {
			return fmt.Errorf("ecash: denomination %d: zero or repeated", d)
		}
		seen[d] = true
	}
	return nil
}

// NamespacePolicies returns the ledger policies of the two namespaces of
// cfg: echo mode (a resend of the same bytes replays, other bytes are a
// mismatch), hold on lease expiry (never used: every claim is one-step),
// and a retention as long as a token lives. Every claim carries its own
// expiry, so the retention is only a bound.
func NamespacePolicies(cfg Config) map[string]spent.Policy {
	ret := cfg.Epoch + cfg.Grace + cfg.Skew
	if r := cfg.ChallengeTTL + cfg.Grace; r > ret {
		ret = r
	}
	p := spent.Policy{Mode: spent.ModeEcho, Retention: ret, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold}
	return map[string]spent.Policy{cfg.SpendNamespace: p, cfg.IssueNamespace: p}
}

// Issuer signs value tokens: against proof-of-work challenges (Issue) and as
// change for a spent token (Spend). It is safe for concurrent use.
type Issuer struct {
	cfg       Config
	ledger    *spent.Ledger
	keys      *Keys
	challenge []byte // the TokenChallenge every value token answers
	digest    [privacypass.DigestSize]byte

	books   books
	sigs    atomic.Uint64
	metrics *issuerMetrics
}

// New checks cfg and the ledger's namespaces and returns the issuer over
// ledger and keys (which must hold cfg's denominations, epoch and grace).
// It prepares the keys of the current and the next epoch.
func New(cfg Config, ledger *spent.Ledger, keys *Keys) (*Issuer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for _, ns := range []string{cfg.SpendNamespace, cfg.IssueNamespace} {
		if err := spent.RequirePolicy(ledger, ns, spent.PolicyNeed{
			Component: "ecash", Mode: spent.ModeEcho,
			Why: "a resent request must be answered with the stored response",
			Fix: "give it the policy of NamespacePolicies",
		}); err != nil {
			return nil, err
		}
	}
	if keys.cfg.Epoch != cfg.Epoch || keys.cfg.Grace != cfg.Grace {
		return nil, fmt.Errorf("ecash: keys have epoch %v and grace %v, config %v and %v", keys.cfg.Epoch, keys.cfg.Grace, cfg.Epoch, cfg.Grace)
	}
	tc := privacypass.TokenChallenge{TokenType: privacypass.TypeBlindRSA, IssuerName: cfg.IssuerName, OriginInfo: OriginInfo}
	ch, err := tc.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("ecash: issuer name: %w", err)
	}
	if err := keys.Prepare(ledger.Now()); err != nil {
		return nil, err
	}
	is := &Issuer{cfg: cfg, ledger: ledger, keys: keys, challenge: ch, digest: privacypass.ChallengeDigest(ch)}
	is.metrics = newIssuerMetrics(is)
	return is, nil
}

// KeysConfig returns the configuration of the key set an issuer of cfg
// needs: its issuer name, denominations, epoch and grace, with the key
// directory dir and the key-encryption key kek.
func (c *Config) KeysConfig(dir string, kek []byte) KeysConfig {
	return KeysConfig{Dir: dir, KEK: kek, IssuerName: c.IssuerName, Denominations: c.Denominations, Epoch: c.Epoch, Grace: c.Grace, Rand: c.Rand}
}

// Run prepares the keys of the current and the next epoch every interval
// (zero means a minute) until ctx ends, so that each key exists, and is
// published, a full epoch before it is used. Failures are logged and
// retried at the next tick. Without Run, the key list endpoint prepares
// them when asked.
func (is *Issuer) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := is.keys.Prepare(is.ledger.Now()); err != nil {
				is.cfg.Logger.Error("ecash: preparing keys", "err", err)
			}
		}
	}
}

// TokenChallenge returns the wire form of the TokenChallenge that every
// value token of this issuer answers.
func (is *Issuer) TokenChallenge() []byte { return append([]byte(nil), is.challenge...) }

// Keys returns the issuer's key set.
func (is *Issuer) Keys() *Keys { return is.keys }

// Stats are running totals of fresh records since the issuer started.
type Stats struct {
	// Issued is the value issued against challenges (IssueValue each).
	Issued uint64
	// Charged is the value the issuer kept: spend charges plus issuance
	// value not asked for.
	Charged uint64
	// Spends is the number of fresh spends.
	Spends uint64
	// Signatures is the number of blind signatures computed (a replay
	// computes none).
	Signatures uint64
}

// Stats returns the running totals.
func (is *Issuer) Stats() Stats {
	is.books.mu.Lock()
	defer is.books.mu.Unlock()
	return Stats{Issued: is.books.issued, Charged: is.books.charged, Spends: is.books.spends, Signatures: is.sigs.Load()}
}

// Answer is the issuer's answer to a spend or an issuance: the stored
// response bytes, and whether they were replayed from the ledger.
type Answer struct {
	Response []byte `json:"response"`
	Replayed bool   `json:"replayed"`
}

// Nullifier returns the ledger key of a token's spend: its token_key_id and
// nonce, in hex.
func Nullifier(tok *privacypass.Token) string {
	return hex.EncodeToString(tok.KeyID[:]) + hex.EncodeToString(tok.Nonce[:])
}

// Spend answers a spend request (its exact bytes). The order: the body
// parses (bad_request); a recorded spend of the same nullifier answers at
// once (replay, or double_spend); the token verifies under a key that
// accepts it now (proof_invalid); the outputs name current keys of their
// denominations and ask for at most the input's value less Price
// (bad_request); the outputs are signed; and the ledger records nullifier →
// (digest, response) in one durable step before the answer.
func (is *Issuer) Spend(ctx context.Context, body []byte) (Answer, error) {
	a, err := is.spend(ctx, body)
	count(is.metrics.spends, a, err)
	return a, err
}

// spend does the work of Spend.
func (is *Issuer) spend(ctx context.Context, body []byte) (Answer, error) {
	req, err := ParseSpend(body)
	if err != nil {
		return Answer{}, errorf(CodeBadRequest, err, "spend request")
	}
	tok, err := privacypass.ParseToken(req.Token)
	if err != nil || tok.TokenType != privacypass.TypeBlindRSA {
		return Answer{}, errorf(CodeBadRequest, err, "input token does not parse as a type 0x0002 token")
	}
	null := Nullifier(&tok)
	digest := Digest(body)
	if a, done, err := is.recorded(ctx, is.cfg.SpendNamespace, null, digest, CodeDoubleSpend); done {
		return a, err
	}
	now := is.ledger.Now()
	key, ok := is.keys.Find(tok.KeyID, now)
	switch {
	case tok.ChallengeDigest != is.digest:
		return Answer{}, errorf(CodeProofInvalid, nil, "input token answers another issuer's challenge")
	case !ok:
		return Answer{}, errorf(CodeProofInvalid, nil, "input token's key is unknown")
	case now.Before(key.NotBefore.Add(-is.cfg.Skew)) || !now.Before(key.AcceptUntil()):
		return Answer{}, errorf(CodeProofInvalid, nil, "input token's key does not accept tokens now")
	case !key.Verify(&tok):
		return Answer{}, errorf(CodeProofInvalid, nil, "input token's signature does not verify")
	}
	if req.Return > key.Denomination || key.Denomination-req.Return < is.cfg.Price {
		return Answer{}, errorf(CodeBadRequest, nil, "return %d exceeds the input's value %d less the price %d", req.Return, key.Denomination, is.cfg.Price)
	}
	resp, err := is.sign(req.Outputs, req.Return, key.Denomination, now)
	if err != nil {
		return Answer{}, err
	}
	return is.record(ctx, "spend", is.cfg.SpendNamespace, null, digest, resp, key.AcceptUntil(), CodeDoubleSpend)
}

// recorded answers from the ledger when key is already recorded: the stored
// bytes for the same digest, the mismatch code for another. done is false
// when nothing is recorded (or the read failed: the claim will tell).
func (is *Issuer) recorded(ctx context.Context, ns, key string, digest []byte, mismatch string) (Answer, bool, error) {
	r, err := is.ledger.Get(ctx, ns, key)
	if err != nil || r.State != spent.StateComplete {
		return Answer{}, false, nil
	}
	if !hmac.Equal(r.Fingerprint, digest) {
		return Answer{}, true, errorf(mismatch, nil, "recorded for another request at %s", r.FirstSeen.Format(time.RFC3339))
	}
	return Answer{Response: r.Result, Replayed: true}, true, nil
}

// sign checks the outputs and signs them. They must sum to ret and each must
// name the key of its denomination that issues now.
func (is *Issuer) sign(outs []Output, ret, value uint64, now time.Time) (*Response, error) {
	var sum uint64
	keys := make([]*Key, len(outs))
	for i, o := range outs {
		k, ok := is.keys.Find(o.KeyID, now)
		switch {
		case !ok || k.Denomination != o.Denomination:
			return nil, errorf(CodeBadRequest, nil, "output %d: no key of denomination %d with that id", i, o.Denomination)
		case now.Before(k.NotBefore.Add(-is.cfg.Skew)) || now.After(k.End.Add(is.cfg.Skew)):
			return nil, errorf(CodeBadRequest, nil, "output %d: the key does not issue now", i)
		case !k.inRange(o.Blinded):
			return nil, errorf(CodeBadRequest, nil, "output %d: blinded message out of range", i)
		}
		keys[i] = k
		if sum += o.Denomination; sum < o.Denomination {
			return nil, errorf(CodeBadRequest, nil, "outputs overflow")
		}
	}
	if sum != ret {
		return nil, errorf(CodeBadRequest, nil, "outputs sum to %d, the request asks for %d", sum, ret)
	}
	resp := &Response{Value: value, Charge: value - ret, BlindSigs: make([][]byte, len(outs))}
	for i, o := range outs {
		sig, err := keys[i].signer.BlindSign(o.Blinded)
		if err != nil {
			is.cfg.Logger.Error("ecash: blind signature failed", "err", err)
			return nil, errorf(CodeInternal, err, "signing output %d", i)
		}
		resp.BlindSigs[i] = sig
	}
	is.sigs.Add(uint64(len(outs)))
	return resp, nil
}

// record claims key with the response in one durable step and answers with
// whatever the ledger kept: this response when fresh, the stored bytes when
// an identical request won a race.
func (is *Issuer) record(ctx context.Context, kind, ns, key string, digest []byte, resp *Response, expires time.Time, mismatch string) (Answer, error) {
	b, err := resp.MarshalBinary()
	if err != nil {
		return Answer{}, errorf(CodeInternal, err, "response")
	}
	res, err := is.ledger.Claim(ctx, spent.Claim{Namespace: ns, Key: key, Fingerprint: digest, Result: b, ExpiresAt: expires, Place: is.cfg.IssuerName})
	if err != nil {
		if spent.ErrorCode(err) == spent.EUnavailable {
			return Answer{}, errorf(CodeUnavailable, err, "ledger")
		}
		return Answer{}, errorf(CodeInternal, err, "ledger")
	}
	switch res.Outcome {
	case spent.Fresh:
		is.books.fresh(kind, resp)
		if is.cfg.OnFresh != nil {
			is.cfg.OnFresh(kind, key, resp)
		}
		return Answer{Response: b}, nil
	case spent.Replayed:
		return Answer{Response: res.Record.Result, Replayed: true}, nil
	case spent.Mismatch:
		return Answer{}, errorf(mismatch, nil, "recorded for another request at %s", res.Record.FirstSeen.Format(time.RFC3339))
	}
	return Answer{}, errorf(CodeUnavailable, nil, "ledger answered %s", res.Outcome)
}

// Challenge is a proof-of-work challenge as the issuer hands it out.
type Challenge struct {
	// Raw is the wire form the issuance request carries.
	Raw []byte `json:"challenge"`
	// ID is the challenge id in hex: its ledger key once consumed.
	ID string `json:"id"`
	// Difficulty is the number of leading zero bits SHA-256(Raw ‖ uint64
	// solution) must have.
	Difficulty uint8 `json:"difficulty"`
	// ExpiresAt is the last instant the challenge may be consumed.
	ExpiresAt time.Time `json:"expires_at"`
}

func (is *Issuer) mac(b []byte) []byte {
	m := hmac.New(sha256.New, is.cfg.Secret)
	m.Write([]byte("spent ecash challenge v1"))
	m.Write(b)
	return m.Sum(nil)[:16]
}

// NewChallenge returns a fresh challenge. Challenges are stateless (their
// MAC proves they are this issuer's), so handing them out writes nothing.
func (is *Issuer) NewChallenge() (Challenge, error) {
	b := make([]byte, ChallengeIDSize, ChallengeSize)
	if _, err := io.ReadFull(is.cfg.Rand, b); err != nil {
		return Challenge{}, errorf(CodeInternal, err, "challenge id")
	}
	exp := is.ledger.Now().Add(is.cfg.ChallengeTTL).Truncate(time.Second)
	b = binary.BigEndian.AppendUint64(b, uint64(exp.Unix()))
	b = append(b, is.cfg.Difficulty)
	b = append(b, is.mac(b)...)
	return Challenge{Raw: b, ID: hex.EncodeToString(b[:ChallengeIDSize]), Difficulty: is.cfg.Difficulty, ExpiresAt: exp.UTC()}, nil
}

// ParseChallenge reads a challenge's wire form (without checking its MAC).
func ParseChallenge(b []byte) (Challenge, error) {
	if len(b) != ChallengeSize {
		return Challenge{}, fmt.Errorf("%w: challenge of %d bytes", ErrMalformed, len(b))
	}
	return Challenge{Raw: b, ID: hex.EncodeToString(b[:ChallengeIDSize]), Difficulty: b[ChallengeIDSize+8],
		ExpiresAt: time.Unix(int64(binary.BigEndian.Uint64(b[ChallengeIDSize:])), 0).UTC()}, nil
}

// Work returns the number of leading zero bits of SHA-256(challenge ‖
// uint64be(solution)).
func Work(challenge []byte, solution uint64) int {
	h := sha256.New()
	h.Write(challenge)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], solution)
	h.Write(n[:])
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	z := 0
	for i := 0; i < len(sum); i += 8 {
		w := binary.BigEndian.Uint64(sum[i:])
		z += bits.LeadingZeros64(w)
		if w != 0 {
			break
		}
	}
	return z
}

// Solve finds the least solution of challenge c, checking ctx every 4096
// tries.
func Solve(ctx context.Context, c Challenge) (uint64, error) {
	for s := uint64(0); ; s++ {
		if Work(c.Raw, s) >= int(c.Difficulty) {
			return s, nil
		}
		if s%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
	}
}

// Issue answers an issuance request (its exact bytes). The order: the body
// parses (bad_request); the challenge is this issuer's (challenge_gone); a
// recorded consumption of it answers at once (replay, or
// challenge_mismatch); the challenge has not expired (challenge_gone); the
// proof of work holds (proof_invalid); the outputs name current keys and sum
// to at most IssueValue (bad_request); they are signed; and the ledger
// records challenge id → (digest, response) in one durable step before the
// answer.
func (is *Issuer) Issue(ctx context.Context, body []byte) (Answer, error) {
	a, err := is.issue(ctx, body)
	count(is.metrics.issuances, a, err)
	return a, err
}

// issue does the work of Issue.
func (is *Issuer) issue(ctx context.Context, body []byte) (Answer, error) {
	req, err := ParseIssue(body)
	if err != nil {
		return Answer{}, errorf(CodeBadRequest, err, "issuance request")
	}
	n := ChallengeSize - 16
	if !hmac.Equal(is.mac(req.Challenge[:n]), req.Challenge[n:]) {
		return Answer{}, errorf(CodeChallengeGone, nil, "not a challenge of this issuer")
	}
	ch, _ := ParseChallenge(req.Challenge)
	digest := Digest(body)
	if a, done, err := is.recorded(ctx, is.cfg.IssueNamespace, ch.ID, digest, CodeChallengeMismatch); done {
		return a, err
	}
	now := is.ledger.Now()
	if !now.Before(ch.ExpiresAt) {
		return Answer{}, errorf(CodeChallengeGone, nil, "challenge expired at %s", ch.ExpiresAt.Format(time.RFC3339))
	}
	if Work(req.Challenge, req.Solution) < int(ch.Difficulty) {
		return Answer{}, errorf(CodeProofInvalid, nil, "the solution does not meet difficulty %d", ch.Difficulty)
	}
	var sum uint64
	for _, o := range req.Outputs {
		if sum += o.Denomination; sum < o.Denomination || sum > is.cfg.IssueValue {
			return Answer{}, errorf(CodeBadRequest, nil, "outputs ask for more than %d", is.cfg.IssueValue)
		}
	}
	resp, err := is.sign(req.Outputs, sum, is.cfg.IssueValue, now)
	if err != nil {
		return Answer{}, err
	}
	return is.record(ctx, "issue", is.cfg.IssueNamespace, ch.ID, digest, resp, ch.ExpiresAt.Add(is.cfg.Grace+time.Second), CodeChallengeMismatch)
}
