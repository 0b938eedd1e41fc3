// Package tlsfiles reads TLS configuration from PEM files: CertPool for a
// file of CA certificates, ClientConfig for a client's whole configuration.
// Its errors name the file at fault; callers prefix them with their own
// package or flag.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// CertPool returns a pool of the CA certificates in the PEM file path. A
// file without a PEM certificate is an error.
func CertPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA certificates: no PEM certificate in %s", path)
	}
	return pool, nil
}

// ClientConfig returns the TLS configuration of a client that trusts the
// CA certificates in caFile (empty: the system's roots) and presents the
// certificate and key in certFile and keyFile (both empty: none). TLS 1.2
// is the oldest version it speaks.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		var err error
		if tc.RootCAs, err = CertPool(caFile); err != nil {
			return nil, err
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs its certificate file and its key file: give both, or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
