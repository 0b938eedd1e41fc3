package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spentledger/spent"
)

var _ spent.EndWatcher = (*Store)(nil)

// Timing of the ends listener: how long it may stay silent before it pings
// the server (so that a connection that died without a word is found within
// about endsPing plus endsPingTimeout), and the longest pause between two
// attempts to listen again.
const (
	endsPing        = 15 * time.Second
	endsPingTimeout = 10 * time.Second
	endsMaxBackoff  = 2 * time.Second
)

// endsChannel is the NOTIFY channel of a schema's ends: "spent_ends " and
// the schema, or, when that is longer than a channel name may be (63
// bytes), the schema's SHA-256 in part.
func endsChannel(schema string) string {
	c := "spent_ends " + schema
	if len(c) > 63 {
		sum := sha256.Sum256([]byte(schema))
		c = "spent_ends " + hex.EncodeToString(sum[:16])
	}
	return c
}

// WatchEnds implements [spent.EndWatcher] with LISTEN/NOTIFY: the complete
// and release statements call pg_notify with the key's hash, in their own
// transaction, so the notice is sent when the end commits (and never for
// one rolled back). WatchEnds opens a connection of its own (outside the
// pool, with the pool's settings), LISTENs on the schema's channel and
// returns. When the connection fails, or stays silent and does not answer a
// ping, it connects and listens again with backoff, then calls lost: the
// notices sent while nobody listened are gone.
func (s *Store) WatchEnds(ctx context.Context, ended func(spent.Hash), lost func()) (func(), error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("postgres: watch ends: %w", spent.ErrClosed)
	}
	conn, err := s.listen(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: watch ends: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.watchEnds(wctx, conn, ended, lost)
	}()
	stop := func() {
		cancel()
		<-done
	}
	s.watchMu.Lock()
	s.watches = append(s.watches, stop)
	s.watchMu.Unlock()
	return stop, nil
}

// listen connects and LISTENs on the ends channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.ends}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// watchEnds tells the notices of conn to ended until ctx is done,
// listening again when the connection fails.
func (s *Store) watchEnds(ctx context.Context, conn *pgx.Conn, ended func(spent.Hash), lost func()) {
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if conn == nil {
			backoff = min(max(2*backoff, 50*time.Millisecond), endsMaxBackoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			c, err := s.listen(ctx)
			if err != nil {
				continue
			}
			conn, backoff = c, 0
			s.log.Info("postgres: listening for ends again: waiting claims look again", "store", "postgres")
			lost()
			continue
		}
		if err := s.receiveEnds(ctx, conn, ended); err != nil && ctx.Err() == nil {
			s.log.Warn("postgres: ends listener failed; listening again, with backoff", "store", "postgres", "err", err)
			conn.Close(context.Background())
			conn = nil
		}
	}
}

// receiveEnds tells the notices of conn to ended until ctx is done or the
// connection fails; a silent connection is pinged every endsPing.
func (s *Store) receiveEnds(ctx context.Context, conn *pgx.Conn, ended func(spent.Hash)) error {
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, endsPing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			var h spent.Hash
			if b, err := hex.DecodeString(n.Payload); err == nil && len(b) == len(h) {
				copy(h[:], b)
				ended(h)
			}
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			pctx, cancel := context.WithTimeout(ctx, endsPingTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
	return nil
}

// stopWatches ends every ends listener, at Close.
func (s *Store) stopWatches() {
	s.watchMu.Lock()
	ws := s.watches
	s.watches = nil
	s.watchMu.Unlock()
	for _, stop := range ws {
		stop()
	}
}
