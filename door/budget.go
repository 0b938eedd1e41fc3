package door

import (
	"fmt"

	"golang.org/x/sync/semaphore"
)

// Budget is a number of bytes that the requests of every door hold
// together: a door reserves a request's bytes before it reads them and
// gives them back once the request is answered. It never blocks: a request
// that does not fit is refused at once (HTTP 503, RESP -UNAVAILABLE), so
// that a full budget cannot stall the connections that hold it.
type Budget struct {
	sem   *semaphore.Weighted
	total int64
}

// NewBudget returns a budget of total bytes; total must be positive.
func NewBudget(total int64) (*Budget, error) {
	if total <= 0 {
		return nil, fmt.Errorf("door: budget of %d bytes: must be positive", total)
	}
	return &Budget{sem: semaphore.NewWeighted(total), total: total}, nil
}

// TryAcquire reserves n bytes, reporting whether they fit in what is left.
// n of zero or less always fits and reserves nothing.
func (b *Budget) TryAcquire(n int64) bool {
	if n <= 0 {
		return true
	}
	return b.sem.TryAcquire(n)
}

// Release gives back n bytes reserved by TryAcquire.
func (b *Budget) Release(n int64) {
	if n > 0 {
		b.sem.Release(n)
	}
}

// UnauthenticatedShare is the part of a budget of total bytes in flight
// that requests without a valid token may hold together: an eighth, so
// that they can never take the budget from clients with one.
func UnauthenticatedShare(total int64) int64 { return max(total/8, PreAuthFrame) }

// Total returns the budget's size in bytes.
func (b *Budget) Total() int64 { return b.total }
