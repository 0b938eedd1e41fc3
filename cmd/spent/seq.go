package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
)

// seqCommand is "spent seq": the records one node wrote, by seq, from the
// server's index (POST /v1/seq).
func (m *Main) seqCommand() *cobra.Command {
	var (
		cf                      clientFlags
		node                    uint32
		last, limit             int
		around, from, to        uint64
		hasFrom, hasTo, hasNode bool
	)
	c := &cobra.Command{
		Use:   "seq --node N (--last N | --around C [--limit L] | --from A [--to B] [--limit L])",
		Short: "List the records a node wrote, by seq (operators, admin token)",
		Long: `List the live records one node wrote, in the order of their seq counters,
from the index every store keeps: the last N, those around a counter (half
before it, half from it on), or those of a range of counters. Records come
without their result bytes (the result's length is shown) and without raw
keys. It answers from an index, in time that grows with what it lists, not
with what the store holds, at most 10,000 records a call. It needs an admin
token over all namespaces.`,
		Example: `  spent seq --node 7 --last 10000
  spent seq --node 7 --around 8400000 --limit 1000
  spent seq --node 7 --from 8399500 --to 8400500 --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			f := c.Flags()
			hasNode, hasFrom, hasTo = f.Changed("node"), f.Changed("from"), f.Changed("to")
			if !hasNode || node == 0 {
				return usagef("--node: give the node to list, 1 or more")
			}
			modes := 0
			for _, set := range []bool{f.Changed("last"), f.Changed("around"), hasFrom || hasTo} {
				if set {
					modes++
				}
			}
			if modes != 1 {
				return usagef("give exactly one of --last, --around, and --from/--to")
			}
			if f.Changed("last") && (last < 1 || last > spent.MaxSeqList) {
				return usagef("--last %d: want 1 to %d", last, spent.MaxSeqList)
			}
			if f.Changed("limit") && (f.Changed("last") || limit < 1 || limit > spent.MaxSeqList) {
				return usagef("--limit %d: want 1 to %d, with --around or --from/--to", limit, spent.MaxSeqList)
			}
			if f.Changed("around") && around == 0 {
				return usagef("--around: want a counter of 1 or more")
			}
			if hasTo && to == 0 {
				return usagef("--to: want a counter of 1 or more")
			}
			if hasTo && from > to {
				return usagef("--from %d is after --to %d", from, to)
			}
			req := spent.SeqRequest{Node: node, Last: last, Around: around, From: from, To: to, Limit: limit}
			if hasFrom && from == 0 && !hasTo {
				// From the first counter on: the server needs some
				// bound to tell a range from nothing.
				req.From = 1
			}
			m.run = func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, cf.timeout)
				defer cancel()
				cl, err := m.seqClient(&cf)
				if err != nil {
					return err
				}
				a, err := cl.Seq(ctx, req)
				if err != nil {
					return err
				}
				p := m.printer(cf.json)
				p.seq(&a)
				return p.err
			}
			return nil
		},
	}
	addClientFlags(c.Flags(), &cf, "", "not used: the records of every namespace are listed")
	_ = c.Flags().MarkHidden("namespace")
	c.Flags().Uint32Var(&node, "node", 0, "list the records of this `node` (required)")
	c.Flags().IntVar(&last, "last", 0, "list the node's last `N` records (at most 10000)")
	c.Flags().Uint64Var(&around, "around", 0, "list the records around this seq `counter`")
	c.Flags().Uint64Var(&from, "from", 0, "list from this seq `counter` on (included)")
	c.Flags().Uint64Var(&to, "to", 0, "list up to this seq `counter` (included)")
	c.Flags().IntVar(&limit, "limit", 0, "with --around or --from/--to: at most this many `records` (default 100, at most 10000)")
	return c
}

// seqClient returns the HTTP client for cf, which alone knows POST /v1/seq.
func (m *Main) seqClient(cf *clientFlags) (*sphttp.Client, error) {
	switch s := m.service(cf).(type) {
	case *sphttp.Client:
		return s, nil
	case brokenService:
		return nil, s.err
	default:
		return nil, spent.Errorf(spent.EInternal, "client of type %T", s)
	}
}

// seqRecordJSON is the --json form of a record listed by seq.
type seqRecordJSON struct {
	recordJSON
	ResultLen int `json:"result_len"`
}

// seq prints the records of a's node: a table, or one JSON object a line.
func (p *printer) seq(a *spent.SeqAnswer) {
	if p.json {
		for i := range a.Records {
			r := &a.Records[i]
			p.emitJSON(seqRecordJSON{recordJSON: newRecordJSON("", &r.Record), ResultLen: r.ResultLen})
		}
		return
	}
	if len(a.Records) == 0 {
		p.printf("no records of node %d in that range\n", a.Node)
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tSTATE\tNAMESPACE\tHASH\tFIRST_SEEN\tEXPIRES_AT\tPLACE\tRESULT_LEN")
	for _, r := range a.Records {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Seq, r.State, r.Namespace, r.Hash,
			formatTime(r.FirstSeen), formatTime(r.ExpiresAt), dash(r.Place), r.ResultLen)
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
}
