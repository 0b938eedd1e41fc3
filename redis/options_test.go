package redis_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/redis"
)

func TestParseURL(t *testing.T) {
	def := redis.DefaultOptions()
	with := func(f func(o *redis.Options)) redis.Options {
		o := redis.DefaultOptions()
		f(&o)
		return o
	}
	cases := []struct {
		dsn  string
		want redis.Options
	}{
		{"redis://127.0.0.1:6380", with(func(o *redis.Options) { o.Addrs = []string{"127.0.0.1:6380"} })},
		{"redis://db.internal", with(func(o *redis.Options) { o.Addrs = []string{"db.internal:6379"} })},
		{"redis://[::1]:7000/3", with(func(o *redis.Options) { o.Addrs = []string{"[::1]:7000"}; o.DB = 3 })},
		{"redis://:s%40cret@h:1/", with(func(o *redis.Options) { o.Addrs = []string{"h:1"}; o.Password = "s@cret" })},
		{"redis://spent:pw@h:1", with(func(o *redis.Options) { o.Addrs = []string{"h:1"}; o.Username = "spent"; o.Password = "pw" })},
		{"redis://h:1?allow_non_durable=true&wait_replicas=2&wait_timeout=250ms&prefix=app1:&auto_pipeline=false&pool_size=8&dial_timeout=1s&read_timeout=3s&write_timeout=2s",
			with(func(o *redis.Options) {
				o.Addrs = []string{"h:1"}
				o.AutoPipeline = false
				o.AllowNonDurable = true
				o.WaitReplicas = 2
				o.WaitTimeout = 250 * time.Millisecond
				o.Prefix = "app1:"
				o.PoolSize = 8
				o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, 3*time.Second, 2*time.Second
			})},
		{"redis-cluster://a:7000,b:7001,c", with(func(o *redis.Options) {
			o.Addrs = []string{"a:7000", "b:7001", "c:6379"}
			o.Cluster = true
		})},
		{"redis-cluster://u:p@a:7000,b:7001?wait_replicas=1", with(func(o *redis.Options) {
			o.Addrs = []string{"a:7000", "b:7001"}
			o.Cluster = true
			o.Username, o.Password = "u", "p"
			o.WaitReplicas = 1
		})},
	}
	for _, tc := range cases {
		got, err := redis.ParseURL(tc.dsn)
		if err != nil {
			t.Errorf("ParseURL(%q): got error %v, want none", tc.dsn, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURL(%q):\ngot  %+v\nwant %+v", tc.dsn, got, tc.want)
		}
	}
	if !reflect.DeepEqual(redis.DefaultOptions(), def) {
		t.Fatal("ParseURL changed DefaultOptions")
	}

	for _, dsn := range []string{"rediss://h:1", "rediss-cluster://a:1,b:2"} {
		got, err := redis.ParseURL(dsn)
		if err != nil || got.TLS == nil {
			t.Errorf("ParseURL(%q): got TLS %v, %v, want a TLS config", dsn, got.TLS, err)
		}
	}

	bad := []struct{ dsn, want string }{
		{"127.0.0.1:6379", "want redis://"},
		{"postgres://h", "scheme"},
		{"redis://a:1,b:2", "2 addresses for a single server"},
		{"redis-cluster://a:1,b:2/1", "only database 0"},
		{"redis://h:1/x", "database"},
		{"redis://h:1?wait_replica=1", `unknown DSN parameter "wait_replica"`},
		{"redis://h:1?allow_non_durable=maybe", "allow_non_durable"},
		{"redis://h:1?wait_replicas=-1", "must not be negative"},
		{"redis://h:1?wait_replicas=1&wait_timeout=10s", "shorter than the read timeout"},
		{"redis://h:1?prefix=a{b}", "must not contain"},
		{"redis://h:1?wait_timeout=soon", "wait_timeout"},
		{"redis://u:sekrit@a:1,b:2", "addresses"},
		{"redis-cluster://a:1,,b:2", "empty host"},
	}
	for _, tc := range bad {
		_, err := redis.ParseURL(tc.dsn)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseURL(%q): got %v, want an error saying %q", tc.dsn, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "sekrit") {
			t.Errorf("ParseURL(%q): the error %q shows the password", tc.dsn, err)
		}
	}
}

func TestValidate(t *testing.T) {
	o := redis.DefaultOptions()
	if err := o.Validate(); err != nil {
		t.Fatalf("DefaultOptions().Validate(): %v", err)
	}
	o.Addrs = nil
	if err := o.Validate(); err == nil {
		t.Fatal("Validate without addresses: got nil, want an error")
	}
	o = redis.DefaultOptions()
	o.Addrs = []string{"no-port"}
	if err := o.Validate(); err == nil {
		t.Fatal("Validate of an address without port: got nil, want an error")
	}
}
