// Package tlstest makes certificate authorities and certificates for tests:
// NewCA, then CA.Server for a server on the loopback addresses and CA.Client
// for a client, each written to PEM files with WriteFiles when a program
// reads them from disk.
//
// For tests only: keys are P-256, certificates live for a day, nothing is
// kept secret.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that signs the certificates of a test.
type CA struct {
	// Cert is the CA's self-signed certificate.
	Cert *x509.Certificate
	// PEM is Cert in PEM, as a --cacert or tls_client_ca file holds it.
	PEM []byte
	key *ecdsa.PrivateKey
}

// Pair is a certificate with its private key.
type Pair struct {
	// TLS is the pair as crypto/tls uses it.
	TLS tls.Certificate
	// Cert is the parsed leaf certificate.
	Cert *x509.Certificate
	// CertPEM and KeyPEM are the files' contents.
	CertPEM, KeyPEM []byte
}

// NewCA returns a new self-signed CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{SerialNumber: serial(tb), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool returns a pool that holds the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Server returns a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Server(tb testing.TB) Pair {
	tb.Helper()
	return ca.issue(tb, &x509.Certificate{Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
}

// Client returns a client certificate whose subject is the common name cn.
func (ca *CA) Client(tb testing.TB, cn string) Pair {
	tb.Helper()
	return ca.issue(tb, &x509.Certificate{Subject: pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

func (ca *CA) issue(tb testing.TB, tmpl *x509.Certificate) Pair {
	tb.Helper()
	key := newKey(tb)
	tmpl.SerialNumber = serial(tb)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return Pair{
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}
}

// WriteFiles writes p to dir/name.crt and dir/name.key (mode 0600) and
// returns their paths.
func (p Pair) WriteFiles(tb testing.TB, dir, name string) (certFile, keyFile string) {
	tb.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	for path, b := range map[string][]byte{certFile: p.CertPEM, keyFile: p.KeyPEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return certFile, keyFile
}

// WriteFile writes the CA's certificate to dir/name.crt and returns its
// path.
func (ca *CA) WriteFile(tb testing.TB, dir, name string) string {
	tb.Helper()
	path := filepath.Join(dir, name+".crt")
	if err := os.WriteFile(path, ca.PEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// serial returns a random 128-bit serial number, so that two certificates
// of one test never share one.
func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
