package spent

// maxUnwrap bounds how many wrapper stores [StoreAs] looks through, so that
// a wrapper whose Unwrap returns itself (or a cycle of them) cannot hold it
// in a loop.
const maxUnwrap = 16

// StoreAs returns the first store in s's chain of wrappers that implements
// T, an optional capability of a [Store] ([SeqLister], [EndWatcher]), and
// true; or T's zero value and false when none does. It looks at s first,
// then, while the store looked at has a method Unwrap() Store (a wrapper,
// such as the tracing store of package opentelemetry), at the store that
// Unwrap returns, at most 16 wrappers deep.
//
// Every run-time check of an optional store capability, in this package and
// outside it, must be made with StoreAs, never with a bare type assertion:
// a wrapper implements the Store methods only, so an assertion on it finds
// no capability, and the ledger would silently lose it (a waiting claim on
// a traced shared store would no longer learn of another server's ends).
// A wrapper that adds an optional capability of its own (one that does not
// merely pass the call through) implements it and is found first.
func StoreAs[T any](s Store) (T, bool) {
	for range maxUnwrap + 1 {
		if s == nil {
			break
		}
		if c, ok := s.(T); ok {
			return c, true
		}
		u, ok := s.(interface{ Unwrap() Store })
		if !ok {
			break
		}
		s = u.Unwrap()
	}
	var zero T
	return zero, false
}
