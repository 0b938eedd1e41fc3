package etcd_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/internal/etcdtest"
)

func TestParseURL(t *testing.T) {
	def := etcd.DefaultOptions()
	with := func(f func(o *etcd.Options)) etcd.Options {
		o := def
		o.Endpoints = []string{"h1:2379", "h2:2379", "h3:2379"}
		f(&o)
		return o
	}
	cases := []struct {
		dsn  string
		want etcd.Options
	}{
		{"etcd://h1:2379,h2:2379,h3:2379", with(func(o *etcd.Options) {})},
		{"etcd://h1:2379,h2:2379,h3:2379/", with(func(o *etcd.Options) { o.Prefix = "/" })},
		{"etcd://h1:2379,h2:2379,h3:2379/ledger-a", with(func(o *etcd.Options) { o.Prefix = "/ledger-a/" })},
		{"etcd://h1:2379,h2:2379,h3:2379/apps/spent/", with(func(o *etcd.Options) { o.Prefix = "/apps/spent/" })},
		{"etcd://alice:s%40cret@h1:2379,h2:2379,h3:2379", with(func(o *etcd.Options) { o.Username, o.Password = "alice", "s@cret" })},
		{"etcd://h1:2379,h2:2379,h3:2379?dial_timeout=2s&request_timeout=0&lease_bucket=5m&max_txn_ops=256&max_txn_bytes=65536&allow_non_durable=true",
			with(func(o *etcd.Options) {
				o.DialTimeout, o.RequestTimeout, o.LeaseBucket = 2*time.Second, 0, 5*time.Minute
				o.MaxTxnOps, o.MaxTxnBytes, o.AllowNonDurable = 256, 65536, true
			})},
		{"etcd://[::1]:2379", etcd.Options{Endpoints: []string{"[::1]:2379"}, Prefix: def.Prefix, DialTimeout: def.DialTimeout,
			RequestTimeout: def.RequestTimeout, LeaseBucket: def.LeaseBucket, MaxTxnOps: def.MaxTxnOps, MaxTxnBytes: def.MaxTxnBytes}},
	}
	for _, tc := range cases {
		got, err := etcd.ParseURL(tc.dsn)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.dsn, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURL(%q):\ngot  %+v\nwant %+v", tc.dsn, got, tc.want)
		}
	}

	tlsOpts, err := etcd.ParseURL("etcds://h1:2379?server_name=etcd.example")
	if err != nil {
		t.Fatal(err)
	}
	if tlsOpts.TLS == nil || tlsOpts.TLS.ServerName != "etcd.example" {
		t.Errorf("etcds: got TLS %+v, want a TLS config for etcd.example", tlsOpts.TLS)
	}

	for _, bad := range []string{
		"", "etcd:/h1:2379", "redis://h1:2379", "etcd://", "etcd:///prefix", "etcd://h1", "etcd://h1:2379,", "etcd://h1:2379,,h2:1",
		"etcd://h1:2379?lease_bucket=1500ms", "etcd://h1:2379?lease_bucket=0s", "etcd://h1:2379?max_txn_ops=3",
		"etcd://h1:2379?dial_timeout=0", "etcd://h1:2379?request_timeout=-1s", "etcd://h1:2379?unknown=1",
		"etcd://h1:2379?allow_non_durable=maybe", "etcd://alice@h1:2379", "etcd://h1:2379?ca=/x.pem",
		"etcds://h1:2379?ca=/nonexistent.pem", "etcds://h1:2379?cert=/c.pem", "etcd://h1:2379/%zz",
	} {
		if _, err := etcd.ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q): got no error, want one", bad)
		} else if !strings.HasPrefix(err.Error(), "etcd: ") {
			t.Errorf("ParseURL(%q): error %q does not start with the package name", bad, err)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := etcd.DefaultOptions()
	ok.Endpoints = []string{"127.0.0.1:2379"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate of the defaults with an endpoint: %v", err)
	}
	for name, f := range map[string]func(o *etcd.Options){
		"NoEndpoints":       func(o *etcd.Options) { o.Endpoints = nil },
		"EmptyEndpoint":     func(o *etcd.Options) { o.Endpoints = []string{""} },
		"EmptyPrefix":       func(o *etcd.Options) { o.Prefix = "" },
		"ZeroDialTimeout":   func(o *etcd.Options) { o.DialTimeout = 0 },
		"SubSecondBucket":   func(o *etcd.Options) { o.LeaseBucket = 500 * time.Millisecond },
		"FractionalBucket":  func(o *etcd.Options) { o.LeaseBucket = 1500 * time.Millisecond },
		"TooFewTxnOps":      func(o *etcd.Options) { o.MaxTxnOps = 3 },
		"TinyTxnBytes":      func(o *etcd.Options) { o.MaxTxnBytes = 100 },
		"UserNoPassword":    func(o *etcd.Options) { o.Username = "alice" },
		"NegativeRequestTO": func(o *etcd.Options) { o.RequestTimeout = -time.Second },
	} {
		o := ok
		f(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: got no error, want one", name)
		}
		if _, err := etcd.Open(context.Background(), o); err == nil {
			t.Errorf("%s: Open got no error, want one", name)
		}
	}
}

// TestAuth runs the store as a user of a cluster with authentication on,
// opened from a DSN that carries the credentials.
func TestAuth(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	ctx := context.Background()
	if _, err := cli.UserAdd(ctx, "root", "root-password"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.RoleAdd(ctx, "spent"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.RoleGrantPermission(ctx, "spent", "/spent/", "/spent0", clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserAdd(ctx, "spent", "p@ss word"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "spent", "spent"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	ep := c.Endpoints()[0]
	open := func(dsn string) (*etcd.Store, error) {
		o, err := etcd.ParseURL(dsn)
		if err != nil {
			t.Fatalf("ParseURL(%q): %v", dsn, err)
		}
		o.DialTimeout, o.Logger = 3*time.Second, quietLogger()
		return etcd.Open(ctx, o)
	}
	for _, dsn := range []string{"etcd://" + ep, "etcd://spent:wrong@" + ep, "etcd://spent:p%40ss%20word@" + ep + "/elsewhere"} {
		s, err := open(dsn)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q): got no error, want one", dsn)
		} else if errors.Is(err, etcd.ErrUnhealthy) {
			t.Errorf("Open(%q): got %v, want an authentication error, not ErrUnhealthy", dsn, err)
		}
	}
	s, err := open("etcd://spent:p%40ss%20word@" + ep)
	if err != nil {
		t.Fatalf("Open with the right credentials: %v", err)
	}
	defer s.Close()
	op := completeOp("authenticated", 1, t0, t0.Add(time.Hour))
	if res := mustClaim(t, s, op); !res.Inserted {
		t.Fatal("Claim: got not inserted, want inserted")
	}
	if res := mustClaim(t, s, op); res.Inserted {
		t.Fatal("second Claim: got inserted, want the stored record")
	}
}

// TestTLS runs the store over TLS against a member serving a certificate
// from a CA of the test's own, opened from an etcds:// DSN that names the CA.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestPKI(t, dir)
	c := etcdtest.StartWith(t, 1, etcdtest.Options{CertFile: certFile, KeyFile: keyFile})
	ep := c.Endpoints()[0]
	ctx := context.Background()
	open := func(dsn string) (*etcd.Store, error) {
		o, err := etcd.ParseURL(dsn)
		if err != nil {
			t.Fatalf("ParseURL(%q): %v", dsn, err)
		}
		o.DialTimeout, o.Logger = 2*time.Second, quietLogger()
		return etcd.Open(ctx, o)
	}
	// Plaintext, and TLS trusting only the system's CAs, are refused.
	for _, dsn := range []string{"etcd://" + ep, "etcds://" + ep} {
		if s, err := open(dsn); err == nil {
			s.Close()
			t.Errorf("Open(%q): got no error, want one", dsn)
		}
	}
	s, err := open("etcds://" + ep + "/tls-test?ca=" + url.QueryEscape(caFile))
	if err != nil {
		t.Fatalf("Open over TLS with the test CA: %v", err)
	}
	defer s.Close()
	op := completeOp("over-tls", 1, t0, t0.Add(time.Hour))
	if res := mustClaim(t, s, op); !res.Inserted {
		t.Fatal("Claim over TLS: got not inserted, want inserted")
	}
}

// writeTestPKI writes a CA and a certificate for 127.0.0.1 signed by it, as
// PEM files in dir.
func writeTestPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "spent test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "etcd member"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("member.pem", "CERTIFICATE", der), write("member-key.pem", "EC PRIVATE KEY", keyDER)
}
