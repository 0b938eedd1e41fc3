package webhooks_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/webhooks"
)

// canonicalSeconds is the form of webhook-timestamp ParseHeaders accepts:
// decimal digits without a sign or a leading zero.
var canonicalSeconds = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// FuzzTimestamp sends correctly signed messages whose webhook-timestamp is
// fuzzed text, at a fuzzed clock, to a Verifier with a fuzzed tolerance
// and to a Receiver, and checks, in exact arithmetic, that
//   - a message is accepted exactly when its timestamp is canonical, at
//     most MaxTimestampLen digits, and within the tolerance of the clock
//     either way; otherwise it is refused with ErrHeadersInvalid or
//     ErrTimestamp, never for its (valid) signature;
//   - an accepted message's Timestamp is that second, never a wrapped
//     time;
//   - the Receiver claims its id until timestamp + Tolerance + Skew, which
//     lies after now and within MinRetention of it.
func FuzzTimestamp(f *testing.F) {
	base := newClock().Now()
	for _, ts := range []string{
		strconv.FormatInt(base.Unix(), 10), strconv.FormatInt(base.Unix()+300, 10), strconv.FormatInt(base.Unix()-301, 10),
		"0", "01", "-1", "+1772366400", " 1772366400", "1772366400.5", "1e9", "", "999999999999", "1000000000000",
		"9223372036854775807", "9223372036854775808", "18446744073709551616",
	} {
		f.Add(ts, int64(0), uint16(300))
	}
	f.Add(strconv.FormatInt(base.Unix()+300, 10), int64(-1), uint16(300))
	f.Add(strconv.FormatInt(base.Unix(), 10), int64(300*time.Second), uint16(300))
	f.Add(strconv.FormatInt(base.Unix(), 10), int64(300*time.Second+1), uint16(300))

	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	priv := ed25519.NewKeyFromSeed(seed)
	pub := webhooks.PublicKeyPrefix + base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))

	c := newClock()
	o := testOptions()
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("a test secret of at least thirty-two bytes")
	cfg.Namespaces = map[string]spent.Policy{o.Namespace: o.Policy(30 * time.Second)}
	cfg.Now = c.Now
	l, err := spent.NewLedger(context.Background(), newCounting(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	rc, err := webhooks.New(l, o)
	if err != nil {
		f.Fatal(err)
	}
	h := rc.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	var n atomic.Int64

	f.Fuzz(func(t *testing.T, ts string, offset int64, tolSec uint16) {
		tol := time.Duration(tolSec%3600) * time.Second
		if tol == 0 {
			return // refused by NewVerifier
		}
		now := base.Add(time.Duration(offset % int64(time.Hour)))
		v, err := webhooks.NewVerifier(nil, []string{pub}, tol)
		if err != nil {
			t.Fatal(err)
		}
		id := "msg_" + strconv.FormatInt(n.Add(1), 10)
		body := []byte(`{"type":"invoice.paid"}`)
		sig := "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(id+"."+ts+"."+string(body))))
		hdr := http.Header{}
		hdr.Set(webhooks.HeaderID, id)
		hdr.Set(webhooks.HeaderTimestamp, ts)
		hdr.Set(webhooks.HeaderSignature, sig)

		canonical := canonicalSeconds.MatchString(ts) && len(ts) <= webhooks.MaxTimestampLen
		inWindow := func(tol time.Duration) bool {
			if !canonical {
				return false
			}
			sec, _ := new(big.Int).SetString(ts, 10)
			d := new(big.Int).Sub(big.NewInt(now.UnixNano()), sec.Mul(sec, big.NewInt(int64(time.Second))))
			return d.CmpAbs(big.NewInt(int64(tol))) <= 0
		}

		m, err := v.Verify(hdr, body, now)
		switch {
		case err == nil && !inWindow(tol):
			t.Fatalf("timestamp %q at %v, tolerance %v: accepted", ts, now, tol)
		case err != nil && inWindow(tol):
			t.Fatalf("timestamp %q at %v, tolerance %v: refused: %v", ts, now, tol, err)
		case err != nil && !canonical && !errors.Is(err, webhooks.ErrHeadersInvalid) && !errors.Is(err, webhooks.ErrHeadersMissing):
			t.Fatalf("timestamp %q: got %v, want ErrHeadersInvalid", ts, err)
		case err != nil && canonical && !errors.Is(err, webhooks.ErrTimestamp):
			t.Fatalf("timestamp %q at %v, tolerance %v: got %v, want ErrTimestamp", ts, now, tol, err)
		case err == nil && (m.ID != id || strconv.FormatInt(m.Timestamp.Unix(), 10) != ts || m.Timestamp.Nanosecond() != 0):
			t.Fatalf("timestamp %q: message %+v", ts, m)
		}

		// The same message through the Receiver, at the same instant.
		c.Advance(now.Sub(c.Now()))
		r := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body))
		r.Header = hdr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if accepted := inWindow(o.Tolerance); (w.Code == http.StatusOK) != accepted {
			t.Fatalf("timestamp %q at %v: receiver answered %d %s, want it accepted %v", ts, now, w.Code, w.Body, accepted)
		}
		if w.Code != http.StatusOK {
			return
		}
		rec, err := l.Get(context.Background(), o.Namespace, webhooks.LedgerKey(o.Source, id))
		if err != nil {
			t.Fatal(err)
		}
		sec, _ := strconv.ParseInt(ts, 10, 64)
		if want := time.Unix(sec, 0).Add(o.Tolerance + o.Skew); !rec.ExpiresAt.Equal(want) {
			t.Fatalf("timestamp %q: id remembered until %v, want %v", ts, rec.ExpiresAt, want)
		}
		if left := rec.ExpiresAt.Sub(now); left <= 0 || left > o.MinRetention() {
			t.Fatalf("timestamp %q at %v: id remembered for %v, want (0, %v]", ts, now, left, o.MinRetention())
		}
	})
}
