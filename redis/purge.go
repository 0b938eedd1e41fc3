package redis

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent"
)

// purgeScanCount is the COUNT hint of each SCAN of Purge: about how many
// keys of the database one SCAN looks at.
const purgeScanCount = 1000

// purgePos is where a Purge stopped: a primary and its SCAN cursor.
type purgePos struct {
	node   string // the address of the primary
	cursor uint64 // the SCAN cursor there
}

// Purge implements [spent.Store]. It walks the keys of every primary with
// SCAN (MATCH on this store's record keys; SCAN still looks at every key of
// the database, other prefixes' and other types' included), reads the
// records found with pipelined GETs, decodes them, and runs one script per
// record of namespace, which deletes it, if it still belongs to namespace,
// with its pending-index entry. It goes on from the primary and cursor where
// the previous call for the same namespace stopped; a call that started
// there and reaches the end of the last primary walks every primary once
// more from the start, so that a call that returns fewer than limit has
// looked at every record. The deletions are in the append-only file on
// return, and, with Options.WaitReplicas, acknowledged by the replicas (a
// shortfall returns an error wrapping ErrNotReplicated, with the count of
// what was deleted on the primaries). A whole purge reads every record of
// the store about twice, one GET each.
func (s *Store) Purge(ctx context.Context, namespace string, limit int) (int, error) {
	if err := s.enter("purge"); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	nodes, err := s.primaries(ctx)
	if err != nil {
		return 0, s.fail("purge", err)
	}
	first, cursor := 0, uint64(0)
	if at, ok := s.purgeAt.Start(namespace); ok {
		for i, n := range nodes {
			if n.Options().Addr == at.node {
				first, cursor = i, at.cursor
			}
		}
	}
	defer s.purgeAt.Done()
	resumed := first != 0 || cursor != 0
	removed := 0
	for pass := 0; pass == 0 || (pass == 1 && resumed); pass++ {
		if pass == 1 {
			first, cursor = 0, 0
		}
		for i := first; i < len(nodes); i++ {
			node := nodes[i]
			for {
				keys, next, err := node.Scan(ctx, cursor, s.ks.recordPattern(), purgeScanCount).Result()
				if err != nil {
					return removed, s.fail("purge", fmt.Errorf("SCAN on %s: %w", node.Options().Addr, err))
				}
				n, full, err := s.purgeKeys(ctx, namespace, keys, limit-removed)
				removed += n
				if err != nil {
					return removed, s.fail("purge", err)
				}
				if full {
					if removed >= limit {
						// This page may hold more records of
						// namespace: the next call scans it again.
						s.purgeAt.Set(purgePos{node.Options().Addr, cursor})
						return removed, nil
					}
					// Some records were gone by the time their
					// script ran: scan the page again.
					continue
				}
				if next == 0 {
					break
				}
				cursor = next
			}
			cursor = 0
		}
	}
	return removed, nil
}

// purgeKeys reads the records of keys, and deletes those of namespace, up to
// want of them. It returns how many it deleted, and whether it reached want
// (records of namespace among keys may then be left).
func (s *Store) purgeKeys(ctx context.Context, namespace string, keys []string, want int) (int, bool, error) {
	hashes := make([]spent.Hash, 0, len(keys))
	gets := make([]*call, 0, len(keys))
	for _, k := range keys {
		h, ok := s.ks.parseRecordKey(k)
		if !ok {
			continue // another store's key that the pattern matched
		}
		hashes = append(hashes, h)
		gets = append(gets, &call{route: k, args: []any{"get", k}})
	}
	if len(gets) == 0 {
		return 0, false, nil
	}
	if err := s.exec(ctx, gets, false); err != nil {
		return 0, false, err
	}
	var dels []*call
	for i, g := range gets {
		v, err := g.cmd.Text()
		if errors.Is(err, goredis.Nil) {
			continue // forgotten since the SCAN
		}
		r, err := decodeRecord(hashes[i], []byte(v))
		if err != nil {
			return 0, false, err
		}
		if r.Namespace != namespace {
			continue
		}
		if len(dels) == want {
			return s.purgeRun(ctx, dels, true)
		}
		m := member(&r.Hash)
		rk := s.ks.recordKey(&r.Hash, m)
		dels = append(dels, newCall(rk, scriptPurge, []string{rk, s.ks.pending[r.Hash[0]]}, namespace, m, s.ks.seqIdx[r.Hash[0]]))
	}
	return s.purgeRun(ctx, dels, len(dels) == want)
}

// purgeRun runs the purge scripts of dels and returns how many deleted a
// record, with full passed through.
func (s *Store) purgeRun(ctx context.Context, dels []*call, full bool) (int, bool, error) {
	if len(dels) == 0 {
		return 0, full, nil
	}
	werr := s.exec(ctx, dels, true)
	n := 0
	for _, d := range dels {
		if v, _ := d.cmd.Val().(int64); v == 1 {
			n++
		}
	}
	return n, full, werr
}

// recordPattern is the SCAN pattern of this store's record keys: P{*}:r:*,
// with the prefix's glob characters escaped.
func (ks *keyspace) recordPattern() string {
	return globEscape(ks.prefix) + "{*}:r:*"
}

// parseRecordKey returns the hash whose record key is k, and whether k is
// one of this store's record keys.
func (ks *keyspace) parseRecordKey(k string) (spent.Hash, bool) {
	var h spent.Hash
	if len(k) < 2*spent.HashSize {
		return h, false
	}
	m := k[len(k)-2*spent.HashSize:]
	if n, err := hex.Decode(h[:], []byte(m)); err != nil || n != spent.HashSize {
		return h, false
	}
	return h, ks.recordKey(&h, m) == k
}

// globEscape escapes the characters that Redis glob patterns interpret.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
