package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spentledger/spent/internal/pgtest"
	"github.com/spentledger/spent/internal/syncbuf"
	"github.com/spentledger/spent/postgres"
)

// showSetting reads a setting in a new session of dsn.
func showSetting(tb testing.TB, dsn, name string) string {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
		tb.Fatalf("reading %s: %v", name, err)
	}
	return v
}

// TestDurabilityCheck starts a server of its own with synchronous_commit=off
// on its command line and shows that Open refuses it, and accepts it, with a
// warning that says what can be lost, under AllowNonDurable. It then turns
// fsync off with ALTER SYSTEM and shows the same for fsync, and that a store
// already open refuses the new connections it makes after that.
func TestDurabilityCheck(t *testing.T) {
	c := pgtest.Start(t, pgtest.Options{Settings: map[string]string{"synchronous_commit": "off", "fsync": ""}})
	ctx := context.Background()
	open := func(t *testing.T, dsn string, allow bool) (*postgres.Store, string, error) {
		t.Helper()
		o := testOptions(t, dsn, "durability")
		o.AllowNonDurable = allow
		var logs syncbuf.Buffer
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		s, err := postgres.Open(ctx, o)
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, logs.String(), err
	}

	t.Run("RefusesSynchronousCommitOff", func(t *testing.T) {
		_, _, err := open(t, c.DSN(), false)
		if !errors.Is(err, postgres.ErrNonDurable) {
			t.Fatalf("Open with synchronous_commit=off: got %v, want ErrNonDurable", err)
		}
		if !strings.Contains(err.Error(), "synchronous_commit=off") {
			t.Fatalf("error %q: want it to name synchronous_commit=off", err)
		}
	})

	t.Run("AllowNonDurableLogsWhatCanBeLost", func(t *testing.T) {
		s, logs, err := open(t, c.DSN(), true)
		if err != nil {
			t.Fatalf("Open with AllowNonDurable: got %v, want a store", err)
		}
		for _, want := range []string{"level=WARN", "NON-DURABLE", "synchronous_commit=off", "loses the last acknowledged claims"} {
			if !strings.Contains(logs, want) {
				t.Fatalf("log:\n%s\nwant it to contain %q", logs, want)
			}
		}
		if _, err := s.Claim(ctx, completeOp("allowed", 1, t0)); err != nil {
			t.Fatalf("Claim on an allowed non-durable server: %v", err)
		}
	})

	// The session's setting decides: a connection string that turns
	// synchronous_commit on for the session makes this server durable.
	durableSession := withParam(t, c.DSN(), "synchronous_commit", "on")

	t.Run("DurableSessionIsAccepted", func(t *testing.T) {
		_, logs, err := open(t, durableSession, false)
		if err != nil {
			t.Fatalf("Open with synchronous_commit=on for the session: %v", err)
		}
		if strings.Contains(logs, "NON-DURABLE") {
			t.Fatalf("log of a durable open:\n%s\nwant no NON-DURABLE warning", logs)
		}
		if !strings.Contains(logs, "no synchronous standby") {
			t.Fatalf("log:\n%s\nwant the failover caveat (no synchronous standby)", logs)
		}
	})

	t.Run("RefusesFsyncOff", func(t *testing.T) {
		s, _, err := open(t, durableSession, false)
		if err != nil {
			t.Fatalf("Open before fsync is turned off: %v", err)
		}
		execSQL(t, c.DSN(), "ALTER SYSTEM SET fsync = off")
		t.Cleanup(func() {
			execSQL(t, c.DSN(), "ALTER SYSTEM RESET fsync")
			execSQL(t, c.DSN(), "SELECT pg_reload_conf()")
		})
		execSQL(t, c.DSN(), "SELECT pg_reload_conf()")
		deadline := time.Now().Add(10 * time.Second)
		for showSetting(t, c.DSN(), "fsync") != "off" {
			if time.Now().After(deadline) {
				t.Fatal("fsync still on 10s after the reload")
			}
			time.Sleep(20 * time.Millisecond)
		}
		_, _, err = open(t, durableSession, false)
		if !errors.Is(err, postgres.ErrNonDurable) || !strings.Contains(err.Error(), "fsync=off") {
			t.Fatalf("Open with fsync=off: got %v, want ErrNonDurable naming fsync=off", err)
		}
		// The store opened before has its connections; new ones are refused.
		s.Pool().Reset()
		_, err = s.Claim(ctx, completeOp("after-reload", 2, t0))
		if !errors.Is(err, postgres.ErrNonDurable) {
			t.Fatalf("Claim on a new connection after fsync went off: got %v, want ErrNonDurable", err)
		}
		_, logs, err := open(t, durableSession, true)
		if err != nil || !strings.Contains(logs, "fsync=off") {
			t.Fatalf("Open with fsync=off and AllowNonDurable: got %v, log:\n%s\nwant a store and a warning naming fsync=off", err, logs)
		}
	})
}

// TestDurabilityCheckPerSession shows, on the shared durable server, that a
// session setting in the connection string is refused too.
func TestDurabilityCheckPerSession(t *testing.T) {
	dsn := pgtest.DSN(t)
	o := testOptions(t, withParam(t, dsn, "synchronous_commit", "off"), freshSchema(t, dsn))
	_, err := postgres.Open(context.Background(), o)
	if !errors.Is(err, postgres.ErrNonDurable) {
		t.Fatalf("Open with synchronous_commit=off in the connection string: got %v, want ErrNonDurable", err)
	}
	for _, level := range []string{"local", "remote_write", "remote_apply", "on"} {
		o := testOptions(t, withParam(t, dsn, "synchronous_commit", level), freshSchema(t, dsn))
		s, err := postgres.Open(context.Background(), o)
		if err != nil {
			t.Fatalf("Open with synchronous_commit=%s: got %v, want a store (the WAL is flushed locally)", level, err)
		}
		s.Close()
	}
}

// slogTo returns a logger that writes text to w.
func slogTo(w *syncbuf.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
