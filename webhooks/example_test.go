package webhooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
	"github.com/spentledger/spent/webhooks"
)

// A receiver on the embedded store: the same signed message delivered
// twice reaches the handler once.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "webhooks-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := pebble.Open(dir, pebble.DefaultOptions())
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the sender's
	opts := webhooks.DefaultOptions()
	opts.Source = "billing"
	opts.Secrets = []string{secret}
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("an example secret of at least 32 bytes")
	cfg.Namespaces = map[string]spent.Policy{opts.Namespace: opts.Policy(30 * time.Second)}
	ledger, err := spent.NewLedger(context.Background(), store, cfg)
	if err != nil {
		log.Fatal(err)
	}
	rc, err := webhooks.New(ledger, opts)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/billing", rc.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, _ := webhooks.MessageOf(r)
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("handling %s: %s\n", m.ID, body)
		w.WriteHeader(http.StatusNoContent)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// What the sender does: sign "id.timestamp.body" with HMAC-SHA256.
	id, ts, body := "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", strconv.FormatInt(time.Now().Unix(), 10), `{"type":"invoice.paid"}`
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + body))
	sig := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/billing", strings.NewReader(body))
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", ts)
		req.Header.Set("webhook-signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("%d duplicate=%q\n", resp.StatusCode, resp.Header.Get(webhooks.HeaderDuplicate))
	}
	// Output:
	// handling msg_2KWPBgLlAfxdpx2AI54pPJ85f4W: {"type":"invoice.paid"}
	// 204 duplicate=""
	// 200 duplicate="true"
}
