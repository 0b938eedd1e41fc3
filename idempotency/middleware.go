package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/capture"
)

// Errors returned by [Applied]. Whatever the error, the handler must return
// at once without making its effect; the middleware then answers the request
// from the ledger and discards what the handler wrote.
var (
	// ErrNotUnderMiddleware is returned when the request did not pass
	// through a Middleware's Handler: there is no key to record.
	ErrNotUnderMiddleware = errors.New("idempotency: request is not under the middleware")
	// ErrAlreadyApplied is returned when an earlier request with this key
	// applied its effect and stored its answer (or an operator resolved it):
	// the middleware replays that answer.
	ErrAlreadyApplied = errors.New("idempotency: already applied by an earlier request with this key")
	// ErrInProgress is returned when an earlier request with this key
	// applied its effect and its answer is not stored yet: it may still be
	// running. The middleware answers 409 with Retry-After.
	ErrInProgress = errors.New("idempotency: an earlier request with this key is applying its effect")
	// ErrOutcomeUnknown is returned when an earlier request with this key
	// applied its effect and died before its answer was stored: an operator
	// must resolve it. The middleware answers 409 outcome_unknown.
	ErrOutcomeUnknown = errors.New("idempotency: an earlier request with this key has an unknown outcome")
	// ErrMismatch is returned when the key's effect was applied by a request
	// with another fingerprint. The middleware answers 422.
	ErrMismatch = errors.New("idempotency: the key was applied by another request")
)

// Middleware makes handlers idempotent under the Idempotency-Key header, over
// a spent.Service. Build it with [New]; wrap handlers with
// [Middleware.Handler]. It is safe for concurrent use.
type Middleware struct {
	svc         spent.Service
	o           Options
	methods     map[string]bool
	fpHeaders   []string
	respHeaders []string
	retention   []string // the Idempotency-Retention value
	now         func() time.Time
	log         *slog.Logger
}

// New returns a Middleware over svc: a *spent.Ledger in the same process, or
// the Go client of a remote spent server (package
// github.com/spentledger/spent/http). When svc can report its namespace
// policies (a *spent.Ledger can), New checks that o.Namespace is an echo
// namespace with retake and o.AppliedNamespace an echo namespace with hold;
// over a remote server that check is the operator's ([Policies] gives the
// policies).
func New(svc spent.Service, o Options) (*Middleware, error) {
	if svc == nil {
		return nil, errors.New("idempotency: nil service")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := checkPolicy(svc, o.Namespace, spent.LeaseExpiryRetake); err != nil {
		return nil, err
	}
	if err := checkPolicy(svc, o.AppliedNamespace, spent.LeaseExpiryHold); err != nil {
		return nil, err
	}
	m := &Middleware{
		svc:       svc,
		o:         o,
		methods:   make(map[string]bool, len(o.Methods)),
		retention: []string{strconv.FormatInt(int64(o.Retention/time.Second), 10)},
		now:       o.Now,
		log:       o.Logger,
	}
	for _, meth := range o.Methods {
		m.methods[meth] = true
	}
	for _, h := range o.FingerprintHeaders {
		m.fpHeaders = append(m.fpHeaders, http.CanonicalHeaderKey(h))
	}
	for _, h := range o.ResponseHeaders {
		m.respHeaders = append(m.respHeaders, http.CanonicalHeaderKey(h))
	}
	if m.now == nil {
		m.now = time.Now
		if c, ok := svc.(interface{ Now() time.Time }); ok {
			m.now = c.Now
		}
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m, nil
}

func checkPolicy(svc any, ns string, want spent.LeaseExpiry) error {
	return spent.RequirePolicy(svc, ns, spent.PolicyNeed{
		Component: "idempotency", Mode: spent.ModeEcho, OnLeaseExpiry: want,
		Why: "a retried request must be answered with the stored response",
		Fix: "give it the policy of Policies",
	})
}

// Info describes the idempotency key of a request under the middleware.
type Info struct {
	// Key is the key as the client sent it, unquoted.
	Key string
	// Scope is the client scope the key was looked up in.
	Scope string
	// LedgerKey is the key claimed in both namespaces: the scope and the
	// key, length-prefixed ("<len(scope)>:<scope>:<key>"). The ledger
	// stores its HMAC, the hash that "spent unknown list" prints.
	LedgerKey string
	// AppliedSeq is the seq of the applied marker once Applied has returned
	// nil (a "machine_id:int": unique, increasing per node),
	// zero before.
	AppliedSeq spent.Seq
}

// KeyOf returns the idempotency key of a request under the middleware, and
// false for a request without one.
func KeyOf(r *http.Request) (Info, bool) {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	if st == nil || st.keyless {
		return Info{}, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	in := st.info
	in.AppliedSeq = st.markerSeq
	return in, true
}

type stateKey struct{}

// reqState is what the middleware and Applied share about one request.
type reqState struct {
	m        *Middleware
	keyless  bool
	info     Info
	fp       [32]byte
	claimSeq spent.Seq

	mu        sync.Mutex
	applied   bool
	markerSeq spent.Seq
	stop      *stop
}

// stop records why Applied refused, for the middleware's answer.
type stop struct {
	err        error         // a ledger failure, or nil
	outcome    spent.Outcome // the marker claim's outcome otherwise
	unknown    bool
	retryAfter time.Duration
	result     []byte
}

func (s *stop) error() error {
	switch {
	case s.err != nil:
		return fmt.Errorf("idempotency: applied: %w", s.err)
	case s.outcome == spent.Replayed:
		return ErrAlreadyApplied
	case s.outcome == spent.InProgress && s.unknown:
		return ErrOutcomeUnknown
	case s.outcome == spent.InProgress:
		return ErrInProgress
	case s.outcome == spent.Mismatch:
		return ErrMismatch
	}
	return fmt.Errorf("idempotency: applied: unexpected outcome %s", s.outcome)
}

// Applied durably records that the request is about to make its
// irreversible effect (send the money, ship the parcel), and must be called
// just before that effect: state before side effect.
//
// Until Applied, a request that fails (a panic, a 5xx, 408 or 429) or dies
// leaves the key free for a retry, which runs the handler again. From a
// successful Applied on, the key is held: the handler's answer, whatever
// its status, is stored and replayed, and a request that dies before its
// answer is stored leaves an unknown outcome that no retry will run again
// (an operator resolves it with spent unknown list / resolve).
//
// A nil error means go ahead. Any error means stop: return from the handler
// at once without making the effect, and let the middleware answer (it
// replays an earlier answer, or says in progress, unknown, mismatch or
// unavailable; what the handler writes is discarded). Calling Applied
// again after it returned nil returns nil. For a request without a key on
// an Optional route it returns nil and records nothing.
func Applied(r *http.Request) error {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	if st == nil {
		return ErrNotUnderMiddleware
	}
	if st.keyless {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.applied {
		return nil
	}
	if st.stop != nil {
		return st.stop.error()
	}
	m := st.m
	res, err := m.svc.Claim(r.Context(), spent.Claim{
		Namespace:   m.o.AppliedNamespace,
		Key:         st.info.LedgerKey,
		Fingerprint: st.fp[:],
		Place:       m.o.Place,
		ExpiresAt:   m.now().Add(m.o.AppliedRetention),
	})
	if err != nil {
		st.stop = &stop{err: err}
		return st.stop.error()
	}
	if res.Outcome == spent.Fresh {
		st.applied = true
		st.markerSeq = res.Record.Seq
		hook("applied")
		return nil
	}
	st.stop = &stop{outcome: res.Outcome, unknown: res.Unknown, retryAfter: res.RetryAfter, result: res.Record.Result}
	return st.stop.error()
}

// testHook, when set (by tests only), is called at the points of a request
// where a crash matters: "applied" (after the marker is durable),
// "captured" (the handler returned, nothing stored yet) and "stored" (the
// answer is durable, nothing sent yet).
var testHook atomic.Pointer[func(point string)]

func hook(point string) {
	if f := testHook.Load(); f != nil {
		(*f)(point)
	}
}

// Handler returns next wrapped by the middleware. Requests whose method is
// not in Options.Methods pass through untouched.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !m.methods[r.Method] {
		next.ServeHTTP(w, r)
		return
	}
	vals := r.Header[HeaderKey]
	if len(vals) == 0 {
		if m.o.Optional {
			w.Header()[HeaderRetention] = m.retention
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), stateKey{}, &reqState{m: m, keyless: true})))
			return
		}
		m.writeProblem(w, http.StatusBadRequest, CodeKeyMissing, "this request needs an Idempotency-Key header", 0)
		return
	}
	if len(vals) > 1 {
		m.writeProblem(w, http.StatusBadRequest, CodeKeyInvalid, "more than one Idempotency-Key header", 0)
		return
	}
	key, err := ParseKey(vals[0])
	if err != nil {
		m.writeProblem(w, http.StatusBadRequest, CodeKeyInvalid, "Idempotency-Key must be 1 to 255 visible ASCII characters, bare or as a quoted string", 0)
		return
	}
	scope, err := m.o.Scope(r)
	if err != nil || scope == "" {
		m.writeProblem(w, http.StatusUnauthorized, CodeUnauthorized, "no client credentials to scope the Idempotency-Key by", 0)
		return
	}
	if len(scope) > MaxScopeLen || !utf8.ValidString(scope) {
		m.log.Error("idempotency: scope function returned an unusable scope", "len", len(scope))
		m.writeProblem(w, http.StatusInternalServerError, CodeInternal, "unusable client scope", 0)
		return
	}
	body, status := m.readBody(r)
	if status != 0 {
		if status == http.StatusRequestEntityTooLarge {
			m.writeProblem(w, status, CodeTooLarge, "request body over "+strconv.FormatInt(m.o.MaxBody, 10)+" bytes", 0)
		} else {
			m.writeProblem(w, status, CodeBodyInvalid, "request body could not be read", 0)
		}
		return
	}
	st := &reqState{m: m, info: Info{Key: key, Scope: scope, LedgerKey: strconv.Itoa(len(scope)) + ":" + scope + ":" + key}}
	if m.o.Fingerprint != nil {
		st.fp = m.o.Fingerprint(r, body)
	} else {
		st.fp = DefaultFingerprint(r, m.fpHeaders, body)
	}
	res, err := m.svc.Claim(r.Context(), spent.Claim{
		Namespace:   m.o.Namespace,
		Key:         st.info.LedgerKey,
		Fingerprint: st.fp[:],
		Place:       m.o.Place,
		ExpiresAt:   m.now().Add(m.o.Retention),
		// A fresh answer stays in this process until the handler's
		// answer is stored (or the key released): see spent.Claim.Early.
		Early: true,
		// A request in progress is waited for (Options.Wait).
		Wait: m.o.Wait,
	})
	if err != nil {
		m.ledgerFailure(w, err)
		return
	}
	switch res.Outcome {
	case spent.Fresh:
		st.claimSeq = res.Record.Seq
		m.run(w, r, next, st, body)
	case spent.Replayed:
		m.replayResult(w, res.Record.Result)
	case spent.Mismatch:
		m.mismatch(w)
	case spent.InProgress:
		if res.Unknown { // only a hold namespace; New refuses one when it can tell
			m.unknown(w)
			return
		}
		m.inProgress(w, res.RetryAfter)
	default:
		m.log.Error("idempotency: namespace answered "+string(res.Outcome)+": want an echo namespace", "namespace", m.o.Namespace)
		m.writeProblem(w, http.StatusInternalServerError, CodeInternal, "idempotency namespace misconfigured", 0)
	}
}

// bodyReader is the request body the handler reads: the bytes read once.
type bodyReader struct{ bytes.Reader }

func newBodyReader(b []byte) *bodyReader {
	r := &bodyReader{}
	r.Reset(b)
	return r
}

// Close implements io.Closer.
func (*bodyReader) Close() error { return nil }

// readBody reads the whole request body, up to MaxBody; a non-zero status
// says why it could not.
func (m *Middleware) readBody(r *http.Request) ([]byte, int) {
	if r.ContentLength > m.o.MaxBody {
		return nil, http.StatusRequestEntityTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody {
		return []byte{}, 0
	}
	n := r.ContentLength
	if n >= 0 && n <= 64<<10 {
		// The announced length and no more: one buffer of the right
		// size, where a growing buffer would start at 512 bytes.
		b := make([]byte, n+1)
		k, err := io.ReadFull(r.Body, b)
		switch {
		case err == io.ErrUnexpectedEOF && int64(k) == n:
			return b[:n], 0 // the body as announced, then its end
		case err == nil:
			return nil, http.StatusBadRequest // longer than announced
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge
		}
		return nil, http.StatusBadRequest
	}
	if n < 0 || n > 64<<10 {
		n = 512
	}
	buf := bytes.NewBuffer(make([]byte, 0, n+1))
	_, err := buf.ReadFrom(io.LimitReader(r.Body, m.o.MaxBody+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge
		}
		return nil, http.StatusBadRequest
	}
	if int64(buf.Len()) > m.o.MaxBody {
		return nil, http.StatusRequestEntityTooLarge
	}
	return buf.Bytes(), 0
}

// retryFailed reports whether a status answered before Applied releases the
// key: the request failed or was turned away for now, so a retry must run it
// again rather than replay this answer.
func retryFailed(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

// run runs the handler of a fresh claim and stores its answer before
// sending it.
func (m *Middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, st *reqState, body []byte) {
	cw := capture.New(m.o.MaxResponse)
	r2 := r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	r2.Body = newBodyReader(body)
	r2.ContentLength = int64(len(body))
	r2.GetBody = func() (io.ReadCloser, error) { return newBodyReader(body), nil }
	pv, panicked := call(next, cw, r2)
	hook("captured")

	st.mu.Lock()
	applied, s := st.applied, st.stop
	st.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.o.StoreTimeout)
	defer cancel()

	switch {
	case s != nil:
		if panicked {
			m.log.Warn("idempotency: handler panicked after Applied refused it", "key", st.info.Key, "panic", fmt.Sprint(pv))
		}
		m.answerStop(ctx, w, st, s)

	case !applied:
		if panicked || retryFailed(cw.Status()) || cw.Overflow() {
			m.release(ctx, st)
			if panicked {
				panic(pv)
			}
			if cw.Overflow() {
				m.log.Error("idempotency: response over MaxResponse; key released", "max", m.o.MaxResponse)
				m.writeProblem(w, http.StatusInternalServerError, CodeInternal, "response too large to store", 0)
				return
			}
			m.send(w, cw)
			return
		}
		enc := encodeStored(cw.Status(), cw.Header(), m.respHeaders, cw.Body())
		if err := m.complete(ctx, m.o.Namespace, st.info.LedgerKey, st.claimSeq, enc); err != nil {
			switch spent.ErrorCode(err) {
			case spent.ENotFound, spent.ESeqMismatch, spent.ENotPending:
				// The lease ran out while the handler ran and a retry took
				// the key over: its answer, not this one, will be stored.
				m.inProgress(w, m.o.RetryAfter)
			case spent.EUnavailable:
				m.log.Warn("idempotency: storing an answer failed; key left to its lease", "namespace", m.o.Namespace, "key", st.info.Key, "err", err)
				m.ledgerFailure(w, err)
			default: // a refusal, such as a result over the ledger's limit
				m.release(ctx, st)
				m.ledgerFailure(w, err)
			}
			return
		}
		hook("stored")
		m.send(w, cw)

	default: // applied
		if panicked || cw.Overflow() {
			m.log.Error("idempotency: handler failed after Applied; the outcome is unknown and held for an operator",
				"namespace", m.o.AppliedNamespace, "key", st.info.Key, "seq", st.markerSeq.String(), "panic", panicked)
			if panicked {
				panic(pv)
			}
			m.writeProblem(w, http.StatusInternalServerError, CodeInternal, "response too large to store; the outcome is held for an operator", 0)
			return
		}
		enc := encodeStored(cw.Status(), cw.Header(), m.respHeaders, cw.Body())
		// The marker first: once it is complete the answer is durable, and
		// a retry that finds the key free again replays it from there.
		if err := m.complete(ctx, m.o.AppliedNamespace, st.info.LedgerKey, st.markerSeq, enc); err != nil {
			switch spent.ErrorCode(err) {
			case spent.ENotFound, spent.ESeqMismatch, spent.ENotPending:
				// The handler ran past its lease and the marker, an unknown
				// outcome by then, was settled by the resolver or an
				// operator: their verdict stands, and a retry gets it.
				m.log.Warn("idempotency: the outcome was settled (by the resolver or an operator) while the handler ran past its lease; this answer is dropped and a retry gets the settled one",
					"namespace", m.o.AppliedNamespace, "key", st.info.Key, "seq", st.markerSeq.String(), "err", err)
				m.inProgress(w, m.o.RetryAfter)
				return
			}
			m.log.Error("idempotency: storing an applied answer failed; the outcome is unknown and held for an operator",
				"namespace", m.o.AppliedNamespace, "key", st.info.Key, "seq", st.markerSeq.String(), "err", err)
			if spent.ErrorCode(err) == spent.EUnavailable {
				m.writeProblem(w, http.StatusServiceUnavailable, CodeUnavailable, "the answer could not be stored; retry with the same key", m.retryAfter(m.o.RetryAfter))
			} else {
				m.writeProblem(w, http.StatusInternalServerError, CodeInternal, "the answer could not be stored ("+spent.ErrorCode(err)+"); the outcome is held for an operator", 0)
			}
			return
		}
		if err := m.complete(ctx, m.o.Namespace, st.info.LedgerKey, st.claimSeq, enc); err != nil {
			// The marker holds the answer: a retry finds it through Applied.
			m.log.Warn("idempotency: storing an answer in the key's record failed; retries replay it from the applied marker",
				"namespace", m.o.Namespace, "key", st.info.Key, "err", err)
		}
		hook("stored")
		m.send(w, cw)
	}
}

// call runs the handler, recovering a panic so that the key can be released
// or held before the panic goes on.
func call(h http.Handler, w http.ResponseWriter, r *http.Request) (pv any, panicked bool) {
	panicked = true
	defer func() {
		if panicked {
			pv = recover()
		}
	}()
	h.ServeHTTP(w, r)
	return nil, false
}

// answerStop answers a request whose handler Applied refused to let go on.
func (m *Middleware) answerStop(ctx context.Context, w http.ResponseWriter, st *reqState, s *stop) {
	if s.outcome == spent.Replayed && s.err == nil {
		stored, err := decodeStored(s.result)
		if err != nil {
			m.release(ctx, st)
			m.log.Error("idempotency: unreadable applied answer", "namespace", m.o.AppliedNamespace, "key", st.info.Key)
			m.writeProblem(w, http.StatusInternalServerError, CodeInternal, "stored answer unreadable", 0)
			return
		}
		// The request that applied stored its answer in the marker but not
		// in the key's record (or an operator resolved it): copy it, so
		// later retries are answered without running the handler.
		if err := m.complete(ctx, m.o.Namespace, st.info.LedgerKey, st.claimSeq, s.result); err != nil {
			m.release(ctx, st)
		}
		m.replay(w, stored)
		return
	}
	m.release(ctx, st)
	switch {
	case s.err != nil:
		m.ledgerFailure(w, s.err)
	case s.outcome == spent.InProgress && s.unknown:
		m.unknown(w)
	case s.outcome == spent.InProgress:
		m.inProgress(w, s.retryAfter)
	case s.outcome == spent.Mismatch:
		m.mismatch(w)
	default:
		m.log.Error("idempotency: applied namespace answered "+string(s.outcome)+": want an echo namespace", "namespace", m.o.AppliedNamespace)
		m.writeProblem(w, http.StatusInternalServerError, CodeInternal, "idempotency namespace misconfigured", 0)
	}
}

// complete stores result in the pending record (ns, key, seq), retrying an
// unavailable ledger: a completion retried with the same seq and bytes
// succeeds even when the first one did commit.
func (m *Middleware) complete(ctx context.Context, ns, key string, seq spent.Seq, result []byte) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * 50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
		_, err = m.svc.Complete(ctx, spent.Completion{Namespace: ns, Key: key, Seq: seq, Result: result})
		if spent.ErrorCode(err) != spent.EUnavailable {
			return err
		}
	}
	return err
}

// release rolls back the request's claim so that a retry runs the handler
// again. A failure only delays that retry until the lease runs out.
func (m *Middleware) release(ctx context.Context, st *reqState) {
	err := m.svc.Release(ctx, spent.Release{Namespace: m.o.Namespace, Key: st.info.LedgerKey, Seq: st.claimSeq})
	switch spent.ErrorCode(err) {
	case "", spent.ENotFound, spent.ESeqMismatch:
	default:
		m.log.Warn("idempotency: releasing a key failed; it is free again when its lease runs out", "namespace", m.o.Namespace, "key", st.info.Key, "err", err)
	}
}

// send writes a captured response, with the header that says how long
// the ledger keeps it.
func (m *Middleware) send(w http.ResponseWriter, cw *capture.Response) {
	cw.Header()[HeaderRetention] = m.retention
	cw.Send(w)
}

func (m *Middleware) replayResult(w http.ResponseWriter, result []byte) {
	s, err := decodeStored(result)
	if err != nil {
		m.log.Error("idempotency: unreadable stored answer", "namespace", m.o.Namespace)
		m.writeProblem(w, http.StatusInternalServerError, CodeInternal, "stored answer unreadable", 0)
		return
	}
	m.replay(w, s)
}

// retryAfter returns the wait to suggest for d: d, but at most the
// configured RetryAfter, which is also the suggestion when d is unknown.
func (m *Middleware) retryAfter(d time.Duration) time.Duration {
	if d <= 0 || d > m.o.RetryAfter {
		d = m.o.RetryAfter
	}
	return d
}

func (m *Middleware) inProgress(w http.ResponseWriter, left time.Duration) {
	m.writeProblem(w, http.StatusConflict, CodeInProgress, "a request with this Idempotency-Key is in progress; retry with the same key", m.retryAfter(left))
}

func (m *Middleware) unknown(w http.ResponseWriter) {
	m.writeProblem(w, http.StatusConflict, CodeOutcomeUnknown, "a request with this Idempotency-Key was interrupted after applying its effect; an operator must resolve its outcome", 0)
}

func (m *Middleware) mismatch(w http.ResponseWriter) {
	m.writeProblem(w, http.StatusUnprocessableEntity, CodeMismatch, "this Idempotency-Key was used for another request; use a new key for a new request", 0)
}

// ledgerFailure answers a ledger error: 503 when the ledger is unavailable
// (fail closed: nothing ran), 500 for anything else (a misconfiguration).
func (m *Middleware) ledgerFailure(w http.ResponseWriter, err error) {
	if spent.ErrorCode(err) == spent.EUnavailable {
		m.writeProblem(w, http.StatusServiceUnavailable, CodeUnavailable, "the ledger is unavailable; retry with the same key", m.retryAfter(m.o.RetryAfter))
		return
	}
	m.log.Error("idempotency: ledger refused a request", "err", err)
	m.writeProblem(w, http.StatusInternalServerError, CodeInternal, "ledger error: "+spent.ErrorCode(err), 0)
}
