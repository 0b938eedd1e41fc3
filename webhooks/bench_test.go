package webhooks_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/webhooks"
)

// BenchmarkReceive measures one message through the receiver on the inmem
// store: verification (v1 or v1a), a fresh two-step claim, the handler and
// the completion. Each iteration delivers a new id. The "bare" forms beside
// them verify the same messages without the receiver and without a ledger
// (v1 with the Standard Webhooks reference library, v1a with
// crypto/ed25519), so the ratio shows what the replay check adds.
func BenchmarkReceive(b *testing.B) {
	for _, form := range []string{"v1", "v1-bare", "v1a", "v1a-bare"} {
		b.Run(form, func(b *testing.B) {
			o := testOptions()
			l := newLedger(b, inmem.New(), map[string]spent.Policy{o.Namespace: o.Policy(30 * time.Second)}, time.Now)
			rc, err := webhooks.New(l, o)
			if err != nil {
				b.Fatal(err)
			}
			h := rc.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
			if strings.HasSuffix(form, "-bare") {
				h = bareVerifier(b, strings.TrimSuffix(form, "-bare"))
			}
			ts := time.Now().Truncate(time.Second)
			body := []byte(`{"type":"invoice.paid","data":{"id":"in_1"}}`)
			msgs := make([]msg, b.N)
			for i := range msgs {
				id := "msg_" + strconv.Itoa(i)
				sig := signV1(b, testSecret, id, ts, body)
				if strings.HasPrefix(form, "v1a") {
					sig = signV1a(testSeed, id, ts, body)
				}
				msgs[i] = msg{id: id, ts: ts, body: body, sig: sig}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, msgs[i].request())
				if w.Code != http.StatusNoContent {
					b.Fatalf("got %d", w.Code)
				}
			}
		})
	}
}

// bareVerifier returns a handler that verifies a message of form (v1 or
// v1a) and answers 204, with no receiver and no ledger: the baseline of
// BenchmarkReceive.
func bareVerifier(b *testing.B, form string) http.Handler {
	wh, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		b.Fatal(err)
	}
	pub := ed25519.NewKeyFromSeed(testSeed).Public().(ed25519.PublicKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			b.Error(err)
			return
		}
		if form == "v1" {
			err = wh.Verify(body, r.Header)
		} else {
			content := r.Header.Get(webhooks.HeaderID) + "." + r.Header.Get(webhooks.HeaderTimestamp) + "." + string(body)
			sig, derr := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.Header.Get(webhooks.HeaderSignature), "v1a,"))
			if derr != nil || !ed25519.Verify(pub, []byte(content), sig) {
				err = errors.New("v1a signature does not verify")
			}
		}
		if err != nil {
			b.Error(err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
