package privacypass

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	circl "github.com/cloudflare/circl/blindsign/blindrsa"
	"github.com/cloudflare/circl/group"
	"github.com/cloudflare/circl/oprf"
	"github.com/cloudflare/circl/zk/dleq"
	"github.com/spentledger/spent/internal/problem"
)

// PendingToken is a token request on its way to the issuer, with the
// secrets the client needs to finalize the answer. Build it with
// NewPendingToken; it is used once.
type PendingToken struct {
	// Request is the token request to send.
	Request TokenRequest

	token    Token // everything but the authenticator
	rsa      circl.Client
	rsaState circl.State
	voprf    oprf.VerifiableClient
	finData  *oprf.FinalizeData
}

// NewPendingToken starts a token for the challenge (its wire form) under
// the issuer key tokenKey (as in the directory) of type t. rnd supplies
// the 32-byte nonce first, then the blinding randomness; nil means
// crypto/rand.
func NewPendingToken(challenge []byte, t TokenType, tokenKey []byte, rnd io.Reader) (*PendingToken, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var nonce [NonceSize]byte
	if _, err := io.ReadFull(rnd, nonce[:]); err != nil {
		return nil, fmt.Errorf("privacypass: nonce: %w", err)
	}
	switch t {
	case TypeBlindRSA:
		return newPendingRSA(challenge, tokenKey, nonce, rnd)
	case TypeVOPRF:
		blind := group.P384.RandomScalar(rnd)
		return newPendingVOPRF(challenge, tokenKey, nonce, blind)
	}
	return nil, fmt.Errorf("%w: %v", ErrTokenType, t)
}

func (p *PendingToken) init(t TokenType, challenge, tokenKey []byte, nonce [NonceSize]byte) error {
	c, err := ParseTokenChallenge(challenge)
	if err != nil {
		return err
	}
	if c.TokenType != t {
		return fmt.Errorf("%w: the challenge asks for %v, the key is for %v", ErrMalformed, c.TokenType, t)
	}
	p.token = Token{TokenType: t, Nonce: nonce, ChallengeDigest: ChallengeDigest(challenge), KeyID: KeyID(tokenKey)}
	p.Request.TokenType = t
	p.Request.TruncatedKeyID = TruncatedKeyID(p.token.KeyID)
	return nil
}

func newPendingRSA(challenge, tokenKey []byte, nonce [NonceSize]byte, rnd io.Reader) (*PendingToken, error) {
	pk, err := ParsePublicKey(tokenKey)
	if err != nil {
		return nil, err
	}
	p := &PendingToken{}
	if err := p.init(TypeBlindRSA, challenge, tokenKey, nonce); err != nil {
		return nil, err
	}
	if p.rsa, err = circl.NewClient(circl.SHA384PSSDeterministic, pk); err != nil {
		return nil, fmt.Errorf("privacypass: blind RSA client: %w", err)
	}
	blinded, state, err := p.rsa.Blind(rnd, p.token.AuthenticatorInput())
	if err != nil {
		return nil, fmt.Errorf("privacypass: blind: %w", err)
	}
	p.rsaState = state
	p.Request.BlindedMsg = blinded
	return p, nil
}

func newPendingVOPRF(challenge, tokenKey []byte, nonce [NonceSize]byte, blind group.Scalar) (*PendingToken, error) {
	pk, err := parseVOPRFPublicKey(tokenKey)
	if err != nil {
		return nil, err
	}
	p := &PendingToken{}
	if err := p.init(TypeVOPRF, challenge, tokenKey, nonce); err != nil {
		return nil, err
	}
	p.voprf = oprf.NewVerifiableClient(oprf.SuiteP384, pk)
	fin, req, err := p.voprf.DeterministicBlind([][]byte{p.token.AuthenticatorInput()}, []oprf.Blind{blind})
	if err != nil {
		return nil, fmt.Errorf("privacypass: blind: %w", err)
	}
	el, err := req.Elements[0].MarshalBinaryCompress()
	if err != nil {
		return nil, fmt.Errorf("privacypass: blinded element: %w", err)
	}
	p.finData = fin
	p.Request.BlindedMsg = el
	return p, nil
}

// Finalize turns the issuer's token response (wire form) into the token,
// checking it: the RSA signature must verify under the key, the VOPRF
// proof must show the issuer used the published key.
func (p *PendingToken) Finalize(response []byte) (Token, error) {
	resp, err := ParseTokenResponse(p.token.TokenType, response)
	if err != nil {
		return Token{}, err
	}
	tok := p.token
	switch tok.TokenType {
	case TypeBlindRSA:
		sig, err := p.rsa.Finalize(p.rsaState, resp.BlindSig)
		if err != nil {
			return Token{}, fmt.Errorf("privacypass: finalize: %w", err)
		}
		tok.Authenticator = sig
	case TypeVOPRF:
		el, err := parseElement(resp.EvaluateMsg)
		if err != nil {
			return Token{}, err
		}
		proof := new(dleq.Proof)
		if err := proof.UnmarshalBinary(group.P384, resp.EvaluateProof); err != nil {
			return Token{}, fmt.Errorf("%w: proof: %w", ErrMalformed, err)
		}
		out, err := p.voprf.Finalize(p.finData, &oprf.Evaluation{Elements: []oprf.Evaluated{el}, Proof: proof})
		if err != nil {
			return Token{}, fmt.Errorf("privacypass: finalize: %w", err)
		}
		tok.Authenticator = out[0]
	}
	return tok, nil
}

// Client obtains tokens from issuers and presents them to origins. The
// zero value works: it uses http.DefaultClient, no attester credentials,
// the system clock and crypto/rand.
type Client struct {
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// AttesterToken is sent to the issuer as "Authorization: Bearer …",
	// when set.
	AttesterToken string
	// Epoch is the issuer's key epoch, when known: Directory.Check then
	// refuses two keys of one type in one epoch. Zero refuses two keys of
	// one type with the same not-before.
	Epoch time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Rand supplies nonces and blinds; nil means crypto/rand.
	Rand io.Reader
}

func (c *Client) http() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// maxAnswer bounds the bodies the client reads.
const maxAnswer = 1 << 20

// problemOf turns a non-2xx answer into an error: the *Problem it carries,
// or a plain error with the status.
func problemOf(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if p, ok := problem.Read(resp.Header, b); ok {
		return &Problem{Type: p.Type, Title: p.Title, Status: resp.StatusCode, Detail: p.Detail, Code: p.Code}
	}
	return fmt.Errorf("privacypass: %s: %s", resp.Status, strings.TrimSpace(string(b[:min(len(b), 200)])))
}

// Directory fetches and checks the directory of the issuer at issuerURL
// (scheme and host; the well-known path is added). A directory that shows
// two keys for one epoch is refused with ErrDirectoryConflict.
func (c *Client) Directory(ctx context.Context, issuerURL string) (*Directory, error) {
	u, err := url.JoinPath(issuerURL, DirectoryPath)
	if err != nil {
		return nil, fmt.Errorf("privacypass: issuer URL: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("privacypass: %w", err)
	}
	req.Header.Set("Accept", DirectoryMediaType)
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("privacypass: directory: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, problemOf(resp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("privacypass: directory: %w", err)
	}
	d, err := ParseDirectory(b)
	if err != nil {
		return nil, err
	}
	if err := d.Check(c.Epoch); err != nil {
		return nil, err
	}
	return d, nil
}

// Issue obtains a token that answers ch from the issuer at issuerURL and
// returns it in wire form. The key is the one the challenge names, which
// must be in the issuer's directory (a challenge naming a key the
// directory does not list is refused), or, when the challenge names none,
// the directory's current key. Errors from the issuer are *Problem.
func (c *Client) Issue(ctx context.Context, issuerURL string, ch *Challenge) ([]byte, error) {
	t := ch.TokenChallenge.TokenType
	if !t.Supported() {
		return nil, fmt.Errorf("%w: %v", ErrTokenType, t)
	}
	dir, err := c.Directory(ctx, issuerURL)
	if err != nil {
		return nil, err
	}
	var key DirectoryKey
	found := false
	if len(ch.TokenKey) > 0 {
		for _, k := range dir.TokenKeys {
			if k.TokenType == t && bytes.Equal(k.TokenKey, ch.TokenKey) {
				key, found = k, true
			}
		}
		if !found {
			return nil, fmt.Errorf("privacypass: the challenge names a %v key that the issuer's directory does not list", t)
		}
	} else if key, found = dir.Key(t, c.now()); !found {
		return nil, fmt.Errorf("privacypass: the issuer's directory has no current %v key", t)
	}
	raw := ch.Raw
	if raw == nil {
		if raw, err = ch.TokenChallenge.MarshalBinary(); err != nil {
			return nil, err
		}
	}
	p, err := NewPendingToken(raw, t, key.TokenKey, c.Rand)
	if err != nil {
		return nil, err
	}
	body, err := p.Request.MarshalBinary()
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(issuerURL)
	if err != nil {
		return nil, fmt.Errorf("privacypass: issuer URL: %w", err)
	}
	ref, err := url.Parse(dir.IssuerRequestURI)
	if err != nil {
		return nil, fmt.Errorf("privacypass: issuer-request-uri: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base.ResolveReference(ref).String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("privacypass: %w", err)
	}
	req.Header.Set("Content-Type", RequestMediaType)
	req.Header.Set("Accept", ResponseMediaType)
	if c.AttesterToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.AttesterToken)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("privacypass: token request: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, problemOf(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != ResponseMediaType {
		return nil, fmt.Errorf("privacypass: token response of type %q", resp.Header.Get("Content-Type"))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("privacypass: token response: %w", err)
	}
	tok, err := p.Finalize(b)
	if err != nil {
		return nil, err
	}
	return tok.MarshalBinary()
}

// Present returns a copy of req that presents token (wire form) in its
// Authorization header. The body of req must be replayable (GetBody) when
// req was already sent.
func Present(req *http.Request, token []byte) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, errors.New("privacypass: the request body cannot be sent twice (no GetBody)")
		}
		b, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("privacypass: %w", err)
		}
		r.Body = b
	}
	r.Header.Set("Authorization", AuthorizationValue(token))
	return r, nil
}

// Do sends req; when the answer is 401 with a PrivateToken challenge of a
// supported type, it obtains a token for the first such challenge from the
// issuer at issuerURL and sends req again presenting it, returning that
// answer. The first 401 answer is returned as is when it carries no
// challenge this client can answer.
func (c *Client) Do(req *http.Request, issuerURL string) (*http.Response, error) {
	resp, err := c.http().Do(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	chs, err := ParseChallenges(resp.Header)
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	for i := range chs {
		if !chs[i].TokenChallenge.TokenType.Supported() {
			continue
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		resp.Body.Close()
		tok, err := c.Issue(req.Context(), issuerURL, &chs[i])
		if err != nil {
			return nil, err
		}
		again, err := Present(req, tok)
		if err != nil {
			return nil, err
		}
		return c.http().Do(again)
	}
	return resp, nil
}

// DirectoryKeys is a KeySource of the public (type 0x0002) keys in a
// remote issuer's directory, for an origin that does not share the
// issuer's key directory. It refetches the directory every interval (Run)
// and, at most every ten seconds, when asked for a key it does not know.
// Type 0x0001 keys are secret and never in a directory: use a read-only
// Keyring on the issuer's key directory for those.
type DirectoryKeys struct {
	client    *Client
	issuerURL string
	epoch     time.Duration
	grace     time.Duration

	mu    sync.RWMutex
	dir   *Directory
	byID  map[[KeyIDSize]byte]*VerificationKey
	last  atomic.Int64 // unix ns of the last fetch attempt
	fetch atomic.Bool
}

// NewDirectoryKeys fetches the directory of the issuer at issuerURL with c
// and returns the key source. epoch and grace must be the issuer's: a key's
// epoch ends epoch after its not-before, and its tokens are accepted grace
// after that (every origin sharing a ledger must use the same values).
func NewDirectoryKeys(ctx context.Context, c *Client, issuerURL string, epoch, grace time.Duration) (*DirectoryKeys, error) {
	if epoch <= 0 || grace < 0 {
		return nil, errors.New("privacypass: directory keys: epoch must be positive and grace not negative")
	}
	cc := *c
	cc.Epoch = epoch
	d := &DirectoryKeys{client: &cc, issuerURL: issuerURL, epoch: epoch, grace: grace}
	if err := d.Refresh(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// Refresh fetches the directory now.
func (d *DirectoryKeys) Refresh(ctx context.Context) error {
	d.last.Store(time.Now().UnixNano())
	dir, err := d.client.Directory(ctx, d.issuerURL)
	if err != nil {
		return err
	}
	byID := map[[KeyIDSize]byte]*VerificationKey{}
	for _, k := range dir.TokenKeys {
		if k.TokenType != TypeBlindRSA || k.NotBefore.IsZero() {
			continue
		}
		pk, err := ParsePublicKey(k.TokenKey)
		if err != nil {
			return err
		}
		pss, err := newPSSVerifier(pk)
		if err != nil {
			return err
		}
		byID[k.ID()] = &VerificationKey{TokenType: k.TokenType, ID: k.ID(), TokenKey: k.TokenKey, NotBefore: k.NotBefore,
			End: k.NotBefore.Add(d.epoch), Grace: d.grace, rsaPub: pk, pss: pss}
	}
	d.mu.Lock()
	// Keys stay known until their tokens expire, even when the issuer no
	// longer lists them.
	for id, k := range d.byID {
		if _, ok := byID[id]; !ok && time.Now().Before(k.AcceptUntil()) {
			byID[id] = k
		}
	}
	d.dir, d.byID = dir, byID
	d.mu.Unlock()
	return nil
}

// Run refetches the directory every interval (zero means five minutes)
// until ctx ends; failures keep the keys already known.
func (d *DirectoryKeys) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.Refresh(ctx)
		}
	}
}

// Lookup returns the key with token_key_id id.
func (d *DirectoryKeys) Lookup(t TokenType, id [KeyIDSize]byte) (*VerificationKey, bool) {
	d.mu.RLock()
	k, ok := d.byID[id]
	d.mu.RUnlock()
	if !ok {
		if time.Since(time.Unix(0, d.last.Load())) > 10*time.Second && d.fetch.CompareAndSwap(false, true) {
			go func() {
				defer d.fetch.Store(false)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				d.Refresh(ctx)
			}()
		}
		return nil, false
	}
	return k, k.TokenType == t
}

// Current returns the directory's key of type t for now.
func (d *DirectoryKeys) Current(t TokenType, now time.Time) (*VerificationKey, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	dk, ok := d.dir.Key(t, now)
	if !ok {
		return nil, false
	}
	k, ok := d.byID[dk.ID()]
	return k, ok
}
