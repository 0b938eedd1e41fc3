package main

import (
	"context"
	"encoding/hex"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
)

// defaultAddr is the server the client commands talk to unless --addr or
// SPENT_ADDR says otherwise: serve's default listen address.
const defaultAddr = "http://" + defaultListen

// clientFlags are the flags every command that talks to a server shares.
type clientFlags struct {
	addr      string
	token     string
	namespace string
	json      bool
	timeout   time.Duration
	tls       clientTLS
}

// addClientFlags adds --addr, --token, --namespace, --json and --timeout,
// and --cacert, --cert and --key for an https:// server.
func addClientFlags(f *pflag.FlagSet, cf *clientFlags, namespaceDefault, namespaceHelp string) {
	f.StringVar(&cf.addr, "addr", "", "server `URL` (default $SPENT_ADDR, else "+defaultAddr+")")
	f.StringVar(&cf.token, "token", "", "bearer `token` (default $SPENT_TOKEN)")
	f.StringVarP(&cf.namespace, "namespace", "n", namespaceDefault, namespaceHelp)
	f.BoolVar(&cf.json, "json", false, "print JSON, one object per line, instead of text")
	f.DurationVar(&cf.timeout, "timeout", 30*time.Second, "give up on the server after this `duration`")
	addClientTLSFlags(f, &cf.tls)
}

// serverURL returns the server cf names: --addr, else $SPENT_ADDR, else
// defaultAddr, with http:// added when no scheme is given.
func (m *Main) serverURL(cf *clientFlags) string {
	addr := cf.addr
	if addr == "" {
		addr = m.getenv("SPENT_ADDR")
	}
	if addr == "" {
		addr = defaultAddr
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return addr
}

// service returns the HTTP client for cf, with SPENT_ADDR, SPENT_TOKEN,
// SPENT_CACERT, SPENT_CERT and SPENT_KEY as defaults. TLS files that do not
// load make every call fail with a usage error that says why.
func (m *Main) service(cf *clientFlags) spent.Service {
	addr := m.serverURL(cf)
	token := cf.token
	if token == "" {
		token = m.getenv("SPENT_TOKEN")
	}
	// The commands bound each call with --timeout through its context, so
	// the http package's shared, pooled HTTP client serves them all.
	tc, err := cf.tls.config(m.getenv)
	if err != nil {
		return brokenService{err}
	}
	return sphttp.NewClient(addr, sphttp.ClientConfig{Token: token, TLS: tc})
}

// resultFlags reads a result from --result or --result-file.
type resultFlags struct {
	text string
	file string
}

func addResultFlags(f *pflag.FlagSet, rf *resultFlags, what string) {
	f.StringVar(&rf.text, "result", "", what+": this `text`, stored as it is (never read as base64)")
	f.StringVar(&rf.file, "result-file", "", what+" read from a `file`, any bytes (- for standard input)")
}

// read returns the result bytes, or nil when neither flag was given.
func (rf *resultFlags) read(c *cobra.Command, stdin io.Reader) ([]byte, error) {
	switch {
	case c.Flags().Changed("result") && c.Flags().Changed("result-file"):
		return nil, usagef("--result and --result-file: give one, not both")
	case c.Flags().Changed("result"):
		return []byte(rf.text), nil
	case c.Flags().Changed("result-file"):
		var b []byte
		var err error
		if rf.file == "-" {
			b, err = io.ReadAll(stdin)
		} else {
			b, err = os.ReadFile(rf.file)
		}
		if err != nil {
			return nil, usagef("--result-file: %w", err)
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	}
	return nil, nil
}

// parseExpiresAt reads --expires-at: an RFC 3339 time, or a Go duration from
// now ("90m").
func parseExpiresAt(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d), nil
	}
	return time.Time{}, usagef("--expires-at %q: want an RFC 3339 time (2030-01-02T15:04:05Z) or a positive duration from now (90m)", s)
}

// claimCommand is "spent claim": one-step or two-step claims of keys.
func (m *Main) claimCommand() *cobra.Command {
	var (
		cf                 clientFlags
		rf                 resultFlags
		fingerprint, place string
		expiresAt          string
		wait               time.Duration
	)
	c := &cobra.Command{
		Use:   "claim [flags] KEY...",
		Short: "Claim keys and print each outcome",
		Long: `Claim one or more keys in a namespace and print each outcome: fresh,
replayed, in_progress, refused or mismatch. Every outcome is a success (exit 0).

With --result (or --result-file) the claim is one-step: the result is stored in
the same write. Without it the claim is two-step: a fresh claim holds a lease
and ends with "spent complete" or "spent release". Several keys are claimed in
one batch request.

--result takes text and stores its bytes as they are, as the HTTP API's
result_text member does ("--result paid" stores paid; it is never read as
base64); --result-file takes any bytes.

--wait makes a claim that finds its key pending wait, up to that long (and the
server's max_wait), for the pending claim to end: it then prints what a repeat
prints (replayed, refused), or fresh when the key was released; in_progress
when the wait ran out. One key only.`,
		Example: `  spent claim order-1 --result '{"status":"paid"}'
  spent claim ticket-42 -n tickets --place gate-3
  spent claim order-1 --wait 10s
  spent claim order-2 --fingerprint $(sha256sum req.json | cut -c1-64)`,
		Args: minArgs(1, "KEY"),
		RunE: func(c *cobra.Command, keys []string) error {
			result, err := rf.read(c, m.Stdin)
			if err != nil {
				return err
			}
			var fp []byte
			if fingerprint != "" {
				if fp, err = hex.DecodeString(fingerprint); err != nil || len(fp) != spent.FingerprintLen {
					return usagef("--fingerprint: want %d hex digits (a SHA-256)", 2*spent.FingerprintLen)
				}
			}
			if wait < 0 || (wait > 0 && len(keys) > 1) {
				return usagef("--wait %v: want a positive duration, and one key (a batch never waits)", wait)
			}
			var exp time.Time
			if expiresAt != "" {
				if exp, err = parseExpiresAt(expiresAt, time.Now()); err != nil {
					return err
				}
			}
			claims := make([]spent.Claim, len(keys))
			for i, k := range keys {
				claims[i] = spent.Claim{Namespace: cf.namespace, Key: k, Fingerprint: fp, Place: place, Result: result, ExpiresAt: exp, Wait: wait}
			}
			m.run = func(ctx context.Context) error {
				// --timeout bounds the call beyond the wait.
				ctx, cancel := context.WithTimeout(ctx, wait+cf.timeout)
				defer cancel()
				res, err := claimAll(ctx, m.service(&cf), claims)
				if err != nil {
					return err
				}
				p := m.printer(cf.json)
				for i, r := range res {
					p.claim(keys[i], r)
				}
				return p.err
			}
			return nil
		},
	}
	f := c.Flags()
	addClientFlags(f, &cf, "default", "`namespace` to claim in")
	addResultFlags(f, &rf, "one-step claim: the result to store")
	f.StringVar(&fingerprint, "fingerprint", "", "SHA-256 of the canonical request bytes, in `hex`")
	f.StringVar(&place, "place", "", "who is claiming: a gate, a node, a relay (`name`)")
	f.StringVar(&expiresAt, "expires-at", "", "forget the key at this `time` (RFC 3339, or a duration from now) instead of after the namespace's retention")
	f.DurationVar(&wait, "wait", 0, "when the key is pending, wait up to this `duration` for its claim to end (one key only)")
	return c
}

// claimAll sends the claims, one alone or several in one batch, and reads
// back with Get each result the batch's answer left out (over the server's
// max_batch_result), so that every result printed is whole.
func claimAll(ctx context.Context, svc spent.Service, claims []spent.Claim) ([]spent.Answer, error) {
	var res []spent.Answer
	if len(claims) == 1 {
		r, err := svc.Claim(ctx, claims[0])
		if err != nil {
			return nil, err
		}
		res = []spent.Answer{r}
	} else {
		var err error
		if res, err = svc.ClaimBatch(ctx, claims); err != nil {
			return nil, err
		}
	}
	for i := range res {
		if !res[i].ResultOmitted {
			continue
		}
		rec, err := svc.Get(ctx, claims[i].Namespace, claims[i].Key)
		if err != nil {
			return nil, err
		}
		if rec.Seq == res[i].Record.Seq {
			res[i].Record.Result, res[i].ResultOmitted = rec.Result, false
		}
	}
	return res, nil
}

func (m *Main) completeCommand() *cobra.Command {
	var (
		cf  clientFlags
		rf  resultFlags
		seq string
	)
	c := &cobra.Command{
		Use:   "complete [flags] KEY...",
		Short: "Store the result of a fresh two-step claim",
		Long: `Store the result of a fresh two-step claim, which makes its record complete:
later claims of the key are replayed (echo) or refused (refuse).

With --seq (the seq the fresh claim printed) the holder may complete at any time
while the record lives; without it only while the lease runs.`,
		Example: `  spent complete order-1 --result '{"status":"paid"}' --seq 1:42`,
		Args:    minArgs(1, "KEY"),
		RunE: func(c *cobra.Command, keys []string) error {
			result, err := rf.read(c, m.Stdin)
			if err != nil {
				return err
			}
			if result == nil {
				result = []byte{}
			}
			s, err := parseSeqFlag(seq)
			if err != nil {
				return err
			}
			m.run = func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, cf.timeout)
				defer cancel()
				svc := m.service(&cf)
				p := m.printer(cf.json)
				for _, k := range keys {
					rec, err := svc.Complete(ctx, spent.Completion{Namespace: cf.namespace, Key: k, Seq: s, Result: result})
					if err != nil {
						return err
					}
					p.record(k, "completed", rec)
				}
				return p.err
			}
			return nil
		},
	}
	f := c.Flags()
	addClientFlags(f, &cf, "default", "`namespace` of the keys")
	addResultFlags(f, &rf, "the result to store (empty when neither is given)")
	f.StringVar(&seq, "seq", "", "the `node:counter` seq of the fresh claim")
	return c
}

func (m *Main) releaseCommand() *cobra.Command {
	var (
		cf  clientFlags
		seq string
	)
	c := &cobra.Command{
		Use:   "release [flags] KEY...",
		Short: "Roll back a fresh two-step claim, forgetting its key",
		Long: `Roll back a fresh two-step claim: its record is deleted, so the next claim of
the key is fresh. Use it when the request was rejected for a reason that must
not burn the key.`,
		Example: `  spent release order-1 --seq 1:42`,
		Args:    minArgs(1, "KEY"),
		RunE: func(c *cobra.Command, keys []string) error {
			s, err := parseSeqFlag(seq)
			if err != nil {
				return err
			}
			m.run = func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, cf.timeout)
				defer cancel()
				svc := m.service(&cf)
				p := m.printer(cf.json)
				for _, k := range keys {
					if err := svc.Release(ctx, spent.Release{Namespace: cf.namespace, Key: k, Seq: s}); err != nil {
						return err
					}
					p.released(cf.namespace, k, "")
				}
				return p.err
			}
			return nil
		},
	}
	f := c.Flags()
	addClientFlags(f, &cf, "default", "`namespace` of the keys")
	f.StringVar(&seq, "seq", "", "the `node:counter` seq of the fresh claim")
	return c
}

func (m *Main) getCommand() *cobra.Command {
	var cf clientFlags
	c := &cobra.Command{
		Use:   "get [flags] KEY...",
		Short: "Print the live record of keys",
		Long: `Print the live record of each key: when and where it was first seen, its state,
its result and when it will be forgotten. A key without a live record is an
error (not_found, exit 7).`,
		Example: `  spent get order-1
  spent get --json -n tickets ticket-42`,
		Args: minArgs(1, "KEY"),
		RunE: func(c *cobra.Command, keys []string) error {
			m.run = func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, cf.timeout)
				defer cancel()
				svc := m.service(&cf)
				p := m.printer(cf.json)
				for _, k := range keys {
					rec, err := svc.Get(ctx, cf.namespace, k)
					if err != nil {
						return err
					}
					p.record(k, "", rec)
				}
				return p.err
			}
			return nil
		},
	}
	addClientFlags(c.Flags(), &cf, "default", "`namespace` of the keys")
	return c
}

func (m *Main) unknownCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "unknown",
		Short: "List and resolve unknown outcomes (operators, admin token)",
		Long: `An unknown outcome is a pending two-step claim whose lease ran out in a
namespace with on_lease_expiry = "hold": the claimer may or may not have done
its side effect. Later claims of the key are answered in_progress until an
operator finds out what happened and resolves it, completing the record with
the real result or releasing it. Both subcommands need an admin token.
Resolve before the record expires (the namespace's retention).`,
	}
	c.AddCommand(m.unknownListCommand(), m.unknownResolveCommand())
	return c
}

func (m *Main) unknownListCommand() *cobra.Command {
	var (
		cf    clientFlags
		limit int
	)
	c := &cobra.Command{
		Use:   "list [flags]",
		Short: "List unknown outcomes, oldest lease first",
		Example: `  spent unknown list
  spent unknown list -n payments --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if limit < 1 || limit > spent.MaxBatch {
				return usagef("--limit %d: want 1 to %d", limit, spent.MaxBatch)
			}
			m.run = func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, cf.timeout)
				defer cancel()
				recs, err := m.service(&cf).Unknown(ctx, cf.namespace, limit)
				if err != nil {
					return err
				}
				p := m.printer(cf.json)
				p.unknown(recs)
				return p.err
			}
			return nil
		},
	}
	addClientFlags(c.Flags(), &cf, "", "list only this `namespace` (default: all hold namespaces)")
	c.Flags().IntVar(&limit, "limit", 100, "list at most this many `records`")
	return c
}

func (m *Main) unknownResolveCommand() *cobra.Command {
	var (
		cf                clientFlags
		rf                resultFlags
		seq               string
		complete, release bool
	)
	c := &cobra.Command{
		Use:   "resolve [flags] HASH",
		Short: "Resolve an unknown outcome by its hash: --complete with the result, or --release",
		Long: `Resolve an unknown outcome, addressed by the hash "spent unknown list" printed.

--complete stores the result the side effect really had (later claims are
replayed); --release forgets the key (the side effect did not happen, and the
next claim is fresh). Both are sent with force, which needs an admin token.
--seq makes sure that the record is still the one that was listed.`,
		Example: `  spent unknown resolve -n payments 5f0c...e1 --complete --result '{"status":"paid"}'
  spent unknown resolve -n payments 5f0c...e1 --release --seq 1:42`,
		Args: exactArgs(1, "one HASH"),
		RunE: func(c *cobra.Command, args []string) error {
			h, err := spent.ParseHash(args[0])
			if err != nil {
				return usagef("HASH %q: %w", args[0], err)
			}
			s, err := parseSeqFlag(seq)
			if err != nil {
				return err
			}
			result, err := rf.read(c, m.Stdin)
			if err != nil {
				return err
			}
			if release && result != nil {
				return usagef("--release takes no result")
			}
			if result == nil {
				result = []byte{}
			}
			m.run = func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, cf.timeout)
				defer cancel()
				svc := m.service(&cf)
				p := m.printer(cf.json)
				if release {
					if err := svc.Release(ctx, spent.Release{Namespace: cf.namespace, Hash: h, Seq: s, Force: true}); err != nil {
						return err
					}
					p.released(cf.namespace, "", h.String())
					return p.err
				}
				rec, err := svc.Complete(ctx, spent.Completion{Namespace: cf.namespace, Hash: h, Seq: s, Result: result, Force: true})
				if err != nil {
					return err
				}
				p.record("", "completed", rec)
				return p.err
			}
			return nil
		},
	}
	f := c.Flags()
	addClientFlags(f, &cf, "default", "`namespace` of the record")
	addResultFlags(f, &rf, "with --complete: the result to store")
	f.BoolVar(&complete, "complete", false, "complete the record with the result")
	f.BoolVar(&release, "release", false, "release the record, forgetting the key")
	f.StringVar(&seq, "seq", "", "only if the record still carries this `node:counter` seq")
	c.MarkFlagsOneRequired("complete", "release")
	c.MarkFlagsMutuallyExclusive("complete", "release")
	return c
}

func parseSeqFlag(s string) (spent.Seq, error) {
	if s == "" {
		return spent.Seq{}, nil
	}
	seq, err := spent.ParseSeq(s)
	if err != nil {
		return seq, usagef("--seq %q: want node:counter as printed by a fresh claim", s)
	}
	return seq, nil
}
