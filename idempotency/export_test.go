package idempotency

// SetTestHook installs f as the crash-point hook, for tests only: it is
// called with "applied" (the marker is durable), "captured" (the handler
// returned, nothing stored) and "stored" (the answer is durable, nothing
// sent). It returns a function that removes it.
func SetTestHook(f func(point string)) (restore func()) {
	testHook.Store(&f)
	return func() { testHook.Store(nil) }
}
