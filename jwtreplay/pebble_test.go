package jwtreplay_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/jwtreplay"
	"github.com/spentledger/spent/pebble"
)

// TestReplayRefusedAfterRestart accepts a token and a proof over the
// embedded (Pebble) store, closes it, reopens the directory and checks that
// both are still refused: the claim was durable before the answer.
func TestReplayRefusedAfterRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledger")
	c := newClock(start)
	i := newIssuer(t, "https://a.example", jose.ES256)
	cl := newClient(t, jose.ES256)
	jo := jwtreplay.DefaultJTIOptions()
	jo.Issuers = []string{i.name}
	jo.Audience = []string{audience}
	jo.Keys = jwtreplay.StaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{i.pub}})
	do := jwtreplay.DefaultDPoPOptions()
	tok := i.sign(t, claims{ID: "durable", Audience: []string{audience}, Expiry: start.Add(time.Hour)})
	req := jwtreplay.ProofRequest{Proof: cl.proof(t, proofClaims("durable", "GET", resource, start)), Method: "GET", URI: resource}

	open := func() (*jwtreplay.JTI, *jwtreplay.DPoP, func()) {
		t.Helper()
		st, err := pebble.Open(dir, pebble.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		cfg := spent.DefaultConfig()
		cfg.Secret = bytes.Repeat([]byte("j"), spent.MinSecretLen)
		cfg.Namespaces = map[string]spent.Policy{jo.Namespace: jo.Policy(), do.Namespace: do.Policy()}
		cfg.Now = c.Now
		l, err := spent.NewLedger(context.Background(), st, cfg)
		if err != nil {
			st.Close()
			t.Fatal(err)
		}
		j, err := jwtreplay.NewJTI(l, jo)
		if err != nil {
			t.Fatal(err)
		}
		d, err := jwtreplay.NewDPoP(l, do)
		if err != nil {
			t.Fatal(err)
		}
		return j, d, func() {
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}

	j, d, closeStore := open()
	if _, err := j.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Verify(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	closeStore()

	j, d, closeStore = open()
	defer closeStore()
	_, err := j.Verify(context.Background(), tok)
	assertCode(t, err, jwtreplay.CodeReplayed)
	_, err = d.Verify(context.Background(), req)
	assertCode(t, err, jwtreplay.CodeReplayed)
}
