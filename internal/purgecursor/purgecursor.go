// Package purgecursor keeps where a store's Purge of a namespace stopped, so
// that the next call for the same namespace goes on from there instead of
// walking the store again from its start. What it keeps is only a hint: a
// Purge is correct whatever position it is given.
package purgecursor

import "sync"

// Cursor holds the position of the last Purge call, of type P (a key, or a
// node and its scan cursor), and serialises the calls. The zero value is
// ready to use.
type Cursor[P any] struct {
	mu  sync.Mutex
	ns  string
	pos P
	set bool
}

// Start locks c for a call that purges namespace and returns the position
// where the previous call stopped if that call purged the same namespace
// (ok is false otherwise, and pos is the zero value: from the start). The
// position is then forgotten until Set; the caller must call Done.
func (c *Cursor[P]) Start(namespace string) (pos P, ok bool) {
	c.mu.Lock()
	if c.set && c.ns == namespace {
		pos, ok = c.pos, true
	}
	var zero P
	c.ns, c.pos, c.set = namespace, zero, false
	return pos, ok
}

// Set records where the current call stopped. Only a call between Start
// and Done may call it.
func (c *Cursor[P]) Set(pos P) { c.pos, c.set = pos, true }

// Done ends the call that Start began.
func (c *Cursor[P]) Done() { c.mu.Unlock() }
