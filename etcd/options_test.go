package etcd_test

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent/etcd"
	"github.com/spentledger/spent/internal/etcdtest"
	"github.com/spentledger/spent/internal/tlstest"
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

// TestTLSAndAuth runs the store over TLS against a member serving a
// certificate from a CA of the test's own, opened from an etcds:// DSN that
// names the CA; then, with authentication turned on, as a user whose
// credentials the DSN carries.
func TestTLSAndAuth(t *testing.T) {
	caFile, certFile, keyFile := writeTestPKI(t, t.TempDir())
	c := etcdtest.StartWith(t, 1, etcdtest.Options{CertFile: certFile, KeyFile: keyFile})
	ep := c.Endpoints()[0]
	ctx := context.Background()
	ca := "?ca=" + url.QueryEscape(caFile)
	open := func(dsn string) (*etcd.Store, error) {
		o, err := etcd.ParseURL(dsn)
		if err != nil {
			t.Fatalf("ParseURL(%q): %v", dsn, err)
		}
		o.DialTimeout, o.Logger = time.Second, quietLogger()
		return etcd.Open(ctx, o)
	}
	claimTwice := func(s *etcd.Store, key string) {
		t.Helper()
		op := completeOp(key, 1, t0, t0.Add(time.Hour))
		if res := mustClaim(t, s, op); !res.Inserted {
			t.Fatalf("Claim(%s): got not inserted, want inserted", key)
		}
		if res := mustClaim(t, s, op); res.Inserted {
			t.Fatalf("second Claim(%s): got inserted, want the stored record", key)
		}
	}

	// Plaintext, and TLS trusting only the system's CAs, are refused.
	for _, dsn := range []string{"etcd://" + ep, "etcds://" + ep} {
		if s, err := open(dsn); err == nil {
			s.Close()
			t.Errorf("Open(%q): got no error, want one", dsn)
		}
	}
	s, err := open("etcds://" + ep + "/spent/" + ca)
	if err != nil {
		t.Fatalf("Open over TLS with the test CA: %v", err)
	}
	claimTwice(s, "over-tls")
	s.Close()

	cli := c.Client(t)
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-password"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "spent"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "spent", "/spent/", "/spent0", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "spent", "p@ss word"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "spent", "spent"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("setting up auth, step %d: %v", i, err)
		}
	}
	for _, dsn := range []string{
		"etcds://" + ep + ca,                                    // no credentials
		"etcds://spent:wrong@" + ep + ca,                        // wrong password
		"etcds://spent:p%40ss%20word@" + ep + "/elsewhere" + ca, // a prefix the user may not write
	} {
		s, err := open(dsn)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q): got no error, want one", dsn)
		} else if errors.Is(err, etcd.ErrUnhealthy) {
			t.Errorf("Open(%q): got %v, want an authentication error, not ErrUnhealthy", dsn, err)
		}
	}
	s, err = open("etcds://spent:p%40ss%20word@" + ep + "/spent/" + ca)
	if err != nil {
		t.Fatalf("Open with the right credentials: %v", err)
	}
	defer s.Close()
	claimTwice(s, "authenticated")
}

// writeTestPKI writes a CA and a certificate for 127.0.0.1 signed by it, as
// PEM files in dir.
func writeTestPKI(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	ca := tlstest.NewCA(t, "spent test CA")
	certFile, keyFile = ca.Server(t).WriteFiles(t, dir, "member")
	return ca.WriteFile(t, dir, "ca"), certFile, keyFile
}
