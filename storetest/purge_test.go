package storetest

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spentledger/spent"
)

// badPurge is a fileStore whose Purge is wrong in the way its purge
// function says; the rest of the store is correct.
type badPurge struct {
	*fileStore
	purge func(s *fileStore, namespace string, limit int) (int, error)
}

func (b *badPurge) Purge(ctx context.Context, namespace string, limit int) (int, error) {
	if err := b.lock(ctx); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	return b.purge(b.fileStore, namespace, limit)
}

// purgeWhere forgets up to limit records for which match holds; the caller
// holds mu.
func purgeWhere(s *fileStore, limit int, match func(*spent.Record) bool) (int, error) {
	var es []logEntry
	for k, r := range s.recs {
		if len(es) >= limit {
			break
		}
		if match(&r) {
			es = append(es, logEntry{Del: &k})
		}
	}
	return len(es), s.commit(es...)
}

// indexedStore is a fileStore with a pending index of its own, which
// ListPending answers from without reading the records back. Unless fixed
// is set, Purge forgets to update it: the purged pending records stay
// listed.
type indexedStore struct {
	*fileStore
	fixed   bool
	imu     sync.Mutex
	pending map[spent.Hash]spent.Record
}

func (s *indexedStore) Purge(ctx context.Context, namespace string, limit int) (int, error) {
	n, err := s.fileStore.Purge(ctx, namespace, limit)
	if s.fixed {
		s.mu.Lock()
		s.imu.Lock()
		for k := range s.pending {
			if _, ok := s.recs[k]; !ok {
				delete(s.pending, k)
			}
		}
		s.imu.Unlock()
		s.mu.Unlock()
	}
	return n, err
}

func (s *indexedStore) index(r spent.Record) {
	s.imu.Lock()
	defer s.imu.Unlock()
	if r.State == spent.StatePending {
		s.pending[r.Hash] = r
	} else {
		delete(s.pending, r.Hash)
	}
}

func (s *indexedStore) Claim(ctx context.Context, op spent.ClaimOp) (spent.ClaimAnswer, error) {
	res, err := s.fileStore.Claim(ctx, op)
	if err == nil && res.Inserted {
		s.index(res.Record)
	}
	return res, err
}

func (s *indexedStore) ClaimBatch(ctx context.Context, ops []spent.ClaimOp) ([]spent.ClaimAnswer, error) {
	res, err := s.fileStore.ClaimBatch(ctx, ops)
	for _, r := range res {
		if r.Inserted {
			s.index(r.Record)
		}
	}
	return res, err
}

func (s *indexedStore) Complete(ctx context.Context, key spent.Hash, seq spent.Seq, result []byte, now time.Time) (spent.Record, error) {
	r, err := s.fileStore.Complete(ctx, key, seq, result, now)
	if err == nil {
		s.index(r)
	}
	return r, err
}

func (s *indexedStore) Release(ctx context.Context, key spent.Hash, seq spent.Seq, now time.Time) error {
	err := s.fileStore.Release(ctx, key, seq, now)
	if err == nil {
		s.imu.Lock()
		delete(s.pending, key)
		s.imu.Unlock()
	}
	return err
}

func (s *indexedStore) ListPending(ctx context.Context, namespace string, leaseBefore time.Time, limit int) ([]spent.Record, error) {
	s.imu.Lock()
	defer s.imu.Unlock()
	var out []spent.Record
	for _, r := range s.pending {
		if r.LiveAt(leaseBefore) && !r.LeaseUntil.After(leaseBefore) && (namespace == "" || r.Namespace == namespace) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LeaseUntil.Before(out[j].LeaseUntil) })
	return out[:min(limit, len(out))], nil
}

// TestPurgeTestCatchesBadStores shows that the Purge test can fail: each
// store below gets Purge wrong in one way, and the test reports it.
func TestPurgeTestCatchesBadStores(t *testing.T) {
	bad := func(purge func(s *fileStore, namespace string, limit int) (int, error)) Harness {
		return Harness{Open: func(tb testing.TB, dir string) spent.Store {
			return &badPurge{fileStore: openFileStore(tb, dir, false), purge: purge}
		}}
	}
	// An indexed store is kept per directory, so that a reopen finds the
	// index as it left the records: only Purge's omission shows.
	indexed := func(fixed bool) Harness {
		var mu sync.Mutex
		indexes := map[string]*indexedStore{}
		return Harness{Open: func(tb testing.TB, dir string) spent.Store {
			mu.Lock()
			defer mu.Unlock()
			is := &indexedStore{fileStore: openFileStore(tb, dir, false), fixed: fixed, pending: map[spent.Hash]spent.Record{}}
			if old, ok := indexes[dir]; ok {
				is.pending = old.pending
			}
			indexes[dir] = is
			return is
		}}
	}
	cases := []struct {
		name string
		h    Harness
		want string // in one of the violations
	}{
		{"PurgesEveryNamespace", bad(func(s *fileStore, _ string, limit int) (int, error) {
			return purgeWhere(s, limit, func(*spent.Record) bool { return true })
		}), "of echo-hold after purging"},
		{"KeepsPendingRecords", bad(func(s *fileStore, ns string, limit int) (int, error) {
			return purgeWhere(s, limit, func(r *spent.Record) bool { return r.Namespace == ns && r.State == spent.StateComplete })
		}), "Get of purged record"},
		{"KeepsExpiredRecords", bad(func(s *fileStore, ns string, limit int) (int, error) {
			return purgeWhere(s, limit, func(r *spent.Record) bool { return r.Namespace == ns && r.LiveAt(epoch.Add(10*time.Second)) })
		}), "Get of purged record"},
		{"StopsShortOfTheLimit", bad(func(s *fileStore, ns string, limit int) (int, error) {
			return purgeWhere(s, limit-1, func(r *spent.Record) bool { return r.Namespace == ns })
		}), "removed 2 records in all"},
		{"ExceedsTheLimit", bad(func(s *fileStore, ns string, limit int) (int, error) {
			return purgeWhere(s, limit+1, func(r *spent.Record) bool { return r.Namespace == ns })
		}), "more than the limit"},
		{"ForgetsCountersToo", bad(func(s *fileStore, ns string, limit int) (int, error) {
			// Counters under the hashes of the purged records go too.
			var es []logEntry
			for k, r := range s.recs {
				if len(es)/2 < limit && r.Namespace == ns {
					es = append(es, logEntry{Del: &k}, logEntry{DelCounter: &k})
				}
			}
			return len(es) / 2, s.commit(es...)
		}), "counter"},
		{"NotDurable", bad(func(s *fileStore, ns string, limit int) (int, error) {
			n := 0
			for k, r := range s.recs {
				if n < limit && r.Namespace == ns {
					s.apply(logEntry{Del: &k}) // in memory only
					n++
				}
			}
			return n, nil
		}), "Get of purged record"},
		{"LeavesIndexEntries", indexed(false), "Unknown(refuse-hold) after Purge"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := purgeViolations(t, tc.h)
			if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Fatalf("Purge test of a store that %s: got violations:\n%swant one saying %q", tc.name, joinLines(v), tc.want)
			}
			t.Logf("%d violations:\n%s", len(v), joinLines(v))
		})
	}
	// The same stores with Purge done right pass: the violations above are
	// Purge's, not the wrappers'.
	for _, tc := range []struct {
		name string
		h    Harness
	}{
		{"FileStore", bad(func(s *fileStore, ns string, limit int) (int, error) {
			return purgeWhere(s, limit, func(r *spent.Record) bool { return r.Namespace == ns })
		})},
		{"IndexedStore", indexed(true)},
	} {
		t.Run("Correct"+tc.name+"Passes", func(t *testing.T) {
			if v := purgeViolations(t, tc.h); len(v) > 0 {
				t.Fatalf("Purge test of a correct store: got violations:\n%s", joinLines(v))
			}
		})
	}
}
