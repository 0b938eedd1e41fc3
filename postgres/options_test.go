package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/postgres"
)

func TestParseURL(t *testing.T) {
	def := postgres.DefaultOptions()
	cases := []struct {
		name string
		dsn  string
		want postgres.Options // ConnString compared separately
		conn string
	}{
		{
			name: "Defaults",
			dsn:  "postgres://spent@db:5432/ledger?sslmode=disable",
			want: def,
			conn: "postgres://spent@db:5432/ledger?sslmode=disable",
		},
		{
			name: "PostgresqlScheme",
			dsn:  "postgresql://db/ledger",
			want: def,
			conn: "postgresql://db/ledger",
		},
		{
			name: "SpentParametersAreRemoved",
			dsn:  "postgres://u:pw@db/ledger?schema=tickets&allow_non_durable=true&sslmode=require&max_retries=9&retry_backoff=20ms&partition_period=6h",
			want: func() postgres.Options {
				o := def
				o.Schema, o.AllowNonDurable, o.MaxRetries, o.RetryBackoff = "tickets", true, 9, 20*time.Millisecond
				o.PartitionPeriod = 6 * time.Hour
				return o
			}(),
			conn: "postgres://u:pw@db/ledger?sslmode=require",
		},
		{
			name: "PoolSizeFromPgxParameters",
			dsn:  "postgres://db/ledger?pool_max_conns=3",
			want: func() postgres.Options {
				o := def
				o.MaxConns, o.MinConns = 3, 3
				return o
			}(),
			conn: "postgres://db/ledger?pool_max_conns=3",
		},
		{
			name: "PoolMinConns",
			dsn:  "postgres://db/ledger?pool_max_conns=64&pool_min_conns=10",
			want: func() postgres.Options {
				o := def
				o.MaxConns, o.MinConns = 64, 10
				return o
			}(),
			conn: "postgres://db/ledger?pool_max_conns=64&pool_min_conns=10",
		},
		{
			name: "LastValueWins",
			dsn:  "postgres://db/ledger?schema=a&schema=b",
			want: func() postgres.Options {
				o := def
				o.Schema = "b"
				return o
			}(),
			conn: "postgres://db/ledger",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := postgres.ParseURL(tc.dsn)
			if err != nil {
				t.Fatalf("ParseURL(%q): got error %v, want none", tc.dsn, err)
			}
			if got.ConnString != tc.conn {
				t.Errorf("ConnString: got %q, want %q", got.ConnString, tc.conn)
			}
			got.ConnString, tc.want.ConnString = "", ""
			if got != tc.want {
				t.Errorf("options: got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseURLRefuses(t *testing.T) {
	cases := map[string]struct{ dsn, want string }{
		"OtherScheme":        {"mysql://db/ledger", "scheme"},
		"BadBool":            {"postgres://db/x?allow_non_durable=maybe", "allow_non_durable"},
		"BadRetries":         {"postgres://db/x?max_retries=many", "max_retries"},
		"TooManyRetries":     {"postgres://db/x?max_retries=1000", "max retries"},
		"BadBackoff":         {"postgres://db/x?retry_backoff=soon", "retry_backoff"},
		"BadSchema":          {"postgres://db/x?schema=a%22b", "schema"},
		"BadPeriod":          {"postgres://db/x?partition_period=daily", "partition_period"},
		"ShortPeriod":        {"postgres://db/x?partition_period=30s", "partition period"},
		"Semicolon":          {"postgres://db/x?schema=a;drop", "semicolon"},
		"SchemaWithDigit":    {"postgres://db/x?schema=1abc", "schema"},
		"BadPgxParameter":    {"postgres://db/x?pool_max_conns=lots", "pool_max_conns"},
		"NotAURL":            {"postgres://u:secret@db:port/x", "not a valid URL"},
		"PasswordNotInError": {"postgres://u:secret@db/x?pool_max_conns=lots", "xxxxx"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := postgres.ParseURL(tc.dsn)
			if err == nil {
				t.Fatalf("ParseURL(%q): got no error, want one mentioning %q", tc.dsn, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseURL(%q): got %q, want it to mention %q", tc.dsn, err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("ParseURL(%q): error %q shows the password", tc.dsn, err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := postgres.DefaultOptions()
	ok.ConnString = "postgres://db/x"
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults with a connection string: got %v, want nil", err)
	}
	cases := map[string]func(o *postgres.Options){
		"NoConnString":      func(o *postgres.Options) { o.ConnString = "" },
		"EmptySchema":       func(o *postgres.Options) { o.Schema = "" },
		"LongSchema":        func(o *postgres.Options) { o.Schema = strings.Repeat("s", 64) },
		"QuotedSchema":      func(o *postgres.Options) { o.Schema = `a"b` },
		"NegativeMaxConns":  func(o *postgres.Options) { o.MaxConns = -1 },
		"MinAboveMax":       func(o *postgres.Options) { o.MinConns = ok.MaxConns + 1 },
		"NegativeRetries":   func(o *postgres.Options) { o.MaxRetries = -1 },
		"NegativeBackoff":   func(o *postgres.Options) { o.RetryBackoff = -time.Millisecond },
		"HugeBackoff":       func(o *postgres.Options) { o.RetryBackoff = time.Minute },
		"NegativeMinConns":  func(o *postgres.Options) { o.MinConns = -1 },
		"SchemaWithHyphens": func(o *postgres.Options) { o.Schema = "spent-ledger" },
		"NoPeriod":          func(o *postgres.Options) { o.PartitionPeriod = 0 },
		"ShortPeriod":       func(o *postgres.Options) { o.PartitionPeriod = 59 * time.Second },
		"LongPeriod":        func(o *postgres.Options) { o.PartitionPeriod = 367 * 24 * time.Hour },
		"FractionalPeriod":  func(o *postgres.Options) { o.PartitionPeriod = 90*time.Minute + time.Millisecond },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			o := ok
			mutate(&o)
			if err := o.Validate(); err == nil {
				t.Fatalf("Validate(%+v): got nil, want an error", o)
			}
		})
	}
	long := ok
	long.Schema = strings.Repeat("s", 63)
	if err := long.Validate(); err != nil {
		t.Fatalf("63-byte schema: got %v, want nil", err)
	}
}
