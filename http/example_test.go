package http_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
)

func ExampleClient() {
	ctx := context.Background()

	// A server over an in-memory ledger whose clock stands still.
	cfg := spent.DefaultConfig()
	cfg.Secret = bytes.Repeat([]byte{7}, spent.MinSecretLen)
	cfg.Now = func() time.Time { return time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC) }
	ledger, err := spent.NewLedger(ctx, inmem.New(), cfg)
	if err != nil {
		panic(err)
	}
	srv, err := sphttp.NewServer(ledger, sphttp.DefaultConfig())
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	c := sphttp.NewClient(ts.URL, sphttp.ClientConfig{})

	// One step: the result is stored with the claim, and a retry gets it back.
	charge := spent.Claim{Namespace: "default", Key: "order-42", Place: "api-1", Result: []byte(`{"charge":"ch_1"}`)}
	res, err := c.Claim(ctx, charge)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Record.Seq)
	res, err = c.Claim(ctx, charge)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, string(res.Record.Result), res.Record.FirstSeen.Format(time.RFC3339))

	// Two steps: claim, do the work, complete with the seq of the claim.
	res, err = c.Claim(ctx, spent.Claim{Namespace: "default", Key: "order-43"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Record.State)
	again, err := c.Claim(ctx, spent.Claim{Namespace: "default", Key: "order-43"})
	if err != nil {
		panic(err)
	}
	fmt.Println(again.Outcome, again.RetryAfter)
	rec, err := c.Complete(ctx, spent.Completion{Namespace: "default", Key: "order-43", Seq: res.Record.Seq, Result: []byte("done")})
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.State, string(rec.Result))

	// Errors come back as *spent.Error with the server's code.
	_, err = c.Get(ctx, "default", "order-44")
	fmt.Println(spent.ErrorCode(err))
	// Output:
	// fresh 1:1
	// replayed {"charge":"ch_1"} 2025-01-01T09:00:00Z
	// fresh pending
	// in_progress 30s
	// complete done
	// not_found
}
