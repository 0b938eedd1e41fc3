package main_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spentledger/spent"
	spentcmd "github.com/spentledger/spent/cmd/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/internal/tlstest"
)

// tlsFiles are a CA, a server certificate and a client certificate written
// to a test's directory.
type tlsFiles struct {
	ca                     *tlstest.CA
	dir                    string
	caFile                 string
	serverCert, serverKey  string
	clientCert, clientKey  string
	serverSerial, clientCN string
}

func newTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	ca := tlstest.NewCA(t, "spent test CA")
	dir := t.TempDir()
	f := tlsFiles{ca: ca, dir: dir, caFile: ca.WriteFile(t, dir, "ca"), clientCN: "relay-1"}
	srv := ca.Server(t)
	f.serverSerial = srv.Cert.SerialNumber.String()
	f.serverCert, f.serverKey = srv.WriteFiles(t, dir, "server")
	f.clientCert, f.clientKey = ca.Client(t, f.clientCN).WriteFiles(t, dir, "client")
	return f
}

// serverArgs are the serve flags of the files, with the client CA when
// clientCA is set.
func (f tlsFiles) serverArgs(clientCA bool) []string {
	args := []string{"--tls-cert", f.serverCert, "--tls-key", f.serverKey}
	if clientCA {
		args = append(args, "--tls-client-ca", f.caFile)
	}
	return args
}

// servedSerial opens a new TLS connection to addr (https://host:port) and
// returns the serial number of the certificate the server presents.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool, certs ...tls.Certificate) (string, error) {
	t.Helper()
	conn, err := tls.Dial("tcp", strings.TrimPrefix(addr, "https://"), &tls.Config{RootCAs: roots, Certificates: certs, ServerName: "127.0.0.1"})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func TestTLS(t *testing.T) {
	t.Run("ClaimWithTheRightCA", func(t *testing.T) {
		f := newTLSFiles(t)
		s := MustServe(t, t.TempDir(), nil, nil, f.serverArgs(false)...)
		if !strings.HasPrefix(s.Addr, "https://") {
			t.Fatalf("address: got %q, want https://", s.Addr)
		}
		out := MustRun(t, nil, "claim", "--addr", s.Addr, "--cacert", f.caFile, "--json", "order-1", "--result", "paid")
		if !strings.Contains(out, `"outcome":"fresh"`) {
			t.Fatalf("claim over TLS: got %q, want fresh", out)
		}
		// The Go client, with the http package's helper.
		tc, err := sphttp.TLSClientConfig(f.caFile, "", "")
		if err != nil {
			t.Fatal(err)
		}
		r, err := sphttp.NewClient(s.Addr, sphttp.ClientConfig{TLS: tc}).Claim(context.Background(), spent.Claim{Namespace: "default", Key: "order-1"})
		if err != nil || r.Outcome != spent.Replayed {
			t.Fatalf("Go client over TLS: got %v, %v; want replayed", r.Outcome, err)
		}
		// Without the CA the server's certificate is not trusted.
		if r := Run(t, nil, "claim", "--addr", s.Addr, "order-2", "--result", "paid"); r.Code == 0 || !strings.Contains(r.Stderr, "certificate") {
			t.Fatalf("claim without --cacert: exit %d, stderr %q; want a refused certificate", r.Code, r.Stderr)
		}
		// A CA file that does not exist is a usage error that names the flag.
		if r := Run(t, nil, "claim", "--addr", s.Addr, "--cacert", filepath.Join(f.dir, "nope.crt"), "order-2"); r.Code != spentcmd.ExitUsage || !strings.Contains(r.Stderr, "--cacert") {
			t.Fatalf("claim --cacert missing file: exit %d, stderr %q; want exit %d naming --cacert", r.Code, r.Stderr, spentcmd.ExitUsage)
		}
		// The server speaks TLS 1.2 at the oldest.
		_, err = tls.Dial("tcp", strings.TrimPrefix(s.Addr, "https://"), &tls.Config{RootCAs: f.ca.Pool(), MaxVersion: tls.VersionTLS11})
		if err == nil {
			t.Fatal("a TLS 1.1 handshake succeeded; want it refused")
		}
	})

	t.Run("ClientCARequiresACertificate", func(t *testing.T) {
		f := newTLSFiles(t)
		s := MustServe(t, t.TempDir(), nil, nil, f.serverArgs(true)...)
		if r := Run(t, nil, "claim", "--addr", s.Addr, "--cacert", f.caFile, "k", "--result", "r"); r.Code == 0 || !strings.Contains(r.Stderr, "asks for a client certificate") {
			t.Fatalf("claim without a client certificate: exit %d, stderr %q; want refused", r.Code, r.Stderr)
		}
		// A certificate from another CA is refused too.
		other := tlstest.NewCA(t, "another CA").Client(t, "intruder")
		if err := roundTrip(s.Addr, f.ca.Pool(), other.TLS); err == nil {
			t.Fatal("a client certificate of another CA was accepted")
		}
		if err := roundTrip(s.Addr, f.ca.Pool(), f.ca.Client(t, "relay-2").TLS); err != nil {
			t.Fatalf("a client certificate of the client CA: %v", err)
		}
		// Flags, then the environment.
		out := MustRun(t, nil, "claim", "--addr", s.Addr, "--cacert", f.caFile, "--cert", f.clientCert, "--key", f.clientKey, "--json", "k", "--result", "r")
		if !strings.Contains(out, `"outcome":"fresh"`) {
			t.Fatalf("claim with a client certificate: got %q, want fresh", out)
		}
		e := env{"SPENT_ADDR": s.Addr, "SPENT_CACERT": f.caFile, "SPENT_CERT": f.clientCert, "SPENT_KEY": f.clientKey}
		if out := MustRun(t, e, "get", "--json", "k"); !strings.Contains(out, `"namespace":"default"`) {
			t.Fatalf("get with the certificate from the environment: got %q", out)
		}
		if r := Run(t, nil, "claim", "--addr", s.Addr, "--cacert", f.caFile, "--cert", f.clientCert, "k"); r.Code != spentcmd.ExitUsage || !strings.Contains(r.Stderr, "give both") {
			t.Fatalf("--cert without --key: exit %d, stderr %q; want a usage error", r.Code, r.Stderr)
		}
	})

	t.Run("ReloadWhenTheFilesChange", func(t *testing.T) {
		f := newTLSFiles(t)
		s := MustServe(t, t.TempDir(), nil, nil, f.serverArgs(false)...)
		// A client with a connection open before the change keeps using it.
		tc, err := sphttp.TLSClientConfig(f.caFile, "", "")
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		if reused := getReused(t, hc, s.Addr+"/healthz"); reused {
			t.Fatal("the first request reused a connection")
		}
		next := f.ca.Server(t)
		next.WriteFiles(t, f.dir, "server")
		want := next.Cert.SerialNumber.String()
		waitServed(t, s.Addr, f.ca.Pool(), want, 15*time.Second)
		if reused := getReused(t, hc, s.Addr+"/healthz"); !reused {
			t.Fatal("the reload dropped the open connection: the request after it opened a new one")
		}
		if !strings.Contains(s.Stderr.String(), "certificates reloaded") {
			t.Fatalf("the log does not say the certificates were reloaded:\n%s", s.Stderr)
		}

		// A broken key is logged and the certificate in force stays.
		if err := os.WriteFile(f.serverKey, []byte("not a key"), 0o600); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for !strings.Contains(s.Stderr.String(), "reload failed") {
			if time.Now().After(deadline) {
				t.Fatalf("no reload failure logged in 15s:\n%s", s.Stderr)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got, err := servedSerial(t, s.Addr, f.ca.Pool()); err != nil || got != want {
			t.Fatalf("after a failed reload: serial %s, %v; want the previous certificate %s", got, err, want)
		}
	})

	t.Run("RefusedAtStart", func(t *testing.T) {
		f := newTLSFiles(t)
		for name, c := range map[string]struct {
			args []string
			want string
		}{
			"CertWithoutKey":     {[]string{"--tls-cert", f.serverCert}, "tls_cert and tls_key go together"},
			"ClientCAWithoutTLS": {[]string{"--tls-client-ca", f.caFile}, "TLS is off"},
			"MissingCert":        {[]string{"--tls-cert", filepath.Join(f.dir, "nope.crt"), "--tls-key", f.serverKey}, "nope.crt"},
			"KeyOfAnotherCert":   {[]string{"--tls-cert", f.serverCert, "--tls-key", f.clientKey}, "private key does not match"},
		} {
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				r := Run(t, nil, append([]string{"serve", "--listen", "127.0.0.1:0", "--data", dir}, c.args...)...)
				if r.Code != spentcmd.ExitUsage || !strings.Contains(r.Stderr, c.want) {
					t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.Code, r.Stderr, spentcmd.ExitUsage, c.want)
				}
				if _, err := os.Stat(filepath.Join(dir, "secret")); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("DATA/secret after a refused start: %v; want none written", err)
				}
			})
		}
	})
}

// roundTrip sends one request over a new connection and returns its error.
func roundTrip(addr string, roots *x509.CertPool, certs ...tls.Certificate) error {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
	resp, err := hc.Get(addr + "/healthz")
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// getReused sends GET url with hc, fails the test unless it is answered, and
// reports whether the request went over a connection opened before.
func getReused(t *testing.T, hc *http.Client, url string) (reused bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) // read to the end, so that the connection is kept
	resp.Body.Close()
	return reused
}

// waitServed waits until a new connection to addr is presented the
// certificate with the serial number want.
func waitServed(t *testing.T, addr string, roots *x509.CertPool, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := servedSerial(t, addr, roots)
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("served certificate serial %s (%v) after %s; want %s", got, err, within, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTLSReloadOnSIGHUP swaps the certificate of a server process on disk
// in a way its poll cannot see (same sizes, the old times put back), and
// checks that SIGHUP makes it serve the new one without a restart.
func TestTLSReloadOnSIGHUP(t *testing.T) {
	f := newTLSFiles(t)
	const size = 4096
	// Padding in front of the PEM blocks (which PEM readers skip) gives
	// every version of a file the same size.
	pad := func(b []byte) []byte {
		return append([]byte("#"+strings.Repeat("-", size-len(b)-2)+"\n"), b...)
	}
	write := func(p tlstest.Pair) {
		t.Helper()
		for path, b := range map[string][]byte{f.serverCert: p.CertPEM, f.serverKey: p.KeyPEM} {
			if err := os.WriteFile(path, pad(b), 0o600); err != nil {
				t.Fatal(err)
			}
			when := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
			if err := os.Chtimes(path, when, when); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := f.ca.Server(t)
	write(first)
	p := StartBinary(t, nil, append([]string{"--data", t.TempDir()}, f.serverArgs(false)...)...)
	if got, err := servedSerial(t, p.Addr, f.ca.Pool()); err != nil || got != first.Cert.SerialNumber.String() {
		t.Fatalf("served serial %s, %v; want %s", got, err, first.Cert.SerialNumber)
	}
	second := f.ca.Server(t)
	write(second)
	// Past two polls, the poll has not seen the change.
	time.Sleep(5 * time.Second)
	if got, err := servedSerial(t, p.Addr, f.ca.Pool()); err != nil || got != first.Cert.SerialNumber.String() {
		t.Fatalf("before SIGHUP: served serial %s, %v; want still the first %s (the test's swap must be invisible to the poll)", got, err, first.Cert.SerialNumber)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitServed(t, p.Addr, f.ca.Pool(), second.Cert.SerialNumber.String(), 10*time.Second)
	// The server logs the reload just after it starts serving the new
	// certificate, and the line crosses a pipe: give it a moment.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.Stderr.String(), "why=SIGHUP"); {
		if time.Now().After(deadline) {
			t.Fatalf("the log does not say SIGHUP reloaded the certificates:\n%s", p.Stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMTLSAttester issues a Privacy Pass token through the mtls attester
// to a client that presents a certificate, and refuses one without.
func TestMTLSAttester(t *testing.T) {
	f := newTLSFiles(t)
	cfg := WriteConfig(t, `
tls_cert = "`+f.serverCert+`"
tls_key = "`+f.serverKey+`"
tls_client_ca = "`+f.caFile+`"

[privacypass]
issuer_name = "issuer.example"
origin_info = ["origin.example"]
token_types = [1]
attester = "mtls"
quota_per_epoch = 2
`)
	e := env{"SPENT_KEK": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}
	s := MustServe(t, t.TempDir(), e, nil, "--config", cfg)
	tlsArgs := []string{"--cacert", f.caFile, "--cert", f.clientCert, "--key", f.clientKey}
	fetch := append([]string{"token", "fetch", "--issuer", s.Addr, "--origin", s.Addr + "/v1/redeem"}, tlsArgs...)
	tok := strings.TrimSpace(MustRun(t, nil, fetch...))
	if tok == "" || strings.Contains(tok, "\n") {
		t.Fatalf("token fetch with a client certificate: got %q, want one token", tok)
	}
	redeem := append([]string{"token", "redeem", "--origin", s.Addr + "/v1/redeem", "--token", tok}, tlsArgs...)
	if r := Run(t, nil, redeem...); r.Code != 0 {
		t.Fatalf("redeem: exit %d, stdout %q, stderr %q; want success", r.Code, r.Stdout, r.Stderr)
	}
	// The attester counts the certificate's subject: its quota is 2.
	MustRun(t, nil, fetch...)
	if r := Run(t, nil, fetch...); r.Code == 0 || !strings.Contains(r.Stderr+r.Stdout, "quota") {
		t.Fatalf("third fetch of one subject: exit %d, stderr %q; want a quota refusal", r.Code, r.Stderr)
	}
	// Without a certificate the handshake is refused before any issuance.
	r := Run(t, nil, "token", "fetch", "--issuer", s.Addr, "--origin", s.Addr+"/v1/redeem", "--cacert", f.caFile)
	if r.Code == 0 || !strings.Contains(r.Stderr, "asks for a client certificate") {
		t.Fatalf("token fetch without a client certificate: exit %d, stdout %q, stderr %q; want refused", r.Code, r.Stdout, r.Stderr)
	}
}

// TestMTLSAttesterNeedsClientCA refuses at start a config whose attester can
// never attest anyone.
func TestMTLSAttesterNeedsClientCA(t *testing.T) {
	f := newTLSFiles(t)
	cfg := WriteConfig(t, `
[privacypass]
issuer_name = "issuer.example"
origin_info = ["origin.example"]
token_types = [1]
attester = "mtls"
`)
	for name, args := range map[string][]string{"PlainHTTP": nil, "TLSWithoutClientCA": f.serverArgs(false)} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			r := Run(t, nil, append([]string{"serve", "--listen", "127.0.0.1:0", "--data", dir, "--config", cfg}, args...)...)
			if r.Code != spentcmd.ExitUsage || !strings.Contains(r.Stderr, `attester = "mtls"`) || !strings.Contains(r.Stderr, "tls_client_ca") {
				t.Fatalf("exit %d, stderr %q; want exit %d naming the attester and tls_client_ca", r.Code, r.Stderr, spentcmd.ExitUsage)
			}
		})
	}
	// With the client CA from the flag, the same file starts.
	s := MustServe(t, t.TempDir(), env{"SPENT_KEK": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}, nil,
		append([]string{"--config", cfg}, f.serverArgs(true)...)...)
	s.Stop()
}

// TestListenPlaintext: a non-loopback address needs TLS or allow_plaintext,
// with tokens; without tokens it stays refused (TestListen).
func TestListenPlaintext(t *testing.T) {
	cfg := WriteConfig(t, `
[[tokens]]
token = "0123456789abcdef0123456789abcdef"
scopes = ["claim"]
`)
	f := newTLSFiles(t)
	r := Run(t, nil, "serve", "--config", cfg, "--listen", "0.0.0.0:0", "--data", t.TempDir())
	if r.Code != spentcmd.ExitUsage || !strings.Contains(r.Stderr, "allow_plaintext") || !strings.Contains(r.Stderr, "tls_cert") {
		t.Fatalf("non-loopback without TLS: exit %d, stderr %q; want exit %d naming tls_cert and allow_plaintext", r.Code, r.Stderr, spentcmd.ExitUsage)
	}
	t.Run("AllowPlaintextWarns", func(t *testing.T) {
		s := MustServe(t, t.TempDir(), nil, nil, "--config", cfg, "--listen", "0.0.0.0:0", "--allow-plaintext")
		s.Stop()
		if !strings.Contains(s.Stderr.String(), "level=WARN") || !strings.Contains(s.Stderr.String(), "without TLS") {
			t.Fatalf("no warning of plaintext on a non-loopback address:\n%s", s.Stderr)
		}
	})
	t.Run("AllowPlaintextInTheFile", func(t *testing.T) {
		cfg := WriteConfig(t, "allow_plaintext = true\n"+`
[[tokens]]
token = "0123456789abcdef0123456789abcdef"
scopes = ["claim"]
`)
		s := MustServe(t, t.TempDir(), nil, nil, "--config", cfg, "--listen", "0.0.0.0:0")
		s.Stop()
	})
	t.Run("TLS", func(t *testing.T) {
		s := MustServe(t, t.TempDir(), nil, nil, append([]string{"--config", cfg, "--listen", "0.0.0.0:0"}, f.serverArgs(false)...)...)
		s.Stop()
		if strings.Contains(s.Stderr.String(), "without TLS") {
			t.Fatalf("a TLS server warns of plaintext:\n%s", s.Stderr)
		}
	})
	t.Run("LoopbackNeedsNeither", func(t *testing.T) {
		s := MustServe(t, t.TempDir(), nil, nil, "--config", cfg)
		s.Stop()
		if strings.Contains(s.Stderr.String(), "without TLS") {
			t.Fatalf("a loopback server warns of plaintext:\n%s", s.Stderr)
		}
	})
}

// TestListenBusyPortLeavesNoSecret: a port that cannot be listened on is
// found before the data directory is written.
func TestListenBusyPortLeavesNoSecret(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := filepath.Join(t.TempDir(), "data")
	r := Run(t, nil, "serve", "--listen", busy.Addr().String(), "--data", dir)
	if r.Code == 0 || !strings.Contains(r.Stderr, "address already in use") || !strings.Contains(r.Stderr, "--listen") {
		t.Fatalf("serve on a busy port: exit %d, stderr %q; want a failure that says the address is in use and names --listen", r.Code, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "secret")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DATA/secret after a failed listen: %v; want none written", err)
	}
}
