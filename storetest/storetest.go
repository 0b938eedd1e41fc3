// Package storetest is the conformance suite every spent.Store must pass.
package storetest

import (
	"testing"

	"github.com/spentledger/spent"
)

// Harness tells the suite how to open the store under test.
type Harness struct {
	// Open opens the store kept in dir. The suite passes a fresh temporary
	// directory for a new store, and the same directory again after Close to
	// reopen it: a durable store must then hold everything it acknowledged.
	Open func(tb testing.TB, dir string) spent.Store
	// Wrap, when set, serves a ledger through another Service (the HTTP client
	// against a live server, say); the behavioural tests then run through it.
	Wrap func(tb testing.TB, l *spent.Ledger) spent.Service
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	t.Skip("storetest: suite not written yet")
}
