package main_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spentledger/spent/internal/tlstest"
)

// freePort returns a loopback address with a port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestRevokedClientCA (issue 31, finding 8): a client whose CA was removed
// from tls_client_ca kept its open connections across the reload and went
// on claiming. Now a reload (SIGHUP) closes every connection, HTTP and
// RESP, whose certificate no longer verifies; a client of a CA still
// trusted keeps its connection.
func TestRevokedClientCA(t *testing.T) {
	f := newTLSFiles(t)
	other := tlstest.NewCA(t, "a CA to be removed")
	caFile := filepath.Join(f.dir, "clients-ca.pem")
	if err := os.WriteFile(caFile, append(append([]byte{}, f.ca.PEM...), other.PEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	respAddr := freePort(t)
	p := StartBinary(t, nil, "--data", t.TempDir(), "--tls-cert", f.serverCert, "--tls-key", f.serverKey,
		"--tls-client-ca", caFile, "--resp", respAddr)
	kept, revoked := f.ca.Client(t, "kept"), other.Client(t, "revoked")
	ctx := context.Background()
	tlsConfig := func(cert tlstest.Pair) *tls.Config {
		return &tls.Config{RootCAs: f.ca.Pool(), Certificates: []tls.Certificate{cert.TLS}, ServerName: "127.0.0.1"}
	}
	redisClient := func(cert tlstest.Pair) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: respAddr, TLSConfig: tlsConfig(cert), PoolSize: 1, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			err := c.SetNX(ctx, "default:"+cert.Cert.Subject.CommonName, "v", 0).Err()
			if err == nil {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("RESP client %s: %v", cert.Cert.Subject.CommonName, err)
			}
		}
	}
	httpClient := func(cert tlstest.Pair) *http.Client {
		tr := &http.Transport{TLSClientConfig: tlsConfig(cert), MaxIdleConnsPerHost: 1}
		t.Cleanup(tr.CloseIdleConnections)
		hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		resp, err := hc.Get(p.Addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return hc
	}
	rKept, rRevoked := redisClient(kept), redisClient(revoked)
	hKept, hRevoked := httpClient(kept), httpClient(revoked)

	// Remove the other CA and reload.
	if err := os.WriteFile(caFile, f.ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.Stderr.String(), "why=SIGHUP"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload in the log:\n%s", p.Stderr)
		}
	}
	// The revoked client's open RESP connection is closed: its next
	// command fails (go-redis does not redial: MaxRetries -1, and a new
	// handshake would be refused anyway).
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = rRevoked.SetNX(ctx, "default:after-revocation", "v", 0).Err(); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("the client of the removed CA went on claiming over its open RESP connection after the reload")
	}
	if _, err := hRevoked.Get(p.Addr + "/healthz"); err == nil {
		t.Fatal("the client of the removed CA went on over HTTP after the reload (its kept-alive connection was not closed)")
	}
	// The kept CA's clients go on.
	if err := rKept.SetNX(ctx, "default:kept-after", "v", 0).Err(); err != nil {
		t.Fatalf("the client of the kept CA over RESP: %v", err)
	}
	resp, err := hKept.Get(p.Addr + "/healthz")
	if err != nil {
		t.Fatalf("the client of the kept CA over HTTP: %v", err)
	}
	resp.Body.Close()
}
