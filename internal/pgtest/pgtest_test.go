package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/spentledger/spent/internal/pgtest"
)

func query(tb testing.TB, dsn, sql string) string {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return s
}

func exec(tb testing.TB, dsn, sql string) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

func TestClusterKillRestartKeepsCommits(t *testing.T) {
	c := pgtest.Start(t, pgtest.Options{})
	if got := query(t, c.DSN(), "SHOW synchronous_commit"); got != "on" {
		t.Fatalf("synchronous_commit: got %q, want on", got)
	}
	if got := query(t, c.DSN(), "SHOW fsync"); got != "on" {
		t.Fatalf("fsync: got %q, want on", got)
	}
	exec(t, c.DSN(), "CREATE TABLE kept AS SELECT 'before the kill' AS v")
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if conn, err := pgx.Connect(ctx, c.DSN()+"&connect_timeout=2"); err == nil {
		conn.Close(ctx)
		t.Fatalf("connect after Kill: got a connection, want an error")
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := query(t, c.DSN(), "SELECT v FROM kept"); got != "before the kill" {
		t.Fatalf("after restart: got %q, want the row committed before the kill", got)
	}
	dir := c.DataDir()
	c.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data directory after Close: got %v, want it removed", err)
	}
}

func TestSettingsOverrideDefaults(t *testing.T) {
	c := pgtest.Start(t, pgtest.Options{Settings: map[string]string{"synchronous_commit": "off", "fsync": ""}})
	if got := query(t, c.DSN(), "SHOW synchronous_commit"); got != "off" {
		t.Fatalf("synchronous_commit: got %q, want off", got)
	}
	if got := query(t, c.DSN(), "SELECT source FROM pg_settings WHERE name = 'fsync'"); got == "command line" {
		t.Fatalf("fsync source: got %q, want the default (the setting was dropped)", got)
	}
}

func TestDSNIsSharedWithChildren(t *testing.T) {
	if os.Getenv(pgtest.EnvDSN) != "" {
		t.Skip("this test checks the throwaway cluster; " + pgtest.EnvDSN + " is set")
	}
	dsn := pgtest.DSN(t)
	if got := os.Getenv(pgtest.EnvShared); got != dsn {
		t.Fatalf("%s: got %q, want %q", pgtest.EnvShared, got, dsn)
	}
	if again := pgtest.DSN(t); again != dsn {
		t.Fatalf("second DSN: got %q, want the same server %q", again, dsn)
	}
	query(t, dsn, "SELECT 'ok'")
}
