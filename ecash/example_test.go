package ecash_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/inmem"
)

// Example runs an issuer over an in-memory ledger, obtains a token of 10
// against a proof-of-work challenge, spends it paying 3 with change of 5 and
// 2, and resends the spend as a client whose answer was lost would: the
// stored bytes come back, flagged replayed.
func Example() {
	ctx := context.Background()
	cfg := ecash.DefaultConfig()
	cfg.IssuerName = "issuer.example"
	cfg.Secret = make([]byte, 32) // use 32 random bytes
	cfg.Denominations = []uint64{1, 2, 5, 10}
	cfg.IssueValue = 10
	cfg.Difficulty = 8

	lc := spent.DefaultConfig()
	lc.Secret = make([]byte, 32)
	lc.Namespaces = ecash.NamespacePolicies(cfg)
	ledger, err := spent.NewLedger(ctx, inmem.New(), lc)
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "ecash-keys")
	defer os.RemoveAll(dir)
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
	defer srv.Close()

	// The client: fetch the keys and a challenge, solve it, ask for a 10.
	c := &ecash.Client{URL: srv.URL}
	list, _ := c.Keys(ctx)
	cur, _ := list.Current(ledger.Now())
	ch, _ := c.Challenge(ctx)
	sol, _ := ecash.Solve(ctx, ch)
	seed := make([]byte, ecash.SeedSize)
	rand.Read(seed)
	p, _ := ecash.NewOutputs(list.TokenChallenge, []*ecash.Key{cur[10]}, seed)
	body, _ := (&ecash.Issue{Challenge: ch.Raw, Solution: sol, Outputs: p.Outputs}).MarshalBinary()
	a, err := c.Send(ctx, ecash.IssuePath, body)
	if err != nil {
		panic(err)
	}
	coins, _, _ := p.Finish(a.Response)

	// Spend it: pay 3, change 5 + 2.
	rand.Read(seed)
	change, _ := ecash.NewOutputs(list.TokenChallenge, []*ecash.Key{cur[5], cur[2]}, seed)
	spend, _ := (&ecash.Spend{Token: coins[0].Token, Return: 7, Outputs: change.Outputs}).MarshalBinary()
	first, _ := c.Send(ctx, ecash.SpendPath, spend)
	again, _ := c.Send(ctx, ecash.SpendPath, spend)
	got, resp, _ := change.Finish(again.Response)
	fmt.Printf("charge %d, change %d + %d\n", resp.Charge, got[0].Denomination, got[1].Denomination)
	fmt.Printf("replayed %v, same bytes %v\n", again.Replayed, bytes.Equal(first.Response, again.Response))

	// Another spend of the same token is final.
	rand.Read(seed)
	other, _ := ecash.NewOutputs(list.TokenChallenge, []*ecash.Key{cur[5]}, seed)
	spend2, _ := (&ecash.Spend{Token: coins[0].Token, Return: 5, Outputs: other.Outputs}).MarshalBinary()
	_, err = c.Send(ctx, ecash.SpendPath, spend2)
	fmt.Println(err.(*ecash.Error).Code, err.(*ecash.Error).Status)
	// Output:
	// charge 3, change 5 + 2
	// replayed true, same bytes true
	// double_spend 409
}
