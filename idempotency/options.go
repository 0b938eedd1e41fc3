package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/spentledger/spent"
)

// Options configures a Middleware. Start from [DefaultOptions] and set
// Scope.
type Options struct {
	// Namespace is the ledger namespace of the requests' keys. Its policy
	// must be echo mode with on_lease_expiry retake, and its lease longer
	// than the slowest handler (see [Policies]). Default "idempotency".
	Namespace string
	// AppliedNamespace is the ledger namespace of the markers that
	// [Applied] writes just before a handler's irreversible effect. Its
	// policy must be echo mode with on_lease_expiry hold: a marker whose
	// request died before its answer was stored becomes an unknown outcome
	// there, listed by "spent unknown list -n <AppliedNamespace>". Default
	// "idempotency-applied".
	AppliedNamespace string
	// Scope returns the client a request belongs to (an account id, the
	// subject of its credentials): keys are looked up per scope, so one
	// client never sees another's response. An error or an empty scope is
	// answered 401. The scope becomes part of the ledger key, which the
	// ledger stores only as an HMAC unless the namespace sets store_raw_key:
	// return an identifier, not a secret ([HeaderScope] hashes). At most
	// MaxScopeLen bytes of UTF-8. Required; [FixedScope] serves a service
	// with one client.
	Scope func(r *http.Request) (string, error)
	// Methods are the request methods the middleware acts on; other requests
	// pass through untouched. Default POST and PATCH, the methods that are
	// not idempotent by themselves.
	Methods []string
	// Optional lets requests without an Idempotency-Key pass through to the
	// handler without protection ([Applied] then returns nil). By default a
	// missing key is answered 400.
	Optional bool
	// MaxBody is the largest request body accepted, in bytes; larger bodies
	// are answered 413. The middleware reads the whole body to fingerprint
	// it. Default 1 MiB.
	MaxBody int64
	// MaxResponse is the largest response body a handler may write, in
	// bytes, so that it fits in a ledger result (spent.DefaultMaxResult is
	// 1 MiB, headers included). Default 1 MiB - 16 KiB.
	MaxResponse int
	// FingerprintHeaders are the request headers that, with the method, the
	// path and query, and the body, make the request's fingerprint: the same
	// key with another fingerprint is answered 422. Default Content-Type.
	FingerprintHeaders []string
	// Fingerprint, when set, replaces the default fingerprint (SHA-256 over
	// method, escaped path, raw query, FingerprintHeaders and body; see
	// [DefaultFingerprint]).
	Fingerprint func(r *http.Request, body []byte) [32]byte
	// ResponseHeaders are the response headers stored with the status and
	// the body and sent again on a replay. Others (Set-Cookie, Date, ...)
	// are sent with the first response only. Default Content-Type,
	// Content-Language, Content-Location, Location, ETag, Last-Modified.
	ResponseHeaders []string
	// Retention is how long a key is remembered after its first request,
	// and the value of the Idempotency-Retention header: a retry within it
	// is answered from the ledger. A key whose effect was applied is
	// remembered longer, for AppliedRetention: its retries are replayed (or
	// held as unknown) until then. Every claim carries its own expiry, which
	// the ledger accepts only within each namespace's max_expiry (its
	// retention unless set; see [spent.Policy].MaxExpiry): configure the
	// namespaces as [Policies] gives them. Default 24 hours (Stripe's).
	Retention time.Duration
	// AppliedRetention is how long an applied marker is remembered: how long
	// an operator has to resolve an unknown outcome, and at least Retention.
	// Default 7 days.
	AppliedRetention time.Duration
	// RetryAfter is the longest Retry-After hint sent with a 409 while a
	// request is in progress; the hint is the time left on the lease when
	// shorter, and at least one second. Default 1 second.
	RetryAfter time.Duration
	// Place is written into every record as the place that saw the key (a
	// node or service name). Default empty.
	Place string
	// StoreTimeout bounds the ledger writes made after the handler returns
	// (storing the response, releasing the key), which do not stop when the
	// client goes away. Default 10 seconds.
	StoreTimeout time.Duration
	// Now is the clock that sets expiries. Nil means the service's clock
	// when it has a Now method (a *spent.Ledger does), else time.Now.
	Now func() time.Time
	// Logger receives what an operator must know: unknown outcomes left by
	// failing handlers, stores failing after a handler ran. Nil discards.
	Logger *slog.Logger

	// Resolve, when set, looks up the real outcome of an unknown outcome
	// (a request that died after Applied, before its answer was stored) in
	// the system its effect went to, as a [spent.Resolver] does, and says
	// what retries of the request get: the answer it had (applied), a new
	// run of the handler (not applied: only when the look-up also fenced
	// the effect), or, when it cannot tell, the 409 outcome_unknown and an
	// operator. [Middleware.ResolveRunner] runs it for each unknown outcome
	// of AppliedNamespace with backoff; [NewResolver] adapts it to a
	// spent.Resolver. A handler whose effect the system refuses because
	// Resolve fenced its attempt must abort (panic(http.ErrAbortHandler))
	// rather than answer, so that nothing is stored for that attempt.
	// Default nil: unknown outcomes wait for an operator.
	Resolve func(ctx context.Context, u UnknownOutcome) (Resolution, error)

	// Waiting for the first request.

	// Wait, when positive, makes a request that finds its key in progress
	// wait up to Wait for the first request to end, rather than be answered
	// 409 at once (see spent.Claim.Wait): when the first's answer is
	// stored, the waiter is answered with it (a replay); when the first
	// released the key (its handler failed before Applied), the waiter runs
	// the handler itself; when the wait runs out, it is answered 409 as
	// without Wait. At most spent.MaxWait, and over HTTP at most the
	// server's max_wait (30 seconds by default), which refuses more. The
	// request holds its connection and a goroutine while it waits. Default
	// 0: answer 409 at once.
	Wait time.Duration
}

// MaxScopeLen is the longest scope, in bytes.
const MaxScopeLen = 200

// DefaultOptions returns the defaults described on each field of Options.
// Scope is left nil and must be set.
func DefaultOptions() Options {
	return Options{
		Namespace:          "idempotency",
		AppliedNamespace:   "idempotency-applied",
		Methods:            []string{http.MethodPost, http.MethodPatch},
		MaxBody:            1 << 20,
		MaxResponse:        1<<20 - 16<<10,
		FingerprintHeaders: []string{"Content-Type"},
		ResponseHeaders:    []string{"Content-Type", "Content-Language", "Content-Location", "Location", "ETag", "Last-Modified"},
		Retention:          24 * time.Hour,
		AppliedRetention:   7 * 24 * time.Hour,
		RetryAfter:         time.Second,
		StoreTimeout:       10 * time.Second,
	}
}

// Validate refuses unusable or unsafe options.
func (o *Options) Validate() error {
	switch {
	case o.Namespace == "" || o.AppliedNamespace == "":
		return errors.New("idempotency: options: namespaces must be set")
	case o.Namespace == o.AppliedNamespace:
		return errors.New("idempotency: options: Namespace and AppliedNamespace must differ")
	case o.Scope == nil:
		return errors.New("idempotency: options: no Scope: set one (FixedScope for a service with a single client)")
	case len(o.Methods) == 0:
		return errors.New("idempotency: options: no Methods")
	case o.MaxBody <= 0:
		return fmt.Errorf("idempotency: options: MaxBody %d: must be positive", o.MaxBody)
	case o.MaxResponse <= 0:
		return fmt.Errorf("idempotency: options: MaxResponse %d: must be positive", o.MaxResponse)
	case o.Retention <= 0:
		return fmt.Errorf("idempotency: options: Retention %v: must be positive", o.Retention)
	case o.AppliedRetention < o.Retention:
		return fmt.Errorf("idempotency: options: AppliedRetention %v shorter than Retention %v: an unknown outcome would be forgotten while its key may still be retried", o.AppliedRetention, o.Retention)
	case o.RetryAfter <= 0:
		return fmt.Errorf("idempotency: options: RetryAfter %v: must be positive", o.RetryAfter)
	case o.StoreTimeout <= 0:
		return fmt.Errorf("idempotency: options: StoreTimeout %v: must be positive", o.StoreTimeout)
	case o.Wait < 0 || o.Wait > spent.MaxWait:
		return fmt.Errorf("idempotency: options: Wait %v: want 0 (no waiting) to %v", o.Wait, spent.MaxWait)
	case len(o.Place) > spent.MaxPlaceLen:
		return fmt.Errorf("idempotency: options: Place of %d bytes: at most %d", len(o.Place), spent.MaxPlaceLen)
	}
	return nil
}

// Policies returns the namespace policies the middleware needs, keyed by
// o.Namespace and o.AppliedNamespace, for a ledger configuration:
//
//   - o.Namespace: echo, retake after lease. A request that dies before
//     calling Applied leaves its key pending; once lease has run out the
//     next retry takes the key over and runs the handler again.
//   - o.AppliedNamespace: echo, hold after lease, raw keys stored so that
//     operators can read them. A request that dies after Applied leaves its
//     marker pending; once lease has run out it is an unknown outcome.
//
// Lease must be longer than the slowest handler, from the claim to the
// stored answer: a handler still running when its lease ends may see a
// retry start beside it (which Applied then stops). Retentions are o's.
func Policies(o Options, lease time.Duration) map[string]spent.Policy {
	return map[string]spent.Policy{
		o.Namespace: {
			Mode: spent.ModeEcho, Retention: o.Retention, Lease: lease, OnLeaseExpiry: spent.LeaseExpiryRetake,
		},
		o.AppliedNamespace: {
			Mode: spent.ModeEcho, Retention: o.AppliedRetention, Lease: lease, OnLeaseExpiry: spent.LeaseExpiryHold,
			StoreRawKey: true,
		},
	}
}

// FixedScope returns a scope function that puts every request in the same
// scope: for a service whose only client is itself, or whose clients are
// all one party. A service with several clients scopes by credentials
// instead ([HeaderScope]).
func FixedScope(scope string) func(*http.Request) (string, error) {
	return func(*http.Request) (string, error) { return scope, nil }
}

// ErrNoScope is returned by the scope functions of this package when the
// request carries nothing to scope it by; the middleware answers 401.
var ErrNoScope = errors.New("idempotency: no client credentials to scope the key by")

// HeaderScope returns a scope function that scopes each request by the
// value of a request header (Authorization, X-Api-Key): two clients with
// different credentials never share keys. The value is hashed (SHA-256,
// first 16 bytes in hex), so that a secret never reaches the ledger or its
// operators. A request without the header gets ErrNoScope (401).
func HeaderScope(name string) func(*http.Request) (string, error) {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", ErrNoScope
		}
		sum := sha256.Sum256([]byte(v))
		return "h:" + hex.EncodeToString(sum[:16]), nil
	}
}
