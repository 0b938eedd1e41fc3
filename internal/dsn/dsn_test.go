package dsn_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/spentledger/spent/internal/dsn"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     dsn.DSN
	}{
		{"OneHost", "redis://h:6379", dsn.DSN{Scheme: "redis", Hosts: []string{"h:6379"}}},
		{"HostList", "etcd://h1:2379,h2:2379,h3", dsn.DSN{Scheme: "etcd", Hosts: []string{"h1:2379", "h2:2379", "h3"}}},
		{"EmptyEntryKept", "redis-cluster://a:1,,b:2", dsn.DSN{Scheme: "redis-cluster", Hosts: []string{"a:1", "", "b:2"}}},
		{"NoHosts", "etcd:///prefix", dsn.DSN{Scheme: "etcd", Path: "prefix", HasPath: true}},
		{"IPv6", "redis://[::1]:7000,[fe80::1]/3", dsn.DSN{Scheme: "redis", Hosts: []string{"[::1]:7000", "[fe80::1]"}, Path: "3", HasPath: true}},
		{"EmptyPath", "etcd://h:1/", dsn.DSN{Scheme: "etcd", Hosts: []string{"h:1"}, HasPath: true}},
		{"PathStaysEscaped", "etcd://h:1/a%2Fb/c", dsn.DSN{Scheme: "etcd", Hosts: []string{"h:1"}, Path: "a%2Fb/c", HasPath: true}},
		{"Query", "redis://h:1/2?prefix=a:&pool_size=8", dsn.DSN{Scheme: "redis", Hosts: []string{"h:1"}, Path: "2", HasPath: true, RawQuery: "prefix=a:&pool_size=8"}},
		{"UserAndPassword", "etcd://alice:s%40cret@h1:1,h2:2", dsn.DSN{Scheme: "etcd", Username: "alice", Password: "s@cret", Hosts: []string{"h1:1", "h2:2"}}},
		{"PasswordOnly", "redis://:pw@h:1", dsn.DSN{Scheme: "redis", Password: "pw", Hosts: []string{"h:1"}}},
		{"UserOnly", "redis://alice@h:1", dsn.DSN{Scheme: "redis", Username: "alice", Hosts: []string{"h:1"}}},
		{"PasswordWithColonAndAt", "redis://u:a:b@c@h:1", dsn.DSN{Scheme: "redis", Username: "u", Password: "a:b@c", Hosts: []string{"h:1"}}},
		{"PasswordWithSpace", "etcd://u:p%20w@h:1", dsn.DSN{Scheme: "etcd", Username: "u", Password: "p w", Hosts: []string{"h:1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dsn.Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%q): got error %v, want none", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse(%q):\ngot  %+v\nwant %+v", tc.in, got, tc.want)
			}
		})
	}

	t.Run("NoScheme", func(t *testing.T) {
		for _, in := range []string{"", "h:6379", "redis:/h:1", "u:pw@h:1"} {
			if _, err := dsn.Parse(in); !errors.Is(err, dsn.ErrNoScheme) {
				t.Errorf("Parse(%q): got error %v, want ErrNoScheme", in, err)
			}
		}
	})
	t.Run("BadEscapes", func(t *testing.T) {
		_, err := dsn.Parse("redis://a%zz:pw@h:1")
		if err == nil || !strings.HasPrefix(err.Error(), "user: ") {
			t.Errorf("bad escape in the user: got %v, want an error starting with %q", err, "user: ")
		}
		_, err = dsn.Parse("redis://u:sec%zzret@h:1")
		if err == nil || err.Error() != "password: invalid escape" {
			t.Errorf("bad escape in the password: got %v, want %q", err, "password: invalid escape")
		}
		if err != nil && strings.Contains(err.Error(), "%zz") {
			t.Errorf("bad escape in the password: the error %q quotes the password", err)
		}
	})
}

func TestHostPort(t *testing.T) {
	for _, tc := range []struct{ in, def, want string }{
		{"h:1", "6379", "h:1"},
		{"h", "6379", "h:6379"},
		{"db.internal:65535", "", "db.internal:65535"},
		{"10.0.0.1", "2379", "10.0.0.1:2379"},
		{"[::1]:7000", "", "[::1]:7000"},
		{"[::1]", "6379", "[::1]:6379"},
		{"::1", "6379", "[::1]:6379"},
		{"[fe80::1%eth0]:1", "", "[fe80::1%eth0]:1"},
	} {
		got, err := dsn.HostPort(tc.in, tc.def)
		if err != nil || got != tc.want {
			t.Errorf("HostPort(%q, %q): got %q, %v; want %q", tc.in, tc.def, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, def, want string }{
		{"", "6379", "empty host"},
		{"h", "", "no port"},
		{"[::1]", "", "no port"},
		{"h:", "6379", "no port"},
		{"h:0", "", "want a number from 1 to 65535"},
		{"h:65536", "", "want a number from 1 to 65535"},
		{"h:http", "", "want a number from 1 to 65535"},
		{"a:b:c", "6379", "IPv6 address in brackets"},
		{"[h:1", "6379", "IPv6 address in brackets"},
		{":1", "", "want host:port"},
		{"h x:1", "", "want host:port"},
	} {
		_, err := dsn.HostPort(tc.in, tc.def)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("HostPort(%q, %q): got error %v, want one saying %q", tc.in, tc.def, err, tc.want)
		}
	}
	if _, err := dsn.HostPort("", ""); !errors.Is(err, dsn.ErrEmptyHost) {
		t.Errorf("HostPort of an empty host: got %v, want ErrEmptyHost", err)
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"NoUserinfo", "redis://h:1/2?prefix=a", "redis://h:1/2?prefix=a"},
		{"UserOnly", "etcd://alice@h:1", "etcd://alice@h:1"},
		{"UserAndPassword", "postgres://u:secret@h:5/db?sslmode=disable", "postgres://u:xxxxx@h:5/db?sslmode=disable"},
		{"PasswordOnly", "redis://:secret@h:1", "redis://:xxxxx@h:1"},
		{"HostList", "redis-cluster://u:secret@a:1,b:2?wait_replicas=1", "redis-cluster://u:xxxxx@a:1,b:2?wait_replicas=1"},
		{"IPv6", "etcd://u:secret@[::1]:2379,[::2]:2379/p", "etcd://u:xxxxx@[::1]:2379,[::2]:2379/p"},
		{"EscapedPassword", "etcd://u:s%40cret@h:1", "etcd://u:xxxxx@h:1"},
		{"PasswordWithAt", "redis://u:se@cret@h:1", "redis://u:xxxxx@h:1"},
		{"PasswordWithSlash", "redis://u:se/cret@h:1", "redis://u:xxxxx@h:1"},
		{"PasswordWithQuestionMark", "redis://u:se?cret@h:1", "redis://u:xxxxx@h:1"},
		{"QueryPassword", "postgres://h/db?user=u&password=secret&sslmode=require", "postgres://h/db?user=u&password=xxxxx&sslmode=require"},
		{"QuerySSLPassword", "postgres://h/db?sslpassword=secret", "postgres://h/db?sslpassword=xxxxx"},
		{"QueryPasswordAnyCase", "postgres://h/db?PassWord=secret", "postgres://h/db?PassWord=xxxxx"},
		{"QueryPasswordEscapedName", "postgres://h/db?pass%77ord=secret", "postgres://h/db?pass%77ord=xxxxx"},
		{"QueryPasswordNoValue", "postgres://h/db?password", "postgres://h/db?password=xxxxx"},
		{"BothForms", "postgres://u:one@h/db?password=two", "postgres://u:xxxxx@h/db?password=xxxxx"},
		{"NoSchemeNoSecret", "h:6379", "h:6379"},
		{"NoSchemeUserinfo", "u:secret@h:6379", "(DSN hidden: it may hold a password)"},
		{"KeyValueDSN", "host=h password=secret", "(DSN hidden: it may hold a password)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := dsn.Redact(tc.in); got != tc.want {
				t.Fatalf("Redact(%q): got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestRedactHidesWhatParseReads checks the package's guarantee on strings
// built to confuse the two: neither the password Parse reads nor its escaped
// form survives Redact.
func TestRedactHidesWhatParseReads(t *testing.T) {
	for _, tc := range []struct{ in, raw string }{
		{"redis://u:secret@h:1", "secret"},
		{"redis://u:sec@ret@h:1/2", "sec@ret"},
		{"etcd://u:secret@h:1/pre@fix", "secret"},
		{"etcds://u:secret@h:1?ca=/etc/a@b.pem", "secret"},
		{"redis://u:sec%2Fret@h:1", "sec%2Fret"},
		{"redis-cluster://:secret@a:1,b:2", "secret"},
		{"redis://u:sec:ret@h:1", "sec:ret"},
	} {
		d, err := dsn.Parse(tc.in)
		if err != nil || d.Password == "" {
			t.Fatalf("Parse(%q): got password %q, %v; want one", tc.in, d.Password, err)
		}
		got := dsn.Redact(tc.in)
		for _, secret := range []string{d.Password, tc.raw} {
			if strings.Contains(got, secret) {
				t.Errorf("Redact(%q) = %q: still holds %q", tc.in, got, secret)
			}
		}
	}
}
