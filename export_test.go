package spent

// SetMaxWaiters sets the most claims a ledger lets wait at once, until the
// returned function puts the old bound back; for tests only.
func SetMaxWaiters(n int64) (restore func()) {
	old := maxWaiters
	maxWaiters = n
	return func() { maxWaiters = old }
}
