package privacypass

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
)

// maxRequestBody bounds a token-request body; the largest valid one is 259
// bytes.
const maxRequestBody = 4096

// Server is an issuer and a redemption endpoint over one ledger and one key
// directory: the handlers spent serve mounts for its [privacypass] section.
// Build it with New, mount it with Register (or the three handlers one by
// one), and run Run in the background so that keys rotate.
type Server struct {
	cfg       Config
	ledger    *spent.Ledger
	keys      *Keyring
	origin    *Origin
	log       *slog.Logger
	attesters map[[sha256.Size]byte]bool // digests of the attester tokens
	requests  *prometheus.CounterVec     // MetricTokenRequests
}

// New checks cfg, opens the key directory keyDir with the key-encryption
// key kek (creating the keys of the current and next epoch when missing,
// which takes a moment for RSA), and returns the server. The ledger must
// configure cfg.Namespace in refuse mode with the hold policy and a
// retention of at least epoch + grace + skew (NamespacePolicy gives one),
// so that no token is forgotten while it is still acceptable. The ledger's
// clock is the server's clock.
func New(ctx context.Context, cfg Config, ledger *spent.Ledger, keyDir string, kek []byte, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if ledger == nil {
		return nil, errors.New("privacypass: no ledger")
	}
	if log == nil {
		log = slog.Default()
	}
	if err := checkPolicy(ledger, "privacypass", cfg.Namespace, cfg.Epoch+cfg.Grace+cfg.Skew); err != nil {
		return nil, err
	}
	keys, err := OpenKeyring(ctx, KeyringConfig{
		Dir: keyDir, KEK: kek, IssuerName: cfg.IssuerName, TokenTypes: cfg.TokenTypes,
		Epoch: cfg.Epoch, Grace: cfg.Grace, Skew: cfg.Skew, Now: ledger.Now,
		Rand: cfg.Rand, GenerateRSAKey: cfg.GenerateRSAKey, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, ledger: ledger, keys: keys, log: log, attesters: map[[sha256.Size]byte]bool{},
		requests: newCounter(MetricTokenRequests, "Privacy Pass token requests the issuer answered, by token type and outcome (issued, or the code of the refusal).", outcomeIssued, cfg.TokenTypes)}
	for _, t := range cfg.AttesterTokens {
		s.attesters[sha256.Sum256([]byte(t))] = true
	}
	s.origin, err = NewOrigin(ledger, OriginConfig{
		IssuerName: cfg.IssuerName, OriginInfo: cfg.OriginInfo, TokenTypes: cfg.TokenTypes, Keys: keys,
		Namespace: cfg.Namespace, Challenges: NewChallengeSet(cfg.MaxChallenges, cfg.ChallengeTTL),
		StaticChallenge: cfg.StaticChallenge, OneStep: true, Skew: cfg.Skew, Rand: cfg.Rand, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Keyring returns the server's keys, for origins in the same process
// (OriginConfig.Keys).
func (s *Server) Keyring() *Keyring { return s.keys }

// Origin returns the origin behind POST /v1/redeem.
func (s *Server) Origin() *Origin { return s.origin }

// Run rotates the keys every minute (or every sixtieth of an epoch) until
// ctx ends. Without it, a request that finds no current key starts a
// rotation in the background and is answered 503 meanwhile.
func (s *Server) Run(ctx context.Context) { s.keys.Run(ctx, 0) }

// Close waits for background key rotations to finish. The handlers keep
// answering with the keys loaded.
func (s *Server) Close() error { return s.keys.Close() }

// Register mounts the three endpoints on mux: GET DirectoryPath, POST
// cfg.RequestPath and POST RedeemPath.
func (s *Server) Register(mux *http.ServeMux) {
	mux.Handle(DirectoryPath, s.DirectoryHandler())
	mux.Handle(s.cfg.RequestPath, s.TokenRequestHandler())
	mux.Handle(RedeemPath, s.RedeemHandler())
}

// DirectoryHandler serves the issuer directory (GET or HEAD): every key
// whose tokens are still accepted, the next epoch's included, with its
// not-before. It carries an ETag and may be cached for five minutes.
func (s *Server) DirectoryHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeProblem(w, http.StatusMethodNotAllowed, CodeBadRequest, "use GET")
			return
		}
		now := s.ledger.Now()
		s.keys.kick(now)
		uri := s.cfg.RequestPath
		if s.cfg.IssuerURL != "" {
			uri = strings.TrimSuffix(s.cfg.IssuerURL, "/") + s.cfg.RequestPath
		}
		body, err := s.keys.Directory(uri, now).MarshalJSON()
		if err != nil {
			writeProblem(w, http.StatusInternalServerError, CodeInternal, err.Error())
			return
		}
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:12]) + `"`
		h := w.Header()
		h.Set("ETag", etag)
		h.Set("Cache-Control", "public, max-age=300")
		if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", DirectoryMediaType)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			w.Write(body)
		}
	})
}

// attest returns the client identity of r under the configured attester,
// or "" when r carries none that is valid.
func (s *Server) attest(r *http.Request) string {
	switch s.cfg.Attester {
	case AttesterBearer:
		v := r.Header.Get("Authorization")
		if len(v) < 7 || !strings.EqualFold(v[:7], "Bearer ") {
			return ""
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(v[7:])))
		// The map holds digests, so the lookup time says nothing about
		// the configured tokens; the identity is the digest too, so the
		// ledger never sees a token (it keeps only an HMAC of this).
		ok := false
		for d := range s.attesters {
			ok = ok || subtle.ConstantTimeCompare(d[:], sum[:]) == 1
		}
		if !ok {
			return ""
		}
		return "bearer:" + hex.EncodeToString(sum[:])
	case AttesterMTLS:
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			return ""
		}
		subject := r.TLS.VerifiedChains[0][0].Subject.String()
		if subject == "" {
			return ""
		}
		sum := sha256.Sum256([]byte(subject))
		return "mtls:" + hex.EncodeToString(sum[:])
	}
	return ""
}

// TokenRequestHandler serves POST token requests (RFC 9578 §5, §6): an
// application/private-token-request body is answered with an
// application/private-token-response. The checks, in order: the attester
// identifies the client (401), the content type (415) and the body parse,
// with 422 for an unsupported token type, a size that does not match the
// type or a blinded message out of range, or a truncated key id that names
// no key usable now; then the client's quota for the epoch (429 with
// Retry-After when used up; 503 when the ledger cannot count), and only
// then the signature.
func (s *Server) TokenRequestHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The answer is counted in MetricTokenRequests: by the type the
		// body names, once read, and by the code of the problem written.
		var tokenType TokenType
		outcome := outcomeIssued
		defer func() { s.requests.WithLabelValues(typeLabel(tokenType), outcome).Inc() }()
		problem := func(status int, code, detail string) {
			outcome = code
			writeProblem(w, status, code, detail)
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			problem(http.StatusMethodNotAllowed, CodeBadRequest, "use POST")
			return
		}
		identity := s.attest(r)
		if identity == "" {
			if s.cfg.Attester == AttesterBearer {
				w.Header().Set("WWW-Authenticate", `Bearer realm="privacypass issuer"`)
			}
			problem(http.StatusUnauthorized, CodeUnauthorized, "the issuer could not identify the client (attester: "+s.cfg.Attester+")")
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != RequestMediaType {
			problem(http.StatusUnsupportedMediaType, CodeBadRequest, "Content-Type must be "+RequestMediaType)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
		if err != nil {
			problem(http.StatusBadRequest, CodeBadRequest, "reading the body: "+err.Error())
			return
		}
		if len(body) > maxRequestBody {
			problem(http.StatusRequestEntityTooLarge, CodeBadRequest, "token request over "+strconv.Itoa(maxRequestBody)+" bytes")
			return
		}
		tokenType = wireType(body)
		req, err := ParseTokenRequest(body)
		if err != nil {
			code := CodeWrongSize
			if errors.Is(err, ErrTokenType) {
				code = CodeTokenType
			}
			problem(http.StatusUnprocessableEntity, code, err.Error())
			return
		}
		served := false
		for _, t := range s.cfg.TokenTypes {
			served = served || t == req.TokenType
		}
		if !served {
			problem(http.StatusUnprocessableEntity, CodeTokenType, req.TokenType.String()+" is not issued here")
			return
		}
		now := s.ledger.Now()
		s.keys.kick(now)
		key := s.keys.forRequest(req.TokenType, req.TruncatedKeyID, now)
		if key == nil {
			problem(http.StatusUnprocessableEntity, CodeUnknownKey,
				fmt.Sprintf("no key of %v with truncated key id %d is usable now: fetch the directory again", req.TokenType, req.TruncatedKeyID))
			return
		}
		p, err := key.prepare(&req)
		if err != nil {
			problem(http.StatusUnprocessableEntity, CodeWrongSize, err.Error())
			return
		}
		epochEnd := s.keys.EpochEnd(now)
		scope := "privacypass/quota/" + s.cfg.IssuerName + "/" + strconv.FormatInt(s.keys.epochIndex(now), 10)
		res, err := s.ledger.Count(r.Context(), scope, identity, s.cfg.QuotaPerEpoch, epochEnd)
		if err != nil {
			w.Header().Set("Retry-After", "1")
			problem(http.StatusServiceUnavailable, CodeUnavailable, "the ledger could not count the request: "+err.Error())
			return
		}
		if !res.Added {
			w.Header().Set("Retry-After", retryAfter(epochEnd.Sub(now)))
			problem(http.StatusTooManyRequests, CodeQuota,
				fmt.Sprintf("%d tokens per client per epoch; the next epoch starts at %s", s.cfg.QuotaPerEpoch, epochEnd.Format(time.RFC3339)))
			return
		}
		resp, err := p.issue()
		if err != nil {
			s.log.Error("privacypass: issuance failed", "err", err)
			problem(http.StatusInternalServerError, CodeInternal, "issuance failed")
			return
		}
		out, err := resp.MarshalBinary()
		if err != nil {
			problem(http.StatusInternalServerError, CodeInternal, err.Error())
			return
		}
		h := w.Header()
		h.Set("Content-Type", ResponseMediaType)
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(http.StatusOK)
		w.Write(out)
	})
}

// RedeemAnswer is the JSON body of a 200 answer of POST /v1/redeem.
type RedeemAnswer struct {
	// TokenType is the token's type.
	TokenType TokenType `json:"token_type"`
	// KeyID is the token_key_id in hex.
	KeyID string `json:"token_key_id"`
	// FirstSeen is the server time of the spend.
	FirstSeen time.Time `json:"first_seen"`
	// ExpiresAt is when the ledger forgets the spend: the key's last
	// acceptance instant.
	ExpiresAt time.Time `json:"expires_at"`
}

// RedeemHandler serves POST /v1/redeem for relays that delegate
// verification: the relay forwards the client's Authorization header. With
// a valid unspent token the answer is 200 with a RedeemAnswer, after the
// spend is durable in the ledger (one step: it cannot be rolled back).
// Without a token, or with a spent, expired or invalid one, the answer is
// 401 with fresh PrivateToken challenges in WWW-Authenticate (which the
// relay passes to the client) and a problem document whose code says why;
// 503 when the ledger failed (the token is not spent).
func (s *Server) RedeemHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writeProblem(w, http.StatusMethodNotAllowed, CodeBadRequest, "use POST")
			return
		}
		s.keys.kick(s.ledger.Now())
		raw, err := s.origin.credential(r, "present a PrivateToken in the Authorization header")
		if err != nil {
			s.origin.refuse(w, err)
			return
		}
		sp, err := s.origin.redeem(r.Context(), raw, true)
		if err != nil {
			s.origin.refuse(w, err)
			return
		}
		b, err := json.Marshal(RedeemAnswer{TokenType: sp.Token.TokenType, KeyID: hexID(sp.Token.KeyID),
			FirstSeen: sp.Record.FirstSeen.UTC(), ExpiresAt: sp.Record.ExpiresAt.UTC()})
		if err != nil {
			writeProblem(w, http.StatusInternalServerError, CodeInternal, err.Error())
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Length", strconv.Itoa(len(b)+1))
		w.WriteHeader(http.StatusOK)
		w.Write(append(b, '\n'))
	})
}
