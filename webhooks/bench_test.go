package webhooks_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/webhooks"
)

// BenchmarkReceive measures one message through the receiver on the inmem
// store: verification (v1 or v1a), a fresh two-step claim, the handler and
// the completion. Each iteration delivers a new id.
func BenchmarkReceive(b *testing.B) {
	for _, form := range []string{"v1", "v1a"} {
		b.Run(form, func(b *testing.B) {
			o := testOptions()
			l := newLedger(b, inmem.New(), map[string]spent.Policy{o.Namespace: o.Policy(30 * time.Second)}, time.Now)
			rc, err := webhooks.New(l, o)
			if err != nil {
				b.Fatal(err)
			}
			h := rc.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
			ts := time.Now().Truncate(time.Second)
			body := []byte(`{"type":"invoice.paid","data":{"id":"in_1"}}`)
			msgs := make([]msg, b.N)
			for i := range msgs {
				id := "msg_" + strconv.Itoa(i)
				sig := signV1(b, testSecret, id, ts, body)
				if form == "v1a" {
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
