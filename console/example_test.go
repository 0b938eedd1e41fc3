package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/console"
	"github.com/spentledger/spent/inmem"
)

// Example mounts the console beside an application's routes, with auth off
// (serve it on loopback only then), and runs its sampler.
func Example() {
	lc := spent.DefaultConfig()
	lc.Secret = []byte("an example secret of 32 bytes or more")
	ledger, err := spent.NewLedger(context.Background(), inmem.New(), lc)
	if err != nil {
		panic(err)
	}
	cfg := console.DefaultConfig(ledger)
	cfg.Gatherer = prometheus.NewRegistry() // the registry the API's metrics go to
	c, err := console.New(cfg)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)

	mux := http.NewServeMux()
	mux.Handle(console.Prefix, c)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/ui/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Println(rec.Header().Get("Content-Security-Policy"))
	// Output:
	// 200 text/html; charset=utf-8
	// default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'
}
