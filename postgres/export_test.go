package postgres

// Test-only exports for the black-box tests in package postgres_test.

// SetNoAdvisoryLock makes Open migrate as on a server without advisory
// locks (CockroachDB), and returns a function that undoes it.
func SetNoAdvisoryLock() (undo func()) {
	noAdvisoryLock.Store(true)
	return func() { noAdvisoryLock.Store(false) }
}

// SQL returns the store's statement of the given name: "deleteExpired",
// "listPending", "listPendingAll" or "purge".
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
	}
	panic("postgres: no statement " + name)
}

// KeyMin and KeyMax bound the key space in the purge statement.
var KeyMin, KeyMax = keyMin, keyMax
