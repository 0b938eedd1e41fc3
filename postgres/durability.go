package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// settings are the server settings that decide whether a commit survives a
// crash, as one session sees them (a role, a database or the connection
// string can change synchronous_commit for a session).
type settings struct {
	version           string
	synchronousCommit string
	fsync             string
	fullPageWrites    string
	standbyNames      string
}

func readSettings(ctx context.Context, c *pgx.Conn, sql string) (settings, error) {
	var st settings
	err := c.QueryRow(ctx, sql).Scan(&st.version, &st.synchronousCommit, &st.fsync, &st.fullPageWrites, &st.standbyNames)
	return st, err
}

// raft reports whether the server is one whose commits are replicated by
// consensus before they are acknowledged (CockroachDB), where the
// PostgreSQL settings below are not what makes a commit durable.
func (st *settings) raft() bool { return strings.Contains(st.version, "CockroachDB") }

// losses lists what the settings can lose: each entry makes the server
// unfit for the ledger without AllowNonDurable.
//
// synchronous_commit: "off" acknowledges a commit before its WAL is flushed
// (up to three times wal_writer_delay of acknowledged commits die with the
// server process, not only with the machine). "local", "on",
// "remote_write" and "remote_apply" all flush the WAL locally before
// acknowledging; they differ only in what they wait for from a synchronous
// standby, which [settings.warnings] reports.
func (st *settings) losses() []string {
	if st.raft() {
		return nil
	}
	var out []string
	switch st.synchronousCommit {
	case "on", "local", "remote_write", "remote_apply":
	case "off":
		out = append(out, "synchronous_commit=off: commits are acknowledged before their WAL is flushed, and a crash of the server process loses the last acknowledged claims (up to three times wal_writer_delay)")
	default:
		out = append(out, fmt.Sprintf("synchronous_commit=%q is not a setting known to flush commits", st.synchronousCommit))
	}
	switch st.fsync {
	case "on":
	case "off":
		out = append(out, "fsync=off: the server never forces its writes to disk, and a crash of the machine (power loss, kernel panic) loses acknowledged claims and can corrupt the database")
	default:
		out = append(out, fmt.Sprintf("fsync=%q: the server does not say that it forces writes to disk", st.fsync))
	}
	return out
}

// warnings lists what the settings, durable against a crash, can still
// lose at a failover or power loss.
func (st *settings) warnings() []string {
	if st.raft() {
		return nil
	}
	var out []string
	if st.fullPageWrites == "off" {
		out = append(out, "full_page_writes=off: a page torn by a power loss can corrupt the database, unless the file system writes pages atomically")
	}
	switch {
	case st.standbyNames == "":
		out = append(out, "no synchronous standby (synchronous_standby_names is empty): a failover to an asynchronous standby can lose acknowledged claims")
	case st.synchronousCommit == "local":
		out = append(out, "synchronous_commit=local: commits do not wait for the synchronous standby, so a failover can lose acknowledged claims")
	case st.synchronousCommit == "remote_write":
		out = append(out, "synchronous_commit=remote_write: the standby holds a commit in its memory, not on its disk, when it is acknowledged; losing the primary and the standby's operating system together loses it")
	}
	return out
}

// checkDurability reads the settings through the pool (whose AfterConnect
// has already refused a non-durable server unless AllowNonDurable is set)
// and logs what they promise.
func (s *Store) checkDurability(ctx context.Context) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	st, err := readSettings(ctx, c.Conn(), s.q.durabilitySettings)
	if err != nil {
		return fmt.Errorf("reading durability settings: %w", err)
	}
	if st.raft() {
		s.log.Info("postgres: the server replicates commits by consensus; synchronous_commit and fsync are not checked", "version", st.version)
		return nil
	}
	for _, l := range st.losses() {
		s.log.Warn("postgres: NON-DURABLE server accepted because AllowNonDurable is set: acknowledged claims can be lost", "reason", l)
	}
	for _, w := range st.warnings() {
		s.log.Info("postgres: durable against a crash of the server, but", "caveat", w)
	}
	return nil
}
