package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spentledger/spent"
)

// UnknownOutcome is an applied marker whose request died after [Applied]
// returned nil and before its answer was stored: the effect may or may not
// have happened. It is what an Options.Resolve function is asked about.
type UnknownOutcome struct {
	// Scope and Key are the request's client scope and its Idempotency-Key
	// (unquoted), as [KeyOf] reported them to the handler.
	Scope string
	Key   string
	// Seq is the marker's seq, [Info].AppliedSeq of the request that
	// applied: the handler can pass it to the system its effect goes to, so
	// that the attempt can be looked up and fenced by it.
	Seq spent.Seq
	// Hash is the ledger's hash of the marker's key, the hash "spent
	// unknown list" prints.
	Hash spent.Hash
	// Fingerprint is the stored fingerprint of the request (32 bytes).
	Fingerprint []byte
	// FirstSeen is when Applied wrote the marker; Place is Options.Place of
	// the middleware that wrote it.
	FirstSeen time.Time
	Place     string
}

// Resolution is what an Options.Resolve function found out about an
// [UnknownOutcome].
type Resolution struct {
	// Verdict is spent.Applied, spent.NotApplied or spent.CannotTell, with
	// the contract of [spent.Resolver]: NotApplied only when the look-up
	// also fenced the effect, so that the request, if still in flight,
	// can no longer make it.
	Verdict spent.Verdict
	// Status, Header and Body are, for spent.Applied, the response that
	// retries of the request get: what the handler would have answered.
	// Status must be 200 to 599, Body at most Options.MaxResponse bytes; of
	// Header only Options.ResponseHeaders are kept, as of a handler's
	// answer. The middleware then replays them byte for byte, flagged
	// Idempotent-Replayed.
	Status int
	Header http.Header
	Body   []byte
}

// ErrNoResolve is returned by [NewResolver] and [Middleware.ResolveRunner]
// when Options.Resolve is not set.
var ErrNoResolve = errors.New("idempotency: no Options.Resolve")

// NewResolver returns a spent.Resolver for the unknown outcomes of
// o.AppliedNamespace, which calls o.Resolve with each marker's request and
// stores an applied answer as the middleware stores a handler's, so that
// retries replay it. Run it with spent.NewResolveRunner over the service
// that holds the markers (or use [Middleware.ResolveRunner]); it may run in
// another process than the middleware, with the same options. A marker it
// cannot read (no raw key: the namespace does not store raw keys) is left,
// with an error.
func NewResolver(o Options) (spent.Resolver, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Resolve == nil {
		return nil, ErrNoResolve
	}
	chosen := make([]string, len(o.ResponseHeaders))
	for i, h := range o.ResponseHeaders {
		chosen[i] = http.CanonicalHeaderKey(h)
	}
	return func(ctx context.Context, r spent.Record) (spent.Resolution, error) {
		if r.Namespace != o.AppliedNamespace {
			return spent.Resolution{}, fmt.Errorf("idempotency: resolve: record of namespace %s, want %s", spent.QuoteInput(r.Namespace), spent.QuoteInput(o.AppliedNamespace))
		}
		u, err := unknownOutcome(r)
		if err != nil {
			return spent.Resolution{}, err
		}
		res, err := o.Resolve(ctx, u)
		if err != nil {
			return spent.Resolution{}, fmt.Errorf("idempotency: resolve %s: %w", r.Hash, err)
		}
		switch res.Verdict {
		case spent.Applied:
		case spent.NotApplied, spent.CannotTell:
			return spent.Resolution{Verdict: res.Verdict}, nil
		default:
			return spent.Resolution{}, fmt.Errorf("idempotency: resolve %s: verdict %s", r.Hash, res.Verdict)
		}
		if res.Status < 200 || res.Status > 599 {
			return spent.Resolution{}, fmt.Errorf("idempotency: resolve %s: status %d: want 200 to 599", r.Hash, res.Status)
		}
		if len(res.Body) > o.MaxResponse {
			return spent.Resolution{}, fmt.Errorf("idempotency: resolve %s: body of %d bytes: at most MaxResponse, %d", r.Hash, len(res.Body), o.MaxResponse)
		}
		h := make(http.Header, len(res.Header))
		for k, v := range res.Header {
			ck := http.CanonicalHeaderKey(k)
			h[ck] = append(h[ck], v...)
		}
		return spent.Resolution{Verdict: spent.Applied, Result: encodeStored(res.Status, h, chosen, res.Body)}, nil
	}, nil
}

// unknownOutcome reads the request of an applied marker from its raw key,
// "<len(scope)>:<scope>:<key>" (see Info.LedgerKey).
func unknownOutcome(r spent.Record) (UnknownOutcome, error) {
	bad := func(why string) (UnknownOutcome, error) {
		return UnknownOutcome{}, fmt.Errorf("idempotency: resolve %s: %s", r.Hash, why)
	}
	if r.RawKey == "" {
		return bad("the marker has no raw key: the applied namespace must store raw keys (store_raw_key = true; see Policies)")
	}
	n, rest, ok := strings.Cut(r.RawKey, ":")
	l, err := strconv.Atoi(n)
	if !ok || err != nil || l <= 0 || l > MaxScopeLen || l >= len(rest) || rest[l] != ':' || strconv.Itoa(l) != n {
		return bad("the marker's raw key is not <len>:<scope>:<key>")
	}
	u := UnknownOutcome{
		Scope: rest[:l], Key: rest[l+1:], Seq: r.Seq, Hash: r.Hash,
		Fingerprint: r.Fingerprint, FirstSeen: r.FirstSeen, Place: r.Place,
	}
	if u.Key == "" {
		return bad("the marker's raw key has no key")
	}
	return u, nil
}

// ResolveRunner returns a spent.ResolveRunner of Options.Resolve (see
// [NewResolver]) over the middleware's service and its AppliedNamespace,
// configured by ro, whose Namespace must be empty or AppliedNamespace. Run
// it beside the middleware: go runner.Run(ctx). Over a remote spent server
// the service's token needs the admin scope, to list unknown outcomes.
func (m *Middleware) ResolveRunner(ro spent.ResolveOptions) (*spent.ResolveRunner, error) {
	if ro.Namespace != "" && ro.Namespace != m.o.AppliedNamespace {
		return nil, fmt.Errorf("idempotency: resolve runner: namespace %s: the markers are in %s", spent.QuoteInput(ro.Namespace), spent.QuoteInput(m.o.AppliedNamespace))
	}
	r, err := NewResolver(m.o)
	if err != nil {
		return nil, err
	}
	ro.Namespace = m.o.AppliedNamespace
	return spent.NewResolveRunner(m.svc, r, ro)
}
