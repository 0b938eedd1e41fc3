package privacypass_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
	"github.com/spentledger/spent/privacypass"
)

// Example runs an issuer and an origin on the embedded store in a
// temporary directory, obtains a token for the origin's challenge and
// presents it twice: accepted once, then refused with a fresh challenge.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "privacypass-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := pebble.Open(dir+"/ledger", pebble.DefaultOptions())
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// The ledger needs a refuse-mode namespace for spends.
	cfg := privacypass.DefaultConfig()
	cfg.IssuerName = "issuer.example"
	cfg.TokenTypes = []privacypass.TokenType{privacypass.TypeBlindRSA}
	cfg.AttesterTokens = []string{"an-attester-token"}
	lcfg := spent.DefaultConfig()
	lcfg.Secret = []byte("an example secret of at least 32 bytes")
	lcfg.Namespaces = map[string]spent.Policy{privacypass.DefaultNamespace: privacypass.NamespacePolicy(cfg.Epoch, cfg.Grace, cfg.Skew)}
	ledger, err := spent.NewLedger(ctx, store, lcfg)
	if err != nil {
		log.Fatal(err)
	}

	// The issuer: its keys live encrypted in dir/keys.
	kek, _, err := privacypass.LoadOrCreateKEK(dir + "/kek")
	if err != nil {
		log.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := privacypass.New(ctx, cfg, ledger, dir+"/keys", kek, logger)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	mux := http.NewServeMux()
	srv.Register(mux)
	issuer := httptest.NewServer(mux)
	defer issuer.Close()

	// The origin: a handler behind the middleware.
	o, err := privacypass.NewOrigin(ledger, privacypass.OriginConfig{
		IssuerName: "issuer.example", OriginInfo: []string{"origin.example"},
		TokenTypes: []privacypass.TokenType{privacypass.TypeBlindRSA}, Keys: srv.Keyring(), Logger: logger,
	})
	if err != nil {
		log.Fatal(err)
	}
	origin := httptest.NewServer(o.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "welcome")
	})))
	defer origin.Close()

	// The client: ask, get challenged, obtain a token, present it.
	resp, err := http.Get(origin.URL)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	chs, err := privacypass.ParseChallenges(resp.Header)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("without a token:", resp.StatusCode, chs[0].TokenChallenge.TokenType)
	client := &privacypass.Client{AttesterToken: "an-attester-token"}
	token, err := client.Issue(ctx, issuer.URL, &chs[0])
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, origin.URL, nil)
		req.Header.Set("Authorization", privacypass.AuthorizationValue(token))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		again, _ := privacypass.ParseChallenges(resp.Header)
		fmt.Println("with the token:", resp.StatusCode, "fresh challenges:", len(again))
	}
	// Output:
	// without a token: 401 Blind RSA 2048 (0x0002)
	// with the token: 200 fresh challenges: 0
	// with the token: 401 fresh challenges: 1
}
