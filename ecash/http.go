package ecash

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/problem"
	"github.com/spentledger/spent/internal/strictjson"
	"github.com/spentledger/spent/privacypass"
)

// Endpoints of the issuer.
const (
	KeysPath      = "/v1/ecash/keys"
	ChallengePath = "/v1/ecash/challenge"
	IssuePath     = "/v1/ecash/issue"
	SpendPath     = "/v1/ecash/spend"
	// RequestMediaType is the content type of issuance and spend bodies.
	RequestMediaType = "application/octet-stream"
	// MaxBody is the largest request body accepted.
	MaxBody = 1 + 2 + 0xffff + 8 + 2 + MaxOutputs*OutputSize
)

// KeyList is the JSON document at KeysPath: what a client needs to build
// requests.
type KeyList struct {
	// Issuer is the issuer name.
	Issuer string `json:"issuer"`
	// TokenChallenge is the TokenChallenge every value token answers.
	TokenChallenge []byte `json:"token_challenge"`
	// Price is the least charge of a spend.
	Price uint64 `json:"price"`
	// IssueValue is the value issued per solved challenge.
	IssueValue uint64 `json:"issue_value"`
	// Keys are the keys whose tokens are accepted now, the next epoch's
	// included (not to be used before not_before).
	Keys []KeyInfo `json:"keys"`
}

// KeyInfo is one key of a KeyList.
type KeyInfo struct {
	// Denomination is the value of the key's tokens.
	Denomination uint64 `json:"denomination"`
	// TokenKey is the RSASSA-PSS SubjectPublicKeyInfo (base64 in JSON).
	TokenKey []byte `json:"token_key"`
	// NotBefore is the start of the key's epoch: do not use it before.
	NotBefore time.Time `json:"not_before"`
	// End is the end of its epoch: it issues no token after.
	End time.Time `json:"end"`
	// GraceSeconds is how long after End its tokens are still accepted.
	GraceSeconds int64 `json:"grace_seconds"`
}

// Key parses the key. A grace that is negative or longer than a
// time.Duration holds is refused: its tokens would seem to expire before
// the key's end, or at a wrapped time.
func (k *KeyInfo) Key() (*Key, error) {
	if k.GraceSeconds < 0 || k.GraceSeconds > math.MaxInt64/int64(time.Second) {
		return nil, fmt.Errorf("ecash: key: grace_seconds %d: want 0 to %d", k.GraceSeconds, math.MaxInt64/int64(time.Second))
	}
	return ParseKey(k.Denomination, k.TokenKey, k.NotBefore, k.End, time.Duration(k.GraceSeconds)*time.Second)
}

// Current returns, for each denomination, the key clients use at now: the
// one with the latest not-before at or before now.
func (l *KeyList) Current(now time.Time) (map[uint64]*Key, error) {
	out := map[uint64]*Key{}
	for i := range l.Keys {
		ki := &l.Keys[i]
		if ki.NotBefore.After(now) || !now.Before(ki.End) {
			continue
		}
		if old, ok := out[ki.Denomination]; ok && !ki.NotBefore.After(old.NotBefore) {
			continue
		}
		k, err := ki.Key()
		if err != nil {
			return nil, err
		}
		out[ki.Denomination] = k
	}
	return out, nil
}

// KeyList returns the key list at now.
func (is *Issuer) KeyList(now time.Time) (*KeyList, error) {
	if err := is.keys.Prepare(now); err != nil {
		return nil, err
	}
	l := &KeyList{Issuer: is.cfg.IssuerName, TokenChallenge: is.challenge, Price: is.cfg.Price, IssueValue: is.cfg.IssueValue}
	for _, k := range is.keys.List(now) {
		l.Keys = append(l.Keys, KeyInfo{Denomination: k.Denomination, TokenKey: k.TokenKey, NotBefore: k.NotBefore, End: k.End, GraceSeconds: int64(k.Grace / time.Second)})
	}
	return l, nil
}

// Register mounts the issuer's four endpoints on mux. A request to one of
// them with another method is answered 405 with an Allow header, whatever
// else mux serves (a catch-all "/" included).
func (is *Issuer) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+KeysPath, is.serveKeys)
	mux.HandleFunc("POST "+ChallengePath, is.serveChallenge)
	mux.HandleFunc("POST "+IssuePath, func(w http.ResponseWriter, r *http.Request) { is.serveRequest(w, r, is.Issue) })
	mux.HandleFunc("POST "+SpendPath, func(w http.ResponseWriter, r *http.Request) { is.serveRequest(w, r, is.Spend) })
	mux.HandleFunc(KeysPath, methodNotAllowed("GET, HEAD"))
	for _, p := range []string{ChallengePath, IssuePath, SpendPath} {
		mux.HandleFunc(p, methodNotAllowed("POST"))
	}
}

// methodNotAllowed answers 405 (code bad_request), naming the methods
// allowed.
func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		e := errorf(CodeBadRequest, nil, "method %s not allowed; use %s", spent.QuoteInput(r.Method), allow)
		e.Status, e.Title = http.StatusMethodNotAllowed, "Method not allowed"
		writeError(w, e)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, errorf(CodeInternal, err, "encoding"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = errorf(CodeInternal, err, "unexpected error")
	}
	problem.Write(w, e.Status, problem.Append(nil, ProblemType, e.Code, e.Title, e.Status, e.Detail))
}

func (is *Issuer) serveKeys(w http.ResponseWriter, r *http.Request) {
	l, err := is.KeyList(is.ledger.Now())
	if err != nil {
		writeError(w, errorf(CodeUnavailable, err, "keys"))
		return
	}
	w.Header().Set("Cache-Control", "max-age=300")
	writeJSON(w, l)
}

func (is *Issuer) serveChallenge(w http.ResponseWriter, r *http.Request) {
	c, err := is.NewChallenge()
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, c)
}

func (is *Issuer) serveRequest(w http.ResponseWriter, r *http.Request, f func(context.Context, []byte) (Answer, error)) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, RequestMediaType) {
		writeError(w, errorf(CodeBadRequest, nil, "content type %s: want %s", spent.QuoteInput(ct), RequestMediaType))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		writeError(w, errorf(CodeBadRequest, err, "body"))
		return
	}
	a, err := f(r.Context(), body)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, a)
}

// Client talks to an issuer over HTTP. Errors the issuer answers are *Error;
// anything else (a network error, a 5xx without a problem document) is
// returned as is and is retryable.
type Client struct {
	// URL is the issuer's base URL (scheme and host).
	URL string
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// answerRules read the issuer's answers: members a newer issuer adds are
// skipped; the size is bounded by what do reads.
var answerRules = strictjson.Rules{SkipUnknown: true, MaxSize: maxAnswer}

// maxAnswer bounds the answers the client reads: 4 MiB.
const maxAnswer = 1 << 22

func (c *Client) do(ctx context.Context, method, path string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("ecash: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", RequestMediaType)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("ecash: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("ecash: %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		if p, ok := problem.Read(resp.Header, b); ok {
			return &Error{Code: p.Code, Status: resp.StatusCode, Title: p.Title, Type: p.Type, Detail: p.Detail}
		}
		return fmt.Errorf("ecash: %s %s: HTTP %d", method, path, resp.StatusCode)
	}
	if err := answerRules.Unmarshal(b, v); err != nil {
		return fmt.Errorf("ecash: %s %s: %w", method, path, err)
	}
	return nil
}

// Keys fetches the issuer's key list.
func (c *Client) Keys(ctx context.Context) (*KeyList, error) {
	var l KeyList
	if err := c.do(ctx, http.MethodGet, KeysPath, nil, &l); err != nil {
		return nil, err
	}
	if _, err := privacypass.ParseTokenChallenge(l.TokenChallenge); err != nil {
		return nil, fmt.Errorf("ecash: key list: %w", err)
	}
	return &l, nil
}

// Challenge fetches a proof-of-work challenge.
func (c *Client) Challenge(ctx context.Context) (Challenge, error) {
	var ch Challenge
	if err := c.do(ctx, http.MethodPost, ChallengePath, []byte{}, &ch); err != nil {
		return Challenge{}, err
	}
	p, err := ParseChallenge(ch.Raw)
	if err != nil {
		return Challenge{}, err
	}
	return p, nil
}

// Send posts a request body (exact bytes) to path (IssuePath or SpendPath)
// and returns the answer.
func (c *Client) Send(ctx context.Context, path string, body []byte) (Answer, error) {
	var a Answer
	err := c.do(ctx, http.MethodPost, path, body, &a)
	return a, err
}
