package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/audit"
	"github.com/spentledger/spent/node"
)

// ExitDoubles is the status of spent audit when it found a key accepted
// fresh twice. It is ExitError's number: a double is what the audit exists
// to report, and scripts test for a non-zero status.
const ExitDoubles = ExitError

// openAudit opens the acceptance audit log of cfg, when it has an [audit]
// dir, and sets it as the ledger's auditor; the log closes after the node.
func (m *Main) openAudit(cfg *serveConfig, log *slog.Logger) error {
	if cfg.Audit.Dir == "" {
		return nil
	}
	ac := cfg.Audit
	ac.Node = cfg.Ledger.Node
	l, err := audit.Open(ac)
	if err != nil {
		return fmt.Errorf("%w (the [audit] dir must be a writable directory on this machine's disk; see docs/configuration.md)", err)
	}
	m.onClose(l.Close)
	cfg.Ledger.Audit = l
	log.Info("acceptance audit on", "file", l.Path())
	return nil
}

func (m *Main) auditCommand() *cobra.Command {
	var (
		asJSON    bool
		namespace string
		key       string
		hashText  string
		data      string
		maxEvents int
	)
	c := &cobra.Command{
		Use:   "audit PATH... [--json] [--namespace NS --key KEY | --hash HEX]",
		Short: "Find keys accepted fresh twice in the audit logs of all nodes; look one key up",
		Long: `Read the acceptance audit logs (the [audit] dir of every node: give the
directories or the files, copied from all machines), merge them and report every
key accepted fresh more than once while its first acceptance still held it:
a double acceptance, such as a claim acknowledged by a Redis primary that
failed over before replicating it, then claimed again. Each is printed with
both acceptances: seq, node, place and time.

A re-acceptance is not a double when the first record had expired, was
released, or was a pending claim of a retake namespace whose lease had run
out and that was never completed (docs/operations.md, "After a failover: run
the audit").

With --key (and --namespace) or --hash, print instead every event of that
key: which node and place accepted it, under which seq, and how it ended.
--key hashes the key with the secret of the data directory (--data), as the
server does; it must be the servers' shared secret.

Exit status: 0 no double found (or the key's events printed), 1 doubles
found, 2 bad flags, 3 a log unreadable or damaged (the message names the file
and offset), 7 no event of the key looked up.`,
		Example: `  spent audit /var/lib/spent/audit node2-audit/
  spent audit --json audit-logs/
  spent audit audit-logs/ --namespace payments --key order-8400017 --data /var/lib/spent
  spent audit audit-logs/ --hash b5636d1ba5275f03eb9dec99e21176dc`,
		Args: minArgs(1, "an audit log file or directory"),
		RunE: func(c *cobra.Command, paths []string) error {
			if key != "" && hashText != "" {
				return usagef("spent audit: --key and --hash: give one")
			}
			if key != "" && namespace == "" {
				return usagef("spent audit: --key needs --namespace (the key's hash depends on it)")
			}
			if maxEvents < 1 {
				return usagef("spent audit: --max-events %d: must be positive", maxEvents)
			}
			var h spent.Hash
			lookup := key != "" || hashText != ""
			if hashText != "" {
				var err error
				if h, err = spent.ParseHash(hashText); err != nil {
					return usagef("spent audit: --hash: %v", err)
				}
			}
			if key != "" {
				secret, err := readSecret(data)
				if err != nil {
					return usagef("spent audit: --key: %v", err)
				}
				h = spent.KeyHash(secret, namespace, key)
			}
			m.run = func(context.Context) error {
				evs, warns, err := audit.Read(paths, audit.ReadOptions{MaxEvents: maxEvents})
				if err != nil {
					return &spent.Error{Code: spent.EInvalid, Message: "spent audit: cannot read the logs", Err: err}
				}
				for _, w := range warns {
					fmt.Fprintf(m.Stderr, "spent audit: warning: %s\n", w)
				}
				if lookup {
					return m.auditLookup(evs, namespace, h, asJSON)
				}
				return m.auditDoubles(evs, asJSON)
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line")
	f.StringVarP(&namespace, "namespace", "n", "", "the `namespace` of the key looked up")
	f.StringVar(&key, "key", "", "look this `key` up (hashed with the data directory's secret)")
	f.StringVar(&hashText, "hash", "", "look up the key with this `hash` (32 hex digits, as the server shows it)")
	f.StringVar(&data, "data", defaultData, "the data `directory` whose secret --key uses")
	f.IntVar(&maxEvents, "max-events", audit.DefaultMaxEvents, "refuse to read more than this many `events` (memory bound)")
	return c
}

// readSecret reads the secret of the data directory dir, which must exist:
// the audit never makes one.
func readSecret(dir string) ([]byte, error) {
	path := filepath.Join(dir, node.SecretFile)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("cannot read the secret %s: %w (give the servers' data directory with --data, or look up by --hash)", path, err)
	}
	secret, _, err := openDataDir(dir, noRand{})
	return secret, err
}

// noRand is a random source that fails: a secret is read, never made.
type noRand struct{}

func (noRand) Read([]byte) (int, error) { return 0, errors.New("no secret to read") }

// eventJSON is the --json form of an audit event.
type eventJSON struct {
	Kind       string     `json:"kind"`
	Seq        string     `json:"seq"`
	Node       uint32     `json:"node"`
	Time       time.Time  `json:"time"`
	Place      string     `json:"place,omitempty"`
	State      string     `json:"state,omitempty"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
}

func newEventJSON(e *spent.AuditEvent) eventJSON {
	v := eventJSON{Kind: string(e.Kind), Seq: e.Seq.String(), Node: e.Node, Time: e.Time}
	if e.Kind == spent.AuditAccepted {
		v.Place, v.State, v.ExpiresAt = e.Place, e.State.String(), &e.ExpiresAt
		if !e.LeaseUntil.IsZero() {
			v.LeaseUntil = &e.LeaseUntil
		}
	}
	return v
}

// doubleJSON is the --json form of a double acceptance.
type doubleJSON struct {
	Namespace string    `json:"namespace"`
	Hash      string    `json:"hash"`
	First     eventJSON `json:"first"`
	Second    eventJSON `json:"second"`
}

// auditDoubles prints the doubles among evs and fails when there are any.
func (m *Main) auditDoubles(evs []spent.AuditEvent, asJSON bool) error {
	ds := audit.Doubles(evs)
	enc := json.NewEncoder(m.Stdout)
	for _, d := range ds {
		if asJSON {
			if err := enc.Encode(doubleJSON{Namespace: d.Namespace, Hash: d.Hash.String(), First: newEventJSON(&d.First), Second: newEventJSON(&d.Second)}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(m.Stdout, "double  namespace %s  hash %s\n", spent.QuoteInput(d.Namespace), d.Hash)
		printEvent(m.Stdout, "first ", &d.First)
		printEvent(m.Stdout, "second", &d.Second)
	}
	if len(ds) > 0 {
		return fmt.Errorf("spent audit: %d double acceptances in %d events: each key above was accepted fresh twice (see docs/operations.md, \"After a failover: run the audit\")", len(ds), len(evs))
	}
	if !asJSON {
		fmt.Fprintf(m.Stdout, "no double acceptance in %d events\n", len(evs))
	}
	return nil
}

// auditLookup prints the events of one key.
func (m *Main) auditLookup(evs []spent.AuditEvent, namespace string, h spent.Hash, asJSON bool) error {
	found := audit.Find(evs, namespace, h)
	if len(found) == 0 {
		return spent.Errorf(spent.ENotFound, "no event of hash %s in the %d events read: no node logged accepting it (check the namespace, the secret, and that every node's log was given)", h, len(evs))
	}
	enc := json.NewEncoder(m.Stdout)
	for i := range found {
		e := &found[i]
		if asJSON {
			v := struct {
				Namespace string `json:"namespace"`
				Hash      string `json:"hash"`
				eventJSON
			}{e.Namespace, e.Hash.String(), newEventJSON(e)}
			if err := enc.Encode(v); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(m.Stdout, "namespace %s  hash %s\n", spent.QuoteInput(e.Namespace), e.Hash)
		printEvent(m.Stdout, "", e)
	}
	return nil
}

// printEvent prints one event as an indented line.
func printEvent(w io.Writer, label string, e *spent.AuditEvent) {
	if label != "" {
		label += "  "
	}
	fmt.Fprintf(w, "  %s%-9s seq %s  node %d  at %s", label, e.Kind, e.Seq, e.Node, e.Time.UTC().Format(time.RFC3339Nano))
	if e.Kind == spent.AuditAccepted {
		fmt.Fprintf(w, "  place %s  %s  expires %s", spent.QuoteInput(e.Place), e.State, e.ExpiresAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)
}
