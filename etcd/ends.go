package etcd

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spentledger/spent"
)

var _ spent.EndWatcher = (*Store)(nil)

// endsMaxBackoff is the longest pause between two attempts to watch again.
const endsMaxBackoff = 2 * time.Second

// WatchEnds implements [spent.EndWatcher] with an etcd watch on the pending
// index, deletions only: every completion and release deletes the record's
// pending-index entry in its own transaction, and the entry's key ends with
// the record's hash, so the watch streams no record bodies. (A retake or
// an expiry deletes an entry too; the ledger's waiters then look again and
// find the key as it is.) It returns once etcd has confirmed the watch.
// The client resumes a watch over a broken connection by itself, from the
// revision it reached, losing nothing; when the watch ends instead (its
// revision compacted, its member without a leader, the client closed), it
// is made again with backoff, and lost is called, since the ends in
// between were not seen.
func (s *Store) WatchEnds(ctx context.Context, ended func(spent.Hash), lost func()) (func(), error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("etcd: watch ends: %w", spent.ErrClosed)
	}
	wctx, cancel := context.WithCancel(context.Background())
	wch, err := s.watchPending(ctx, wctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("etcd: watch ends: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.watchEnds(wctx, wch, ended, lost)
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

// watchPending starts a watch of the deletions in the pending index, for
// as long as wctx lives, and waits (as long as ctx lets it) until etcd has
// created it.
func (s *Store) watchPending(ctx, wctx context.Context) (clientv3.WatchChan, error) {
	wch := s.cli.Watch(clientv3.WithRequireLeader(wctx), s.keys.pendingAll(),
		clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	select {
	case resp, ok := <-wch:
		if !ok {
			return nil, fmt.Errorf("watch closed before it was created: %w", context.Cause(wctx))
		}
		if err := resp.Err(); err != nil {
			return nil, err
		}
		if !resp.Created {
			return nil, fmt.Errorf("watch answered before it was created")
		}
		return wch, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// watchEnds tells the deletions of wch to ended until wctx is done or the
// store closed, watching again when the watch ends.
func (s *Store) watchEnds(wctx context.Context, wch clientv3.WatchChan, ended func(spent.Hash), lost func()) {
	backoff := time.Duration(0)
	for wctx.Err() == nil && !s.closed.Load() {
		if wch == nil {
			backoff = min(max(2*backoff, 50*time.Millisecond), endsMaxBackoff)
			select {
			case <-wctx.Done():
				return
			case <-time.After(backoff):
			}
			tctx, cancel := context.WithTimeout(wctx, s.opts.DialTimeout)
			w, err := s.watchPending(tctx, wctx)
			cancel()
			if err != nil {
				continue
			}
			wch, backoff = w, 0
			s.log.Info("etcd: watching ends again: waiting claims look again", "store", "etcd")
			lost()
			continue
		}
		resp, ok := <-wch
		if !ok || resp.Err() != nil || resp.Canceled {
			if wctx.Err() != nil || s.closed.Load() {
				return
			}
			s.log.Warn("etcd: ends watch ended; watching again, with backoff", "store", "etcd", "err", resp.Err())
			wch = nil
			continue
		}
		for _, ev := range resp.Events {
			k := string(ev.Kv.Key)
			if len(k) < hashHex || !strings.HasPrefix(k, s.keys.pendingAll()) {
				continue
			}
			if h, err := spent.ParseHash(k[len(k)-hashHex:]); err == nil {
				ended(h)
			}
		}
	}
}
