package wallet_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/wallet"
)

// exampleIssuer starts an ecash issuer on an in-memory ledger and returns
// its URL and a function that stops it.
func exampleIssuer() (string, func()) {
	cfg := ecash.DefaultConfig()
	cfg.IssuerName = "issuer.example"
	cfg.Secret = make([]byte, 32)
	cfg.Denominations = []uint64{1, 2, 5, 10}
	cfg.IssueValue = 20
	cfg.Difficulty = 8
	lc := spent.DefaultConfig()
	lc.Secret = make([]byte, 32)
	lc.Namespaces = ecash.NamespacePolicies(cfg)
	ledger, err := spent.NewLedger(context.Background(), inmem.New(), lc)
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "ecash-keys")
	keys, err := ecash.OpenKeys(cfg.KeysConfig(dir, make([]byte, 32))) // use a random KEK
	if err != nil {
		panic(err)
	}
	iss, err := ecash.New(cfg, ledger, keys)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	iss.Register(mux)
	srv := httptest.NewServer(mux)
	return srv.URL, func() { srv.Close(); os.RemoveAll(dir) }
}

// Example creates a wallet, resumes it (nothing is journaled yet), fetches
// tokens at the start of the session, and spends 3 of them. MinAge is zero
// here only so that the example need not wait a minute.
func Example() {
	url, stop := exampleIssuer()
	defer stop()
	dir, _ := os.MkdirTemp("", "wallet")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "wallet.json")

	ctx := context.Background()
	if err := wallet.Create(path, url); err != nil {
		panic(err)
	}
	w, err := wallet.Open(path, wallet.Options{MinAge: 0})
	if err != nil {
		panic(err)
	}
	defer w.Close()
	if _, err := w.Resume(ctx); err != nil {
		panic(err)
	}
	coins, err := w.Issue(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("issued", len(coins), "tokens")
	resp, change, err := w.Spend(ctx, 3)
	if err != nil {
		panic(err)
	}
	spendable, inFlight := w.Balance()
	fmt.Printf("paid %d, change %d + %d, balance %d, in flight %d\n", resp.Charge, change[0].Denomination, change[1].Denomination, spendable, inFlight)
	// Output:
	// issued 2 tokens
	// paid 3, change 5 + 2, balance 17, in flight 0
}
