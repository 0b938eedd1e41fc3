package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/internal/tlsfiles"
	"github.com/spentledger/spent/privacypass"
)

// tlsPollInterval is how often the server looks at its certificate files
// for a change.
const tlsPollInterval = 2 * time.Second

// checkTLS refuses TLS settings that cannot work together: a certificate
// without its key, a client CA without TLS, and the mtls attester of
// [privacypass] without a client CA (it would never attest anyone).
func (cfg *serveConfig) checkTLS() error {
	switch {
	case (cfg.TLSCert == "") != (cfg.TLSKey == ""):
		return errors.New("tls_cert and tls_key go together: set both (--tls-cert, --tls-key) to serve HTTPS, or neither to serve plain HTTP")
	case cfg.TLSClientCA != "" && cfg.TLSCert == "":
		return errors.New("tls_client_ca is set but TLS is off: set tls_cert and tls_key (--tls-cert, --tls-key) too, since client certificates are verified only over TLS")
	case cfg.Privacypass != nil && cfg.Privacypass.Attester == privacypass.AttesterMTLS && cfg.TLSClientCA == "":
		return errors.New(`[privacypass] attester = "mtls" identifies a client by its verified TLS certificate, but tls_client_ca is unset, so no client could be attested: set tls_cert, tls_key and tls_client_ca (--tls-client-ca), or use attester = "bearer"`)
	}
	return nil
}

// isLoopback reports whether the host of the listen address listen is a
// loopback address or "localhost".
func isLoopback(listen string) (bool, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// certReloader holds the server's TLS configuration, reloaded from its files
// on SIGHUP and when the files change. Handshakes read the current one
// through GetConfigForClient, so that a reload drops no connection: those
// open keep the certificate they began with.
type certReloader struct {
	certFile, keyFile, clientCAFile string
	log                             *slog.Logger

	cur   atomic.Pointer[tls.Config]
	mu    sync.Mutex // serializes reloads
	stamp string     // the files' sizes and times at the last load attempt
	hooks []func(*x509.CertPool)
}

// onReload calls f after each successful reload, with the client CAs now
// in force (nil without a client CA), so that the listeners can close the
// connections whose client certificate no longer verifies. Call it before
// watch.
func (r *certReloader) onReload(f func(*x509.CertPool)) {
	r.mu.Lock()
	r.hooks = append(r.hooks, f)
	r.mu.Unlock()
}

// newCertReloader loads the certificate, key and client CA of cfg; an error
// names the file at fault.
func newCertReloader(cfg serveConfig, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: cfg.TLSCert, keyFile: cfg.TLSKey, clientCAFile: cfg.TLSClientCA, log: log}
	r.stamp = r.fileStamp()
	tc, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(tc)
	return r, nil
}

// load reads the files into the configuration of a handshake: TLS 1.2 or
// later, the standard library's cipher suites, HTTP/2 and HTTP/1.1, and,
// with a client CA, a verified client certificate required of every client.
func (r *certReloader) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls_cert %s, tls_key %s: %w", r.certFile, r.keyFile, err)
	}
	tc := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2", "http/1.1"},
	}
	if r.clientCAFile != "" {
		pool, err := tlsfiles.CertPool(r.clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls_client_ca: %w", err)
		}
		tc.ClientCAs = pool
		// Required, not only verified when given: with a client CA, a
		// client without a certificate is refused at the handshake, bearer
		// token or not.
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// fileStamp returns the sizes and modification times of the files.
func (r *certReloader) fileStamp() string {
	var s string
	for _, f := range []string{r.certFile, r.keyFile, r.clientCAFile} {
		if f == "" {
			continue
		}
		if fi, err := os.Stat(f); err != nil {
			s += "?;"
		} else {
			s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return s
}

// serverConfig returns the http.Server's TLS configuration, which hands
// each handshake the configuration loaded last.
func (r *certReloader) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load(), nil
		},
	}
}

// reload loads the files again; a failure keeps the configuration in force
// and logs the cause. With onChange, it reloads only when the files' sizes
// or times changed since the last attempt.
func (r *certReloader) reload(why string, onChange bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stamp := r.fileStamp()
	if onChange && stamp == r.stamp {
		return
	}
	r.stamp = stamp
	tc, err := r.load()
	if err != nil {
		r.log.Error("tls: reload failed: still serving the previous certificate; fix the files, then send SIGHUP or write them again", "why", why, "err", err)
		return
	}
	r.cur.Store(tc)
	leaf := tc.Certificates[0].Leaf
	r.log.Info("tls: certificates reloaded", "why", why, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	for _, f := range r.hooks {
		f(tc.ClientCAs)
	}
}

// watch reloads on SIGHUP and when the files change, until the returned
// function is called. SIGHUP is caught from the moment watch returns.
func (r *certReloader) watch() (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(tlsPollInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-hup:
				r.reload("SIGHUP", false)
			case <-tick.C:
				r.reload("the files changed", true)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-stopped
	}
}

// clientTLS holds --cacert, --cert and --key of the commands that talk to a
// server.
type clientTLS struct {
	cacert, cert, key string
}

// addClientTLSFlags adds --cacert, --cert and --key.
func addClientTLSFlags(f *pflag.FlagSet, t *clientTLS) {
	f.StringVar(&t.cacert, "cacert", "", "PEM `file` of the CA that signed the server's certificate, for https:// (default $SPENT_CACERT, else the system's roots)")
	f.StringVar(&t.cert, "cert", "", "PEM `file` of the client certificate, for a server with a client CA (default $SPENT_CERT)")
	f.StringVar(&t.key, "key", "", "PEM `file` of the client certificate's private key (default $SPENT_KEY)")
}

// errNoClientCert is the handshake error of a client without a certificate
// when the server asks for one. Without it the server's refusal would
// surface as a broken pipe, or as HTTP/2 failing to start.
var errNoClientCert = errors.New("the server asks for a client certificate and none is given: pass --cert and --key (or set SPENT_CERT and SPENT_KEY)")

// config returns the TLS configuration the flags, else SPENT_CACERT,
// SPENT_CERT and SPENT_KEY through getenv, describe.
func (t clientTLS) config(getenv func(string) string) (*tls.Config, error) {
	or := func(v, env string) string {
		if v == "" {
			v = getenv(env)
		}
		return v
	}
	ca, cert, key := or(t.cacert, "SPENT_CACERT"), or(t.cert, "SPENT_CERT"), or(t.key, "SPENT_KEY")
	tc, err := sphttp.TLSClientConfig(ca, cert, key)
	if err != nil {
		return nil, usagef("--cacert, --cert, --key: %w", err)
	}
	if len(tc.Certificates) == 0 {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return nil, errNoClientCert
		}
	}
	return tc, nil
}

// httpClient returns an HTTP client with the flags' TLS configuration and
// the timeout (0: none).
func (t clientTLS) httpClient(getenv func(string) string, timeout time.Duration) (*http.Client, error) {
	tc, err := t.config(getenv)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Timeout: timeout, Transport: tr}, nil
}

// brokenService is the service of client flags that cannot work (a TLS file
// that does not load): every call returns the error.
type brokenService struct{ err error }

var _ spent.Service = brokenService{}

func (b brokenService) Claim(context.Context, spent.Claim) (spent.Answer, error) {
	return spent.Answer{}, b.err
}

func (b brokenService) ClaimBatch(context.Context, []spent.Claim) ([]spent.Answer, error) {
	return nil, b.err
}

func (b brokenService) Complete(context.Context, spent.Completion) (spent.Record, error) {
	return spent.Record{}, b.err
}

func (b brokenService) Release(context.Context, spent.Release) error { return b.err }

func (b brokenService) Get(context.Context, string, string) (spent.Record, error) {
	return spent.Record{}, b.err
}

func (b brokenService) Unknown(context.Context, string, int) ([]spent.Record, error) {
	return nil, b.err
}
