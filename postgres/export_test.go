package postgres

import (
	"context"
	"time"
)

// Test-only exports for the black-box tests in package postgres_test.

// SetNoAdvisoryLock makes Open migrate as on a server without advisory
// locks (CockroachDB), and returns a function that undoes it.
func SetNoAdvisoryLock() (undo func()) {
	noAdvisoryLock.Store(true)
	return func() { noAdvisoryLock.Store(false) }
}

// SetMigrateTo makes Open migrate no further than version v, and returns
// a function that undoes it.
func SetMigrateTo(v int) (undo func()) {
	migrateTo.Store(int64(v))
	return func() { migrateTo.Store(0) }
}

// MakePartitions makes the partitions of records for the periods of ts
// and the periods after them, as a claim of those expiries would.
func (s *Store) MakePartitions(ctx context.Context, ts ...time.Time) error {
	exps := make([]int64, len(ts))
	for i, t := range ts {
		exps[i] = t.UnixNano()
	}
	return s.ensurePartitions(ctx, exps...)
}

// SQL returns the store's statement of the given name: "deleteExpired",
// "listPending", "listPendingAll", "listSeq", "listSeqDesc" or "purge".
func (s *Store) SQL(name string) string {
	switch name {
	case "purge":
		return s.q.purge
	case "deleteExpired":
		return s.q.deleteExpired
	case "listPending":
		return s.q.listPending
	case "listPendingAll":
		return s.q.listPendingAll
	case "listSeq":
		return s.q.listSeq
	case "listSeqDesc":
		return s.q.listSeqDesc
	}
	panic("postgres: no statement " + name)
}

// KeyMin and KeyMax bound the key space in the purge statement.
var KeyMin, KeyMax = keyMin, keyMax
