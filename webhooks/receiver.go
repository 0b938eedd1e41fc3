package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/capture"
)

// HeaderDuplicate is set to "true" on the 200 that answers a message whose
// id was already handled: the handler did not run again.
const HeaderDuplicate = "Spent-Duplicate"

var hdrTrue = []string{"true"}

// Receiver verifies Standard Webhooks messages and hands each message id to
// its handler once within the window its signature is accepted. Build it
// with [New]; wrap the handler with [Receiver.Handler]. It is safe for
// concurrent use.
type Receiver struct {
	svc spent.Service
	o   Options
	v   *Verifier
	now func() time.Time
	log *slog.Logger
}

// New returns a Receiver over svc: a *spent.Ledger in the same process, or
// the Go client of a remote spent server (package
// github.com/spentledger/spent/http). It parses the secrets and keys.
//
// When svc reports its namespace policies (a *spent.Ledger does), New
// checks that o.Namespace is a refuse namespace with on_lease_expiry
// retake and a retention of at least [Options.MinRetention], and refuses a
// shorter one naming both figures. The spent server does not publish its
// namespaces' policies, so over the HTTP client this check is the
// operator's: configure the server's namespace with [Options.Policy].
//
// The namespace's lease is how long a delivery being handled holds its id:
// other deliveries of the message get 409 meanwhile. It must outlast the
// slowest handler (senders time out after 15 to 30 seconds); once it runs
// out, a retry takes the id over and runs the handler again.
func New(svc spent.Service, o Options) (*Receiver, error) {
	if svc == nil {
		return nil, errors.New("webhooks: nil service")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	v, err := NewVerifier(o.Secrets, o.PublicKeys, o.Tolerance)
	if err != nil {
		return nil, err
	}
	if err := checkPolicy(svc, &o); err != nil {
		return nil, err
	}
	rc := &Receiver{svc: svc, o: o, v: v, now: o.Now, log: o.Logger}
	if rc.now == nil {
		rc.now = time.Now
		if c, ok := svc.(interface{ Now() time.Time }); ok {
			rc.now = c.Now
		}
	}
	if rc.log == nil {
		rc.log = slog.New(slog.DiscardHandler)
	}
	return rc, nil
}

func checkPolicy(svc any, o *Options) error {
	minr := o.MinRetention()
	return spent.RequirePolicy(svc, o.Namespace, spent.PolicyNeed{
		Component: "webhooks", Mode: spent.ModeRefuse, OnLeaseExpiry: spent.LeaseExpiryRetake, Keep: minr,
		Why: fmt.Sprintf("a message's id must be refused a second time for 2 × tolerance %v + 2 × skew %v, and a handler that failed must let the sender retry", o.Tolerance, o.Skew),
		Fix: "give it the policy of Options.Policy, or shorten Tolerance",
	})
}

// Verifier returns the receiver's verifier, for checking messages outside
// a handler.
func (rc *Receiver) Verifier() *Verifier { return rc.v }

type messageKey struct{}

// MessageOf returns the verified message a request under [Receiver.Handler]
// carries, and whether it carries one.
func MessageOf(r *http.Request) (Message, bool) {
	m, ok := r.Context().Value(messageKey{}).(Message)
	return m, ok
}

// LedgerKey returns the key a message id is claimed under in the ledger:
// the source and the id, length-prefixed ("<len(source)>:<source>:<id>").
// The ledger stores only its HMAC.
func LedgerKey(source, id string) string {
	return strconv.Itoa(len(source)) + ":" + source + ":" + id
}

// Handler returns next wrapped by the receiver. A POST is read (up to
// MaxBody), its headers, timestamp and signature are checked, and only
// then is its id claimed in the ledger: a fresh id runs next, which reads
// the body as sent and the message with [MessageOf]. next's response is
// held until the claim is settled: a 2xx completes it, so that later
// deliveries of the message are answered 200 without running next;
// anything else (or a panic) releases it, so that the sender's retry runs
// next again. See the package documentation for every answer.
func (rc *Receiver) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.serve(w, r, next)
	})
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if r.Method != http.MethodPost {
		w.Header()["Allow"] = []string{http.MethodPost}
		writeProblem(w, http.StatusMethodNotAllowed, CodeMethod, "webhooks are delivered with POST", 0)
		return
	}
	// The headers first: a request without them is not worth reading.
	if _, _, _, err := ParseHeaders(r.Header); err != nil {
		rc.refuse(w, err)
		return
	}
	body, status := readBody(r, rc.o.MaxBody)
	switch status {
	case 0:
	case http.StatusRequestEntityTooLarge:
		writeProblem(w, status, CodeTooLarge, "message body over "+strconv.FormatInt(rc.o.MaxBody, 10)+" bytes", 0)
		return
	default:
		writeProblem(w, status, CodeBodyInvalid, "message body could not be read", 0)
		return
	}
	msg, err := rc.v.Verify(r.Header, body, rc.now())
	if err != nil {
		rc.refuse(w, err)
		return
	}
	msg.Source = rc.o.Source
	key := LedgerKey(msg.Source, msg.ID)
	ans, err := rc.svc.Claim(r.Context(), spent.Claim{
		Namespace: rc.o.Namespace,
		Key:       key,
		Place:     rc.o.Place,
		// The last instant the timestamp check could still accept this
		// message, on any clock within Skew of the ledger's.
		ExpiresAt: msg.Timestamp.Add(rc.o.Tolerance + rc.o.Skew),
		// Nothing leaves the process before the claim is completed or
		// released; a crash before then frees the id, as a release would
		// (see spent.Claim.Early).
		Early: true,
	})
	if err != nil {
		rc.ledgerFailure(w, err)
		return
	}
	switch ans.Outcome {
	case spent.Fresh:
		rc.run(w, r, next, msg, key, ans.Record.Seq, body)
	case spent.Refused:
		h := w.Header()
		h[HeaderDuplicate] = hdrTrue
		h["Content-Length"] = []string{"0"}
		w.WriteHeader(http.StatusOK)
	case spent.InProgress:
		rc.inProgress(w, ans.RetryAfter)
	default:
		rc.log.Error("webhooks: namespace answered "+string(ans.Outcome)+": want a refuse namespace", "namespace", rc.o.Namespace)
		writeProblem(w, http.StatusInternalServerError, CodeInternal, "webhook namespace misconfigured", 0)
	}
}

// refuse answers a message that failed verification.
func (rc *Receiver) refuse(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrHeadersMissing):
		writeProblem(w, http.StatusUnauthorized, CodeHeadersMissing, err.Error(), 0)
	case errors.Is(err, ErrTimestamp):
		writeProblem(w, http.StatusUnauthorized, CodeTimestamp, err.Error(), 0)
	case errors.Is(err, ErrSignature):
		writeProblem(w, http.StatusUnauthorized, CodeSignature, err.Error(), 0)
	default:
		writeProblem(w, http.StatusBadRequest, CodeHeadersInvalid, err.Error(), 0)
	}
}

// run runs next for a fresh claim and settles the claim before answering.
func (rc *Receiver) run(w http.ResponseWriter, r *http.Request, next http.Handler, msg Message, key string, seq spent.Seq, body []byte) {
	cw := capture.New(rc.o.MaxResponse)
	r2 := r.WithContext(context.WithValue(r.Context(), messageKey{}, msg))
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	pv, panicked := call(next, cw, r2)

	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), rc.o.StoreTimeout)
	defer cancel()
	status := cw.Status()
	if panicked || cw.Overflow() || status < 200 || status > 299 {
		rc.release(ctx, key, seq)
		if panicked {
			panic(pv)
		}
		if cw.Overflow() {
			rc.log.Error("webhooks: response over MaxResponse; message released", "max", rc.o.MaxResponse)
			writeProblem(w, http.StatusInternalServerError, CodeInternal, "response too large", 0)
			return
		}
		cw.Send(w)
		return
	}
	if err := rc.complete(ctx, key, seq); err != nil {
		switch spent.ErrorCode(err) {
		case spent.ENotFound, spent.ESeqMismatch, spent.ENotPending:
			// The record expired (its timestamp can no longer be accepted)
			// or the lease ran out and a retry took the id over: either way
			// nothing more to store.
			rc.log.Warn("webhooks: message handled after its claim ended", "source", msg.Source, "id", msg.ID, "err", err)
		default:
			// The handler succeeded; a non-2xx would make the sender deliver
			// the message again and run it twice for sure. The id stays
			// pending until its lease ends.
			rc.log.Error("webhooks: completing a handled message failed; its id is free again when the lease ends", "source", msg.Source, "id", msg.ID, "err", err)
		}
	}
	cw.Send(w)
}

// call runs the handler, recovering a panic so that the claim can be
// released before the panic goes on.
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

// complete ends the claim, retrying an unavailable ledger: a completion
// retried with the same seq succeeds even when the first one did commit.
func (rc *Receiver) complete(ctx context.Context, key string, seq spent.Seq) error {
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
		_, err = rc.svc.Complete(ctx, spent.Completion{Namespace: rc.o.Namespace, Key: key, Seq: seq, Result: []byte{}})
		if spent.ErrorCode(err) != spent.EUnavailable {
			return err
		}
	}
	return err
}

// release rolls the claim back so that the sender's retry runs the handler
// again. A failure only delays that until the lease runs out.
func (rc *Receiver) release(ctx context.Context, key string, seq spent.Seq) {
	err := rc.svc.Release(ctx, spent.Release{Namespace: rc.o.Namespace, Key: key, Seq: seq})
	switch spent.ErrorCode(err) {
	case "", spent.ENotFound, spent.ESeqMismatch:
	default:
		rc.log.Warn("webhooks: releasing a message failed; its id is free again when the lease ends", "namespace", rc.o.Namespace, "err", err)
	}
}

func (rc *Receiver) inProgress(w http.ResponseWriter, left time.Duration) {
	if left <= 0 || left > rc.o.RetryAfter {
		left = rc.o.RetryAfter
	}
	writeProblem(w, http.StatusConflict, CodeInProgress, "a delivery of this message is being handled; retry", left)
}

// ledgerFailure answers a failed claim: 503 when the ledger is unavailable
// (fail closed: the handler does not run), 500 for anything else (a
// misconfiguration).
func (rc *Receiver) ledgerFailure(w http.ResponseWriter, err error) {
	if spent.ErrorCode(err) == spent.EUnavailable {
		writeProblem(w, http.StatusServiceUnavailable, CodeUnavailable, "the ledger is unavailable; the message was not handled, retry", rc.o.RetryAfter)
		return
	}
	rc.log.Error("webhooks: ledger refused a claim", "namespace", rc.o.Namespace, "err", err)
	writeProblem(w, http.StatusInternalServerError, CodeInternal, "ledger error: "+spent.ErrorCode(err), 0)
}

// readBody reads the whole request body, up to max bytes; a non-zero
// status says why it could not.
func readBody(r *http.Request, max int64) ([]byte, int) {
	if r.ContentLength > max {
		return nil, http.StatusRequestEntityTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody {
		return []byte{}, 0
	}
	n := r.ContentLength
	if n < 0 || n > 64<<10 {
		n = 512
	}
	buf := bytes.NewBuffer(make([]byte, 0, n+1))
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, max+1)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge
		}
		return nil, http.StatusBadRequest
	}
	if int64(buf.Len()) > max {
		return nil, http.StatusRequestEntityTooLarge
	}
	return buf.Bytes(), 0
}
