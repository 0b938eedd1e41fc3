package http_test

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/internal/tlstest"
)

// TestClientTLS claims through a server that requires a client certificate,
// with the client's TLS configuration read from PEM files.
func TestClientTLS(t *testing.T) {
	e := MustServe(t, sphttp.DefaultConfig())
	ca := tlstest.NewCA(t, "test CA")
	ts := httptest.NewUnstartedServer(e.server)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	ts.StartTLS()
	defer ts.Close()
	dir := t.TempDir()
	caFile := ca.WriteFile(t, dir, "ca")
	certFile, keyFile := ca.Client(t, "relay").WriteFiles(t, dir, "client")
	ctx := context.Background()
	claim := spent.Claim{Namespace: "default", Key: "k", Result: []byte("r")}

	tc, err := sphttp.TLSClientConfig(caFile, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if tc.MinVersion != tls.VersionTLS12 {
		t.Fatalf("MinVersion: got %x, want TLS 1.2", tc.MinVersion)
	}
	if r, err := sphttp.NewClient(ts.URL, sphttp.ClientConfig{TLS: tc}).Claim(ctx, claim); err != nil || r.Outcome != spent.Fresh {
		t.Fatalf("claim with a client certificate: got %v, %v; want fresh", r.Outcome, err)
	}
	noCert, err := sphttp.TLSClientConfig(caFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sphttp.NewClient(ts.URL, sphttp.ClientConfig{TLS: noCert}).Claim(ctx, claim); spent.ErrorCode(err) != spent.EUnavailable {
		t.Fatalf("claim without a client certificate: got %v, want unavailable (refused at the handshake)", err)
	}

	for name, c := range map[string]struct{ ca, cert, key, want string }{
		"MissingCA":      {ca: dir + "/nope.crt", want: "nope.crt"},
		"CAWithoutPEM":   {ca: keyFile, want: "no PEM certificate"},
		"CertWithoutKey": {cert: certFile, want: "give both"},
		"KeyMismatch":    {cert: certFile, key: caFile, want: "client certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sphttp.TLSClientConfig(c.ca, c.cert, c.key)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "http: ") {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}
