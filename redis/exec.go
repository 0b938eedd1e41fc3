package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// call is one script run on the keys of one hash tag, or (with no script)
// one plain command on one key.
type call struct {
	route string  // a key of the call: its slot picks the primary
	scr   *script // nil for a plain command
	keys  []string
	args  []any // the script's arguments, or the whole plain command
	noGet bool  // a claim's SET NX without GET (see Store.claimFast)
	fast  bool  // a claim's fast path (see Store.claimFast)
	cmd   *goredis.Cmd
}

func newCall(route string, scr *script, keys []string, args ...any) *call {
	return &call{route: route, scr: scr, keys: keys, args: args}
}

// once marks a command that go-redis must never resend by itself after a
// network error: a resent write may run twice. An error leaves the outcome
// unknown, for the caller (the ledger reads the key back) to settle. MOVED,
// ASK and refused connections are still followed: the command did not run.
type once struct{ *goredis.Cmd }

// NoRetry tells go-redis not to resend the command.
func (once) NoRetry() bool { return true }

// command builds the EVALSHA (or, with eval, EVAL) command of c, or its
// plain command.
func (c *call) command(ctx context.Context, eval bool) goredis.Cmder {
	if c.scr == nil {
		c.cmd = goredis.NewCmd(ctx, c.args...)
		c.cmd.SetFirstKeyPos(1)
		return once{c.cmd}
	}
	args := make([]any, 0, 3+len(c.keys)+len(c.args))
	if eval {
		args = append(args, "eval", c.scr.src)
	} else {
		args = append(args, "evalsha", c.scr.sha)
	}
	args = append(args, len(c.keys))
	for _, k := range c.keys {
		args = append(args, k)
	}
	args = append(args, c.args...)
	c.cmd = goredis.NewCmd(ctx, args...)
	c.cmd.SetFirstKeyPos(3)
	return once{c.cmd}
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// exec runs calls, in order per primary, and returns the first error. A
// script missing from a server's cache (a restart, a failover, SCRIPT FLUSH)
// did not run; it is sent again in full (EVAL), which caches it again. When
// wait is set and Options.WaitReplicas is positive, each primary's share of
// the calls is followed by WAIT on the same connection; a shortfall is
// returned (wrapping ErrNotReplicated) only when every call succeeded, so
// that the caller can tell whether it wrote anything that needed the WAIT.
// A nil reply is no error: its call's Err is goredis.Nil.
func (s *Store) exec(ctx context.Context, calls []*call, wait bool) error {
	run := s.run
	if wait && s.opts.WaitReplicas > 0 {
		run = s.runWait
	}
	err := run(ctx, calls, false)
	var again []*call
	for _, c := range calls {
		if c.cmd != nil && isNoScript(c.cmd.Err()) {
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		err = errors.Join(err, run(ctx, again, true))
	}
	for _, c := range calls {
		if c.cmd == nil {
			return errors.Join(err, errors.New("script not sent"))
		}
		if err := c.cmd.Err(); err != nil && !errors.Is(err, goredis.Nil) {
			return err
		}
	}
	return err
}

// run sends calls through the client: one command (through the
// autopipeliner, with Options.AutoPipeline), or a pipeline. The errors of the
// commands stay on them, for exec.
func (s *Store) run(ctx context.Context, calls []*call, eval bool) error {
	if len(calls) == 1 {
		if s.ap != nil {
			_ = s.ap.Process(ctx, calls[0].command(ctx, eval))
		} else {
			_ = s.uc.Process(ctx, calls[0].command(ctx, eval))
		}
		return nil
	}
	pipe := s.uc.Pipeline()
	for _, c := range calls {
		_ = pipe.Process(ctx, c.command(ctx, eval))
	}
	_, _ = pipe.Exec(ctx)
	return nil
}

// runWait sends each primary's calls in one pipeline on one connection,
// followed by WAIT, and returns an error wrapping ErrNotReplicated when fewer
// replicas than Options.WaitReplicas acknowledged them. The errors of the
// commands stay on them, for exec.
func (s *Store) runWait(ctx context.Context, calls []*call, eval bool) error {
	groups := map[*goredis.Client][]*call{}
	var order []*goredis.Client
	for _, c := range calls {
		node := s.single
		if s.cluster != nil {
			var err error
			if node, err = s.cluster.MasterForKey(ctx, c.route); err != nil {
				return err
			}
		}
		if _, ok := groups[node]; !ok {
			order = append(order, node)
		}
		groups[node] = append(groups[node], c)
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, node := range order {
		if node == nil {
			return errors.New("no primary for the key")
		}
		wg.Go(func() {
			pipe := node.Pipeline()
			for _, c := range groups[node] {
				_ = pipe.Process(ctx, c.command(ctx, eval))
			}
			w := goredis.NewIntCmd(ctx, "wait", s.opts.WaitReplicas, s.opts.WaitTimeout.Milliseconds())
			_ = pipe.Process(ctx, w)
			_, _ = pipe.Exec(ctx)
			switch {
			case w.Err() != nil:
				errs[i] = fmt.Errorf("WAIT on %s: %w", node.Options().Addr, w.Err())
			case w.Val() < int64(s.opts.WaitReplicas):
				errs[i] = fmt.Errorf("%w: %d of %d replicas of %s within %v",
					ErrNotReplicated, w.Val(), s.opts.WaitReplicas, node.Options().Addr, s.opts.WaitTimeout)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
