package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/atomicfile"
)

// Exit statuses. Errors that carry a spent error code exit with that code's
// status (see exitCodes), so that scripts can tell a retryable outage from a
// final refusal without parsing text.
const (
	// ExitOK is the status of a command that did its work; every claim
	// outcome, fresh or not, is a success.
	ExitOK = 0
	// ExitError is the status of an error without a more precise code
	// (spent.EInternal among them).
	ExitError = 1
	// ExitUsage is the status of bad flags, arguments or configuration.
	ExitUsage = 2
)

// exitCodes maps each spent error code to its exit status. The table is part
// of the command's interface: entries are added, never renumbered.
var exitCodes = map[string]int{
	spent.EInternal:         ExitError,
	spent.EInvalid:          3,
	spent.EUnknownNamespace: 4,
	spent.EKeyTooLong:       5,
	spent.ETooLarge:         6,
	spent.ENotFound:         7,
	spent.ENotPending:       8,
	spent.ESeqMismatch:      9,
	spent.ELeaseExpired:     10,
	spent.EUnauthorized:     11,
	spent.EForbidden:        12,
	spent.EUnavailable:      13,
	spent.EExpiryTooLong:    14,
	spent.ENoSeqIndex:       15,
}

// ExitCode returns the exit status for err: ExitOK for nil, ExitUsage for a
// usage or configuration error, the status of err's spent error code
// otherwise. The HTTP client reports a server it cannot reach as
// spent.EUnavailable.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	if c, ok := exitCodes[spent.ErrorCode(err)]; ok {
		return c
	}
	return ExitError
}

// usageError marks bad flags, arguments or configuration.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// Main is one run of the spent program. Build it with [NewMain], then call
// ParseFlags, Run and Close, or Execute, which does all three. End-to-end
// tests build one with their own Stdout, Stderr and Getenv.
type Main struct {
	// Stdin, Stdout and Stderr are the command's streams.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads environment variables (SPENT_ADDR, SPENT_TOKEN and the
	// config file's token_env).
	Getenv func(string) string
	// WrapHandler, when set, wraps the serve command's HTTP handler. For
	// tests, which use it to know that a request has reached the handler:
	// from then on a shutdown lets it finish. (A connection whose request
	// has been read but has not reached the handler when the shutdown starts
	// is closed unanswered by net/http.)
	WrapHandler func(http.Handler) http.Handler
	// WrapStore, when set, wraps the store that serve and epoch retire
	// open. For tests, which use it to fail chosen store calls.
	WrapStore func(spent.Store) spent.Store
	// WriteFile, when set, replaces the atomic write of the files of the
	// data directory (the fence, the secret). For tests, which use it to
	// fail a write.
	WriteFile func(path string, data []byte, perm os.FileMode) error

	// run is the selected command's work, set by ParseFlags.
	run func(ctx context.Context) error

	mu      sync.Mutex
	closers []func() error
}

// NewMain returns a Main on the process's standard streams and environment.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// Execute parses args, runs the selected command and closes what it opened.
// It reports an error on Stderr and returns the exit status.
func (m *Main) Execute(ctx context.Context, args []string) int {
	err := m.ParseFlags(ctx, args)
	if err == nil {
		err = m.Run(ctx)
	}
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		m.report(err)
	}
	return ExitCode(err)
}

// report writes err to Stderr with its code.
func (m *Main) report(err error) {
	msg := err.Error()
	if !strings.HasPrefix(msg, "spent: ") {
		msg = "spent: " + msg
	}
	fmt.Fprintln(m.Stderr, msg)
}

// ParseFlags parses args (without the program name) and selects the command
// to run. A --help request selects nothing: Run then does nothing. Errors are
// usage errors: bad flags, arguments or configuration.
func (m *Main) ParseFlags(ctx context.Context, args []string) error {
	if args == nil {
		args = []string{}
	}
	root := m.rootCommand()
	root.SetArgs(args)
	root.SetIn(m.Stdin)
	root.SetOut(m.Stdout)
	root.SetErr(m.Stderr)
	if _, err := root.ExecuteContextC(ctx); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			return err
		}
		// A command that does its work in RunE (spent token, spent wallet)
		// failed at that work: its error keeps its own status.
		var re *runError
		if errors.As(err, &re) {
			return re.err
		}
		return &usageError{err}
	}
	return nil
}

// Run runs the command ParseFlags selected. For serve it returns once ctx is
// cancelled and the server has shut down gracefully.
func (m *Main) Run(ctx context.Context) error {
	if m.run == nil {
		return nil
	}
	return m.run(ctx)
}

// Close releases whatever Run left open, in reverse order. It is safe to call
// more than once.
func (m *Main) Close() error {
	m.mu.Lock()
	cs := m.closers
	m.closers = nil
	m.mu.Unlock()
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		errs = append(errs, cs[i]())
	}
	return errors.Join(errs...)
}

// onClose registers f to run at Close, once.
func (m *Main) onClose(f func() error) {
	m.mu.Lock()
	m.closers = append(m.closers, f)
	m.mu.Unlock()
}

// writeFile writes a file of the data directory atomically, through
// m.WriteFile when set.
func (m *Main) writeFile(path string, data []byte, perm os.FileMode) error {
	if m.WriteFile != nil {
		return m.WriteFile(path, data, perm)
	}
	return atomicfile.WriteFile(path, data, perm)
}

func (m *Main) getenv(k string) string {
	if m.Getenv == nil {
		return ""
	}
	return m.Getenv(k)
}

// rootCommand builds the command tree. Each command's RunE only records the
// work in m.run, so that parsing stays separate from running.
func (m *Main) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "spent",
		Short: "spent is a double-spend ledger: it lets a service accept something exactly once",
		Long: `spent is a double-spend ledger: the smallest durable memory that lets a service
accept something exactly once. "spent serve" runs the server on the embedded
store; the other commands talk to a running server.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// "spent --version" prints what "spent version" does.
		Version: buildVersion(),
	}
	root.SetVersionTemplate("{{.Version}}")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%s: %w (see %s --help)", c.CommandPath(), err, c.CommandPath())}
	})
	serve := m.envFlags(m.serveCommand())
	root.AddCommand(
		serve,
		m.claimCommand(),
		m.completeCommand(),
		m.releaseCommand(),
		m.getCommand(),
		m.unknownCommand(),
		m.seqCommand(),
		m.auditCommand(),
		m.benchCommand(),
		m.sizeCommand(),
		newTokenCmd(),
		newWalletCmd(),
		m.epochCommand(),
		m.versionCommand(),
		environmentTopic(serve),
		exitStatusTopic(),
	)
	// epoch retire finds the server's files as serve does.
	if retire, _, err := root.Find([]string{"epoch", "retire"}); err == nil {
		m.envFlags(retire, "config", "data", "store")
	}
	markRunErrors(root)
	return root
}

// runError marks an error returned by a command's RunE that is not a usage
// error: the command got past its flags and arguments and failed at its
// work. Errors cobra makes itself (an unknown command, a missing required
// flag) stay usage errors.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// markRunErrors wraps the RunE of c and of every command below it so that
// their errors other than usage errors are marked as runErrors.
func markRunErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			var ue *usageError
			if err == nil || errors.As(err, &ue) {
				return err
			}
			return &runError{err}
		}
	}
	for _, sub := range c.Commands() {
		markRunErrors(sub)
	}
}

// minArgs is cobra.MinimumNArgs with a usage error that names the argument.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s: missing %s (see %s --help)", c.CommandPath(), what, c.CommandPath())
		}
		return nil
	}
}

// exactArgs is cobra.ExactArgs with a usage error that names the arguments.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s: want %s, got %d arguments (see %s --help)", c.CommandPath(), what, len(args), c.CommandPath())
		}
		return nil
	}
}
