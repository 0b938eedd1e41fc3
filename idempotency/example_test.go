package idempotency_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/idempotency"
	"github.com/spentledger/spent/pebble"
)

// A payment endpoint on the embedded store: the retry of a request is
// answered from the ledger, and the money is sent once.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "idempotency-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := pebble.Open(dir, pebble.DefaultOptions())
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	opts := idempotency.DefaultOptions()
	opts.Scope = idempotency.HeaderScope("Authorization")
	cfg := spent.DefaultConfig()
	cfg.Secret = []byte("an example secret of at least 32 bytes")
	cfg.Namespaces = idempotency.Policies(opts, 30*time.Second)
	ledger, err := spent.NewLedger(context.Background(), store, cfg)
	if err != nil {
		log.Fatal(err)
	}
	idem, err := idempotency.New(ledger, opts)
	if err != nil {
		log.Fatal(err)
	}

	sent := 0
	pay := func(w http.ResponseWriter, r *http.Request) {
		// Validate the request here: anything before Applied may run again.
		if err := idempotency.Applied(r); err != nil {
			return // the middleware answers
		}
		sent++ // the irreversible effect
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"state":"applied","transfer":%d}`, sent)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", idem.Handler(http.HandlerFunc(pay)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Authorization", "Bearer client-1-api-key")
		req.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("money sent", sent, "time(s)")
	// Output:
	// 201 {"state":"applied","transfer":1} replayed: false
	// 201 {"state":"applied","transfer":1} replayed: true
	// money sent 1 time(s)
}

// The client retries a request that failed with one key, so that the
// server runs it once.
func ExampleClient_Do() {
	fails := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fails > 0 {
			fails--
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "paid")
	}))
	defer srv.Close()

	c, err := idempotency.NewClient(idempotency.DefaultClientOptions())
	if err != nil {
		log.Fatal(err)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/payments", bytes.NewReader([]byte(`{"amount":100}`)))
	resp, err := c.Do(req)
	if err != nil {
		// An *idempotency.Error: its Known field says whether the payment
		// certainly did not happen; otherwise retry later with its Key.
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.StatusCode, " ", string(body))
	// Output: 200 paid
}
