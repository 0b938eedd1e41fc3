package redis

import (
	"context"
	"encoding/hex"
	"errors"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/spentledger/spent"
)

var _ spent.EndWatcher = (*Store)(nil)

// endsPing is how long the ends subscription may stay silent before it
// pings the server, so that a connection that died without a word is found
// (and replaced) within about twice this.
const endsPing = 15 * time.Second

// WatchEnds implements [spent.EndWatcher] with Redis pub/sub: the complete
// and release scripts PUBLISH the record's hash on the channel <prefix>ends
// in the same script run as the write, and WatchEnds SUBSCRIBEs to it (in a
// cluster, classic pub/sub reaches every node). It returns once the server
// has confirmed the subscription. When the subscription's connection fails,
// go-redis reconnects and subscribes again; each confirmation after the
// first calls lost, since ends published while no subscription held are
// lost to it (pub/sub keeps nothing). A silent connection is pinged every
// 15 seconds.
func (s *Store) WatchEnds(ctx context.Context, ended func(spent.Hash), lost func()) (func(), error) {
	if err := s.enter("watch ends"); err != nil {
		return nil, err
	}
	ps := s.uc.Subscribe(ctx, s.ks.ends)
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			ps.Close()
			return nil, s.fail("watch ends", err)
		}
		if sub, ok := msg.(*goredis.Subscription); ok && sub.Kind == "subscribe" {
			break
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.watchEnds(wctx, ps, ended, lost)
	}()
	stop := func() {
		cancel()
		ps.Close()
		<-done
	}
	s.watchMu.Lock()
	s.watches = append(s.watches, stop)
	s.watchMu.Unlock()
	return stop, nil
}

// watchEnds receives the ends of ps until ctx is done or the store closed.
func (s *Store) watchEnds(ctx context.Context, ps *goredis.PubSub, ended func(spent.Hash), lost func()) {
	backoff := time.Duration(0)
	for ctx.Err() == nil && !s.closed.Load() {
		msg, err := ps.ReceiveTimeout(ctx, endsPing)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Silence: a ping's answer (or its failure) comes next.
				ps.Ping(ctx)
				continue
			}
			if ctx.Err() != nil || s.closed.Load() || errors.Is(err, goredis.ErrClosed) {
				return
			}
			if backoff == 0 {
				s.log.Warn("redis: ends subscription failed; subscribing again, with backoff: waiting claims look again once it holds",
					"store", "redis", "err", err)
			}
			backoff = min(max(2*backoff, 50*time.Millisecond), 2*time.Second)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			continue
		}
		switch m := msg.(type) {
		case *goredis.Message:
			var h spent.Hash
			if b, err := hex.DecodeString(m.Payload); err == nil && len(b) == len(h) {
				copy(h[:], b)
				ended(h)
			}
		case *goredis.Subscription:
			if m.Kind == "subscribe" {
				// Subscribed again after a failure: ends in between are lost.
				backoff = 0
				lost()
			}
		}
	}
}

// stopWatches ends every ends subscription, at Close.
func (s *Store) stopWatches() {
	s.watchMu.Lock()
	ws := s.watches
	s.watches = nil
	s.watchMu.Unlock()
	for _, stop := range ws {
		stop()
	}
}
