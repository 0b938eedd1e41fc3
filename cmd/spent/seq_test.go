package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestSeqCommand runs spent seq against a real server on the embedded
// store: the last N, around a counter and a range, as text and --json, and
// the refusals with their exit statuses.
func TestSeqCommand(t *testing.T) {
	_, claim, admin := serveWithTokens(t, `
node = 3

[namespaces.default]
store_raw_key = true`)
	var seqs []string
	for i := range 10 {
		l := parseOne(t, MustRun(t, claim, "claim", "--json", fmt.Sprint("order-", i), "--result", fmt.Sprint("paid ", i)))
		seqs = append(seqs, l.Seq)
	}
	counter := func(i int) string { return strings.TrimPrefix(seqs[i], "3:") }

	t.Run("LastAsText", func(t *testing.T) {
		out := MustRun(t, admin, "seq", "--node", "3", "--last", "3")
		contains(t, "seq --last 3", out, "SEQ", "RESULT_LEN", seqs[7], seqs[8], seqs[9], "complete", "default")
		if strings.Contains(out, seqs[6]+" ") || strings.Contains(out, "order-") {
			t.Fatalf("seq --last 3: got\n%s\nwant neither %s nor a raw key", out, seqs[6])
		}
		if i, j := strings.Index(out, seqs[7]), strings.Index(out, seqs[9]); i > j {
			t.Fatalf("seq --last 3: got %s after %s, want ascending counters", seqs[7], seqs[9])
		}
	})
	t.Run("AroundAsJSON", func(t *testing.T) {
		out := MustRun(t, admin, "seq", "--node", "3", "--around", counter(5), "--limit", "4", "--json")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 {
			t.Fatalf("seq --around --json: got %d lines, want 4:\n%s", len(lines), out)
		}
		for i, s := range lines {
			var l struct {
				Seq       string
				Key       string
				Result    *string
				ResultLen *int `json:"result_len"`
			}
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatal(err)
			}
			if l.Seq != seqs[3+i] || l.Key != "" || l.Result != nil || l.ResultLen == nil || *l.ResultLen != len("paid 3") {
				t.Fatalf("line %d: got %s, want seq %s, no key, no result, result_len %d", i, s, seqs[3+i], len("paid 3"))
			}
		}
	})
	t.Run("Range", func(t *testing.T) {
		out := MustRun(t, admin, "seq", "--node", "3", "--from", counter(1), "--to", counter(2), "--json")
		if ls := parseLines(t, out); len(ls) != 2 || ls[0].Seq != seqs[1] || ls[1].Seq != seqs[2] {
			t.Fatalf("seq --from --to: got %v, want %s and %s", ls, seqs[1], seqs[2])
		}
		contains(t, "seq of another node", MustRun(t, admin, "seq", "--node", "4", "--last", "10"), "no records of node 4")
	})
	for _, tc := range []struct {
		name string
		e    env
		args []string
		code int
	}{
		{"NoNode", admin, []string{"seq", "--last", "3"}, 2},
		{"TwoModes", admin, []string{"seq", "--node", "3", "--last", "3", "--around", "5"}, 2},
		{"NoMode", admin, []string{"seq", "--node", "3"}, 2},
		{"LastOverMax", admin, []string{"seq", "--node", "3", "--last", "10001"}, 2},
		{"LimitWithLast", admin, []string{"seq", "--node", "3", "--last", "3", "--limit", "2"}, 2},
		{"FromAfterTo", admin, []string{"seq", "--node", "3", "--from", "9", "--to", "3"}, 2},
		{"ClaimToken", claim, []string{"seq", "--node", "3", "--last", "3"}, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := Run(t, tc.e, tc.args...); r.Code != tc.code {
				t.Fatalf("spent %s: got exit %d (stderr %q), want %d", strings.Join(tc.args, " "), r.Code, r.Stderr, tc.code)
			}
		})
	}
}

// TestSeqCommandsOfTheDocs runs every spent seq command of docs/operations.md
// ("Introspection by seq") as written, against a server whose node is 7.
func TestSeqCommandsOfTheDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Introspection by seq\n")
	if start < 0 {
		t.Fatal(`docs/operations.md has no "## Introspection by seq" section`)
	}
	section := doc[start+3:]
	section = section[:strings.Index(section, "\n## ")]
	var cmds [][]string
	for _, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "spent seq ") {
			continue
		}
		l, _, _ = strings.Cut(l, "  #")
		cmds = append(cmds, strings.Fields(l)[1:])
	}
	if len(cmds) < 3 {
		t.Fatalf("got %d spent seq commands in the section, want at least 3", len(cmds))
	}
	cfg := WriteConfig(t, `
node = 7

[namespaces.default]

[[tokens]]
token = "admin-token-0123456789"
scopes = ["admin"]
`)
	s := MustServe(t, t.TempDir(), nil, nil, "--config", cfg)
	admin := env{"SPENT_ADDR": s.Addr, "SPENT_TOKEN": "admin-token-0123456789"}
	for i := range 5 {
		MustRun(t, admin, "claim", fmt.Sprint("doc-", i), "--result", "ok")
	}
	for _, args := range cmds {
		t.Run(strings.Join(args[1:], " "), func(t *testing.T) {
			out := MustRun(t, admin, args...)
			// --json prints nothing when nothing is in range.
			if !strings.Contains(out, "7:") && !strings.Contains(out, "no records of node 7") && out != "" {
				t.Fatalf("spent %s: got\n%s\nwant records of node 7, or none", strings.Join(args, " "), out)
			}
		})
	}
}
