package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/idempotency"
)

// roundTripFunc answers requests without a network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// delaySeconds is RFC 9110's delay-seconds: one or more decimal digits.
var delaySeconds = regexp.MustCompile(`^[0-9]+$`)

// FuzzRetryAfter answers every attempt of a Client with 503 and a fuzzed
// Retry-After, under a fuzzed MaxRetryAfter, and checks the wait the
// server's number (or date) becomes, in exact arithmetic:
//   - delay-seconds or a future HTTP date asking for at most MaxRetryAfter
//     is waited exactly, then the request is sent again;
//   - one asking for more ends the retries at once with an *Error, as
//     MaxRetryAfter's documentation says, however many digits it has;
//   - anything else is ignored: the backoff alone decides, which is zero
//     here (the jitter source reads zeros), and the request is sent again.
func FuzzRetryAfter(f *testing.F) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{
		"", "0", "1", "59", "60", "61", "0060", "4294967295", "4294967296", "18446744073709551616",
		"99999999999999999999999999", "-1", "+5", " 5", "5 ", "1.5", "1e3",
		now.Add(30 * time.Second).Format(http.TimeFormat), now.Add(-time.Hour).Format(http.TimeFormat),
		now.Add(2 * time.Minute).Format(http.TimeFormat), "Sun, 01 Mar 2026 12:00:30 GMT", "Mon, 01 Jan 0001 00:00:00 GMT",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Sunday, 01-Mar-26 12:00:30 GMT", "Sun Mar  1 12:00:30 2026",
	} {
		f.Add(v, uint32(60))
	}
	f.Add("0", uint32(0))
	f.Add("1", uint32(0))
	f.Fuzz(func(t *testing.T, v string, maxSec uint32) {
		var sleeps []time.Duration
		attempts := 0
		o := idempotency.DefaultClientOptions()
		o.MaxAttempts = 2
		o.MaxRetryAfter = time.Duration(maxSec%(1<<20)) * time.Second
		o.Rand = zeros{}
		o.Now = func() time.Time { return now }
		o.Sleep = func(_ context.Context, d time.Duration) error {
			sleeps = append(sleeps, d)
			return nil
		}
		o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			attempts++
			h := http.Header{}
			h["Retry-After"] = []string{v}
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
		})}
		c, err := idempotency.NewClient(o)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, "http://api.example/orders", bytes.NewReader([]byte("{}")))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Do(req)
		var e *idempotency.Error
		if !errors.As(err, &e) || e.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("Retry-After %q: got %v, want an *Error after a 503", v, err)
		}

		// What the server asked for, in nanoseconds; nil when it asked
		// for nothing the client should heed.
		var asked *big.Int
		if delaySeconds.MatchString(v) {
			asked, _ = new(big.Int).SetString(v, 10)
			asked.Mul(asked, big.NewInt(int64(time.Second)))
		} else if at, err := http.ParseTime(v); err == nil {
			// Whole seconds both, so exact however far apart.
			asked = big.NewInt(at.Unix() - now.Unix())
			asked.Mul(asked, big.NewInt(int64(time.Second)))
		}
		if asked != nil && asked.Sign() <= 0 {
			asked = nil
		}
		switch {
		case asked == nil:
			if attempts != 2 || len(sleeps) != 1 || sleeps[0] != 0 {
				t.Fatalf("Retry-After %q ignored: got %d attempts, sleeps %v; want 2 attempts after no wait", v, attempts, sleeps)
			}
		case asked.Cmp(big.NewInt(int64(o.MaxRetryAfter))) > 0:
			if attempts != 1 || len(sleeps) != 0 {
				t.Fatalf("Retry-After %q over MaxRetryAfter %v: got %d attempts, sleeps %v; want the retries ended", v, o.MaxRetryAfter, attempts, sleeps)
			}
		default:
			if attempts != 2 || len(sleeps) != 1 || big.NewInt(int64(sleeps[0])).Cmp(asked) != 0 {
				t.Fatalf("Retry-After %q (MaxRetryAfter %v): got %d attempts, sleeps %v; want a wait of %v ns", v, o.MaxRetryAfter, attempts, sleeps, asked)
			}
		}
	})
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
