package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spentledger/spent/internal/problem"
)

// ClientOptions configures a Client. Start from [DefaultClientOptions].
type ClientOptions struct {
	// HTTPClient sends the requests. Nil means http.DefaultClient. Give it
	// a Timeout: a request that hangs is a request whose outcome is unknown,
	// and only a timeout turns it into a retry.
	HTTPClient *http.Client
	// MaxAttempts bounds the sends of one request, the first included.
	// Default 6.
	MaxAttempts int
	// BaseDelay is the cap of the first backoff; the cap doubles with each
	// retry up to MaxDelay, and each wait is drawn uniformly between zero
	// and the cap ("full jitter"). Default 100 ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff. Default 5 s.
	MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for; an
	// answer asking for more ends the retries with an *Error. Default 1 min.
	MaxRetryAfter time.Duration
	// MaxBody is the largest request body, in bytes; the body is kept in
	// memory to be sent again. Default 32 MiB.
	MaxBody int64
	// Journal, when set, receives each request (key, method, URL, headers,
	// body) durably before its first send, and forgets it once the server
	// gave a final answer. Nil journals nothing.
	Journal *Journal
	// Rand is the source of keys and of jitter. Nil means crypto/rand.
	Rand io.Reader
	// Now is the clock that reads Retry-After dates. Nil means time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx ends. Nil means a timer. Tests inject one
	// that advances a fake clock.
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultClientOptions returns the defaults described on each field of
// ClientOptions.
func DefaultClientOptions() ClientOptions {
	return ClientOptions{
		MaxAttempts:   6,
		BaseDelay:     100 * time.Millisecond,
		MaxDelay:      5 * time.Second,
		MaxRetryAfter: time.Minute,
		MaxBody:       32 << 20,
	}
}

// Validate refuses unusable options.
func (o *ClientOptions) Validate() error {
	switch {
	case o.MaxAttempts < 1:
		return fmt.Errorf("idempotency: client: MaxAttempts %d: at least 1", o.MaxAttempts)
	case o.BaseDelay <= 0 || o.MaxDelay < o.BaseDelay:
		return fmt.Errorf("idempotency: client: delays %v..%v: want 0 < BaseDelay <= MaxDelay", o.BaseDelay, o.MaxDelay)
	case o.MaxRetryAfter < 0:
		return fmt.Errorf("idempotency: client: MaxRetryAfter %v: must not be negative", o.MaxRetryAfter)
	case o.MaxBody <= 0:
		return fmt.Errorf("idempotency: client: MaxBody %d: must be positive", o.MaxBody)
	}
	return nil
}

// Client sends requests with an Idempotency-Key and retries them safely:
// one key per logical request, kept across every retry, so that the server
// runs the request at most once and answers the retries from its ledger. It
// is safe for concurrent use.
//
// Network errors, 5xx, 409 and 429 answers are retried with exponential
// backoff and full jitter, waiting at least what Retry-After asks; a
// replayed answer (Idempotent-Replayed: true) and any other answer are
// final and returned as they are, 4xx included. When the attempts run out,
// or the server says the outcome is unknown, Do returns an [*Error] that
// says whether the outcome is known.
type Client struct {
	hc  *http.Client
	o   ClientOptions
	rnd io.Reader
	now func() time.Time
}

// NewClient returns a Client with options o.
func NewClient(o ClientOptions) (*Client, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Client{hc: o.HTTPClient, o: o, rnd: o.Rand, now: o.Now}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	if c.rnd == nil {
		c.rnd = rand.Reader
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.o.Sleep == nil {
		c.o.Sleep = sleep
	}
	return c, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Error is the final error of a request whose retries did not end in an
// answer: the attempts ran out, the server said the outcome is unknown, or
// the context ended.
type Error struct {
	// Key is the request's idempotency key: retry later with it, never
	// with a new one, unless Known.
	Key string
	// Attempts is how many times the request was sent (or tried to be).
	Attempts int
	// Known is true when no attempt can have reached the server (every one
	// failed to connect): the request certainly had no effect. When false,
	// the request may or may not have taken effect; a later retry with Key
	// tells (it is replayed, runs, or meets an unknown outcome that an
	// operator must resolve).
	Known bool
	// StatusCode is the last answer's status, zero when the last attempt
	// got no answer.
	StatusCode int
	// Code is the last answer's problem code (CodeOutcomeUnknown,
	// CodeInProgress, ...), empty when it had none.
	Code string
	// RetryAfter is the last answer's Retry-After, if any.
	RetryAfter time.Duration
	// Err is the last attempt's error, if it got no answer.
	Err error
}

// Error describes the failure.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("idempotency: request with key ")
	b.WriteString(e.Key)
	if e.Known {
		b.WriteString(" not applied")
	} else {
		b.WriteString(": outcome unknown")
	}
	b.WriteString(" after ")
	b.WriteString(strconv.Itoa(e.Attempts))
	b.WriteString(" attempts")
	if e.StatusCode != 0 {
		b.WriteString(": last answer ")
		b.WriteString(strconv.Itoa(e.StatusCode))
		if e.Code != "" {
			b.WriteString(" " + e.Code)
		}
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the last attempt's error.
func (e *Error) Unwrap() error { return e.Err }

// Do sends req until it gets a final answer, with one idempotency key for
// every attempt: the request's own Idempotency-Key header if it has one,
// else a new random UUID (sent as a quoted string, the draft standard's
// form). The body is read once and sent again on each retry. With a
// Journal, the request is journaled before the first send and forgotten
// once a final answer arrives; after an *Error it stays journaled.
//
// A final answer is returned as a response and a nil error, whatever its
// status: the caller reads it as it would any response. Otherwise the
// error is an *Error, or a plain error when the request could not be
// prepared (nothing was sent).
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(req.Body, c.o.MaxBody+1))
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("idempotency: reading request body: %w", err)
		}
		if int64(len(b)) > c.o.MaxBody {
			return nil, fmt.Errorf("idempotency: request body over %d bytes", c.o.MaxBody)
		}
		body = b
	}
	h := req.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	var key string
	if vs := h.Values(HeaderKey); len(vs) > 0 {
		k, err := ParseKey(vs[0])
		if err != nil || len(vs) > 1 {
			return nil, fmt.Errorf("idempotency: request has an unusable Idempotency-Key: %w", ErrKeyInvalid)
		}
		key = k
	} else {
		k, err := NewKey(c.rnd)
		if err != nil {
			return nil, err
		}
		key = k
		f, _ := FormatKey(k)
		h.Set(HeaderKey, f)
	}
	if c.o.Journal != nil {
		err := c.o.Journal.Save(JournalEntry{
			Key: key, Method: req.Method, URL: req.URL.String(), Header: h, Body: body, Created: c.now(),
		})
		if err != nil {
			return nil, err
		}
	}
	return c.send(req.Context(), req, h, body, key)
}

// Resume sends a journaled request again, with its key and its bytes
// unchanged, as Do would have gone on doing. Use it after a restart for
// each entry of [Journal.Pending].
func (c *Client) Resume(ctx context.Context, e JournalEntry) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, e.Method, e.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("idempotency: journaled request: %w", err)
	}
	h := e.Header.Clone()
	if h == nil {
		h = make(http.Header)
	}
	f, err := FormatKey(e.Key)
	if err != nil {
		return nil, fmt.Errorf("idempotency: journaled request: %w", err)
	}
	if len(h.Values(HeaderKey)) == 0 {
		h.Set(HeaderKey, f)
	}
	return c.send(ctx, req, h, e.Body, e.Key)
}

// send runs the attempts.
func (c *Client) send(ctx context.Context, req *http.Request, h http.Header, body []byte, key string) (*http.Response, error) {
	fail := &Error{Key: key, Known: true}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			fail.Err = err
			return nil, fail
		}
		r := req.Clone(ctx)
		r.Header = h.Clone()
		r.ContentLength = int64(len(body))
		if body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		} else {
			r.Body = http.NoBody
		}
		fail.Attempts = attempt
		fail.StatusCode, fail.Code, fail.RetryAfter, fail.Err = 0, "", 0, nil
		resp, err := c.hc.Do(r)
		if err != nil {
			if !neverSent(err) {
				fail.Known = false
			}
			fail.Err = err
			if ctx.Err() != nil {
				return nil, fail
			}
		} else {
			if final(resp) {
				if c.o.Journal != nil {
					// A stale entry is harmless: resuming it replays this answer.
					_ = c.o.Journal.Remove(key)
				}
				return resp, nil
			}
			fail.Known = false
			fail.StatusCode = resp.StatusCode
			fail.RetryAfter = c.retryAfter(resp.Header.Get("Retry-After"))
			fail.Code = problemCode(resp)
			resp.Body.Close()
			if fail.Code == CodeOutcomeUnknown {
				return nil, fail
			}
		}
		if attempt >= c.o.MaxAttempts {
			return nil, fail
		}
		wait := c.backoff(attempt)
		if fail.RetryAfter > 0 {
			if fail.RetryAfter > c.o.MaxRetryAfter {
				return nil, fail
			}
			wait = max(wait, fail.RetryAfter)
		}
		if err := c.o.Sleep(ctx, wait); err != nil {
			if fail.Err == nil {
				fail.Err = err
			}
			return nil, fail
		}
	}
}

// final reports whether an answer ends the retries.
func final(resp *http.Response) bool {
	if resp.Header.Get(HeaderReplayed) == "true" {
		return true // the server's stored answer: asking again changes nothing
	}
	s := resp.StatusCode
	return !(s >= 500 || s == http.StatusConflict || s == http.StatusTooManyRequests)
}

// neverSent reports whether a transport error proves the request never
// reached the server: the connection could not be made.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// problemCode reads the code of a problem document answer, and drains the
// body so the connection can be reused.
func problemCode(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 256<<10))
	p, _ := problem.Read(resp.Header, b)
	return p.Code
}

// backoff draws the wait after the attempt-th failure: uniform in
// [0, min(MaxDelay, BaseDelay * 2^(attempt-1))].
func (c *Client) backoff(attempt int) time.Duration {
	ceil := c.o.MaxDelay
	if attempt-1 < 32 {
		if d := c.o.BaseDelay << (attempt - 1); d > 0 && d < ceil {
			ceil = d
		}
	}
	var b [8]byte
	if _, err := io.ReadFull(c.rnd, b[:]); err != nil {
		return ceil
	}
	frac := float64(binary.BigEndian.Uint64(b[:])>>11) / (1 << 53)
	return time.Duration(frac * float64(ceil))
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date.
func (c *Client) retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(s) * time.Second
	} else if errors.Is(err, strconv.ErrRange) && strings.Trim(v, "0123456789") == "" {
		// More delay-seconds than 32 bits hold: longer than any
		// MaxRetryAfter, so the retries end rather than ignore it.
		// (ParseUint reports the range before a later non-digit.)
		return math.MaxInt64
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(c.now()); d > 0 {
			return d
		}
	}
	return 0
}
