package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/wallet"
)

// walletFlags are the flags the wallet commands share.
type walletFlags struct {
	file    string
	json    bool
	timeout time.Duration
	minAge  time.Duration
	tls     clientTLS
}

func addWalletFlags(f *pflag.FlagSet, wf *walletFlags) {
	def := os.Getenv("SPENT_WALLET")
	if def == "" {
		def = "spent-wallet.json"
	}
	f.StringVar(&wf.file, "wallet", def, "wallet `file` ($SPENT_WALLET sets the default)")
	f.BoolVar(&wf.json, "json", false, "print JSON instead of text")
	f.DurationVar(&wf.timeout, "timeout", 2*time.Minute, "give up after this `duration` (solving a challenge included)")
	f.DurationVar(&wf.minAge, "min-age", wallet.DefaultMinAge, "never spend a token younger than this `duration`")
	addClientTLSFlags(f, &wf.tls)
}

func (wf *walletFlags) open() (*wallet.Wallet, error) {
	o := wallet.DefaultOptions()
	o.MinAge = wf.minAge
	var err error
	if o.HTTPClient, err = wf.tls.httpClient(os.Getenv, 0); err != nil {
		return nil, err
	}
	return wallet.Open(wf.file, o)
}

// walletError is an error of a wallet command: its message starts with the
// command's name, once, and Unwrap keeps the cause for the exit status.
type walletError struct {
	msg string
	err error
}

func (e *walletError) Error() string { return e.msg }
func (e *walletError) Unwrap() error { return e.err }

// walletErr returns err with cmd ("wallet spend") as its one prefix: the
// wallet package's own "wallet: " goes (the report adds "spent: "), and a
// missing wallet file says how to make one. It returns nil for nil.
func (wf *walletFlags) walletErr(cmd string, err error) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "wallet: ")
	if errors.Is(err, wallet.ErrNoWallet) {
		msg = fmt.Sprintf("no wallet file at %s: create one with: spent wallet init --issuer URL --wallet %s", wf.file, wf.file)
	}
	return &walletError{msg: cmd + ": " + msg, err: err}
}

// issuerURL completes an issuer address given without a scheme
// ("127.0.0.1:7070") with http://, as the client commands do with --addr.
func issuerURL(s string) string {
	if !strings.Contains(s, "://") {
		return "http://" + s
	}
	return s
}

// walletState is what the commands print.
type walletState struct {
	Issuer    string        `json:"issuer"`
	Spendable uint64        `json:"spendable"`
	InFlight  uint64        `json:"in_flight"`
	Tokens    int           `json:"tokens"`
	Journal   int           `json:"journal"`
	Resume    *resumeReport `json:"resume,omitempty"`
	Charge    *uint64       `json:"charge,omitempty"`
	Received  []uint64      `json:"received,omitempty"`
}

type resumeReport struct {
	Finished int      `json:"finished"`
	Cleared  int      `json:"cleared"`
	Restored int      `json:"restored"`
	Kept     int      `json:"kept"`
	Errors   []string `json:"errors,omitempty"`
}

func stateOf(w *wallet.Wallet) walletState {
	s, f := w.Balance()
	return walletState{Issuer: w.Issuer(), Spendable: s, InFlight: f, Tokens: len(w.Coins()), Journal: len(w.Journal())}
}

func (wf *walletFlags) print(out io.Writer, st walletState) error {
	if wf.json {
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	if r := st.Resume; r != nil && (r.Finished+r.Cleared+r.Kept) > 0 {
		fmt.Fprintf(out, "resumed: %d finished, %d cleared (%d tokens restored), %d kept for the next resume\n", r.Finished, r.Cleared, r.Restored, r.Kept)
		for _, e := range r.Errors {
			fmt.Fprintf(out, "  %s\n", e)
		}
	}
	if st.Charge != nil {
		fmt.Fprintf(out, "paid %d\n", *st.Charge)
	}
	if st.Received != nil {
		fmt.Fprintf(out, "received tokens of %v\n", st.Received)
	}
	_, err := fmt.Fprintf(out, "balance %d spendable in %d tokens, %d in flight (%d journaled), issuer %s\n", st.Spendable, st.Tokens, st.InFlight, st.Journal, st.Issuer)
	return err
}

// resume resends the journal and reports it; an error only when the wallet
// could not be saved.
func resume(ctx context.Context, w *wallet.Wallet) (*resumeReport, error) {
	r, err := w.Resume(ctx)
	rep := &resumeReport{Finished: r.Finished, Cleared: r.Cleared, Restored: r.Restored, Kept: r.Kept}
	for _, e := range r.Errors {
		rep.Errors = append(rep.Errors, e.Error())
	}
	return rep, err
}

// newWalletCmd returns the "spent wallet" command tree: a value-token wallet
// (package wallet) for an ecash issuer, to be registered in the root
// command.
func newWalletCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "wallet",
		Short: "Hold ecash value tokens: issue them against proof of work, spend them with change",
		Long: `A wallet of ecash value tokens in one file, saved atomically, with a journal
of the requests in flight: before anything is sent, the exact request bytes
and the secrets needed to finish it are saved, and the token being spent
leaves the spendable set in that same save. "resume" resends every journaled
request byte for byte and finishes it with the issuer's replayed answer;
"issue" and "spend" resume first. A crash at any moment loses no value.

Tokens are spent oldest first and never before --min-age (60 s), and are
best fetched at the start of a session ("issue --count N"), so that issuance
and spending do not sit next to each other in time.

The file holds bearer tokens: keep it private (it is written with mode 0600).`,
		Args: exactArgs(0, "a subcommand"),
	}
	root.AddCommand(walletInitCmd(), walletIssueCmd(), walletBalanceCmd(), walletSpendCmd(), walletResumeCmd())
	return root
}

func walletInitCmd() *cobra.Command {
	var wf walletFlags
	var issuer string
	c := &cobra.Command{
		Use:     "init --issuer URL",
		Short:   "Create an empty wallet for an issuer",
		Example: `  spent wallet init --issuer https://issuer.example --wallet ~/.spent-wallet.json`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if issuer == "" {
				return usagef("wallet init: --issuer is required")
			}
			issuer = issuerURL(issuer)
			ctx, cancel := context.WithTimeout(c.Context(), wf.timeout)
			defer cancel()
			hc, err := wf.tls.httpClient(os.Getenv, 0)
			if err != nil {
				return err
			}
			if _, err := (&ecash.Client{URL: issuer, HTTPClient: hc}).Keys(ctx); err != nil {
				return wf.walletErr("wallet init", fmt.Errorf("the key list of the issuer at %s (is it serving [ecash]?): %w", issuer, err))
			}
			if err := wallet.Create(wf.file, issuer); err != nil {
				return wf.walletErr("wallet init", err)
			}
			w, err := wf.open()
			if err != nil {
				return wf.walletErr("wallet init", err)
			}
			defer w.Close()
			return wf.print(c.OutOrStdout(), stateOf(w))
		},
	}
	addWalletFlags(c.Flags(), &wf)
	c.Flags().StringVar(&issuer, "issuer", "", "issuer `URL` (scheme and host; http:// when host:port only)")
	return c
}

func walletIssueCmd() *cobra.Command {
	var wf walletFlags
	var count int
	c := &cobra.Command{
		Use:     "issue [--count N]",
		Short:   "Resume, then solve N proof-of-work challenges and obtain tokens for each",
		Example: `  spent wallet issue --count 3`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if count < 1 {
				return usagef("wallet issue: --count must be at least 1")
			}
			ctx, cancel := context.WithTimeout(c.Context(), wf.timeout)
			defer cancel()
			w, err := wf.open()
			if err != nil {
				return wf.walletErr("wallet issue", err)
			}
			defer w.Close()
			rep, err := resume(ctx, w)
			if err != nil {
				return wf.walletErr("wallet issue", err)
			}
			var got []uint64
			for range count {
				coins, err := w.Issue(ctx)
				if err != nil {
					return wf.walletErr("wallet issue", fmt.Errorf("%w (a journaled request is finished by \"spent wallet resume\")", err))
				}
				for _, k := range coins {
					got = append(got, k.Denomination)
				}
			}
			st := stateOf(w)
			st.Resume, st.Received = rep, got
			return wf.print(c.OutOrStdout(), st)
		},
	}
	addWalletFlags(c.Flags(), &wf)
	c.Flags().IntVar(&count, "count", 1, "how many challenges to solve")
	return c
}

func walletBalanceCmd() *cobra.Command {
	var wf walletFlags
	c := &cobra.Command{
		Use:   "balance",
		Short: "Print the spendable value and the value in flight (offline)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			w, err := wf.open()
			if err != nil {
				return wf.walletErr("wallet balance", err)
			}
			defer w.Close()
			return wf.print(c.OutOrStdout(), stateOf(w))
		},
	}
	addWalletFlags(c.Flags(), &wf)
	return c
}

func walletSpendCmd() *cobra.Command {
	var wf walletFlags
	c := &cobra.Command{
		Use:     "spend AMOUNT",
		Short:   "Resume, then pay AMOUNT with the oldest token worth it, taking the rest back as change",
		Example: `  spent wallet spend 3`,
		Args:    exactArgs(1, "one AMOUNT"),
		RunE: func(c *cobra.Command, args []string) error {
			amount, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return usagef("wallet spend: amount %q: want a whole number (%v)", args[0], err)
			}
			ctx, cancel := context.WithTimeout(c.Context(), wf.timeout)
			defer cancel()
			w, err := wf.open()
			if err != nil {
				return wf.walletErr("wallet spend", err)
			}
			defer w.Close()
			rep, err := resume(ctx, w)
			if err != nil {
				return wf.walletErr("wallet spend", err)
			}
			resp, change, err := w.Spend(ctx, amount)
			if err != nil {
				var ee *ecash.Error
				if errors.As(err, &ee) && ee.Final() {
					return wf.walletErr("wallet spend", fmt.Errorf("refused, final: %w", err))
				}
				return wf.walletErr("wallet spend", err)
			}
			st := stateOf(w)
			st.Resume, st.Charge = rep, &resp.Charge
			st.Received = []uint64{}
			for _, k := range change {
				st.Received = append(st.Received, k.Denomination)
			}
			return wf.print(c.OutOrStdout(), st)
		},
	}
	addWalletFlags(c.Flags(), &wf)
	return c
}

func walletResumeCmd() *cobra.Command {
	var wf walletFlags
	c := &cobra.Command{
		Use:   "resume",
		Short: "Resend every journaled request byte for byte and finish it",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(c.Context(), wf.timeout)
			defer cancel()
			w, err := wf.open()
			if err != nil {
				return wf.walletErr("wallet resume", err)
			}
			defer w.Close()
			rep, err := resume(ctx, w)
			if err != nil {
				return wf.walletErr("wallet resume", err)
			}
			st := stateOf(w)
			st.Resume = rep
			if err := wf.print(c.OutOrStdout(), st); err != nil {
				return err
			}
			if rep.Kept > 0 {
				return fmt.Errorf("wallet resume: %d requests still journaled (network errors or 5xx); run spent wallet resume again", rep.Kept)
			}
			return nil
		},
	}
	addWalletFlags(c.Flags(), &wf)
	return c
}
