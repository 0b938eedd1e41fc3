package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	spentcmd "github.com/spentledger/spent/cmd/spent"
)

// TestEnvSetsServeFlags: every serve flag may come from SPENT_ + its name;
// flags win over the environment, the environment over the file.
func TestEnvSetsServeFlags(t *testing.T) {
	t.Run("EnvSetsValueAndBeatsFile", func(t *testing.T) {
		// The file names a store nobody listens on and a namespace; the
		// environment names the file and an embedded store.
		dir := t.TempDir()
		cfg := WriteConfig(t, "[namespaces.tickets]\nmode = \"refuse\"\n\n[store]\nurl = \"redis://127.0.0.1:1\"\n")
		s := MustServe(t, dir, env{
			"SPENT_CONFIG": cfg,
			"SPENT_STORE":  "pebble://" + filepath.Join(dir, "from-env"),
		}, nil)
		out := MustRun(t, env{"SPENT_ADDR": s.Addr}, "claim", "-n", "tickets", "ticket-1", "--result", "ok")
		if !strings.Contains(out, "fresh") {
			t.Fatalf("claim in the file's namespace: got %q, want fresh", out)
		}
		if _, err := os.Stat(filepath.Join(dir, "from-env")); err != nil {
			t.Fatalf("the store of SPENT_STORE was not opened: %v; stderr:\n%s", err, s.Stderr)
		}
	})
	t.Run("FlagBeatsEnv", func(t *testing.T) {
		// MustServe passes --listen 127.0.0.1:0: a public SPENT_LISTEN
		// (refused without tokens) would stop the start.
		s := MustServe(t, t.TempDir(), env{"SPENT_LISTEN": "0.0.0.0:7"}, nil)
		if !strings.HasPrefix(s.Addr, "http://127.0.0.1:") {
			t.Fatalf("listening on %s, want the flag's 127.0.0.1", s.Addr)
		}
	})
	t.Run("EnvUsedWithoutFlag", func(t *testing.T) {
		cfg := WriteConfig(t, "listen = \"127.0.0.1:0\"\n")
		r := Run(t, env{"SPENT_LISTEN": "0.0.0.0:7"}, "serve", "--config", cfg, "--data", t.TempDir())
		if r.Code != spentcmd.ExitUsage {
			t.Fatalf("exit: got %d, want %d; stderr: %s", r.Code, spentcmd.ExitUsage, r.Stderr)
		}
		for _, want := range []string{`listen "0.0.0.0:7"`, "flags set from the environment: SPENT_LISTEN"} {
			if !strings.Contains(r.Stderr, want) {
				t.Fatalf("stderr: got %q, want it to contain %q", r.Stderr, want)
			}
		}
	})
	for _, tc := range []struct {
		name string
		env  env
		args []string
		want string
	}{
		{"BadValueNamesVariable", env{"SPENT_ALLOW_NON_DURABLE": "maybe"}, []string{"serve"}, `SPENT_ALLOW_NON_DURABLE: bad value for --allow-non-durable: invalid argument "maybe"`},
		{"NewFenceRefused", env{"SPENT_NEW_FENCE": "true"}, []string{"serve"}, "SPENT_NEW_FENCE is set: --new-fence is for one deliberate start"},
		{"EpochRetireReadsStore", env{"SPENT_STORE": "mysql://x"}, []string{"epoch", "retire", "--yes"}, "flags set from the environment: SPENT_STORE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Run(t, tc.env, tc.args...)
			if r.Code != spentcmd.ExitUsage {
				t.Fatalf("exit: got %d, want %d; stderr: %s", r.Code, spentcmd.ExitUsage, r.Stderr)
			}
			if !strings.Contains(r.Stderr, tc.want) {
				t.Fatalf("stderr: got %q, want it to contain %q", r.Stderr, tc.want)
			}
		})
	}
}

// serveFlags returns the long flags of "spent serve --help", without --help.
func serveFlags(t *testing.T) []string {
	t.Helper()
	_, section, ok := strings.Cut(MustRun(t, nil, "serve", "--help"), "\nFlags:\n")
	if !ok {
		t.Fatal("serve --help has no Flags: section")
	}
	var flags []string
	for line := range strings.SplitSeq(section, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "-") {
			break
		}
		for _, f := range strings.Fields(line) {
			if name, ok := strings.CutPrefix(strings.TrimSuffix(f, ","), "--"); ok && name != "help" {
				flags = append(flags, name)
				break
			}
		}
	}
	if len(flags) < 5 {
		t.Fatalf("serve --help lists the flags %q: want at least five", flags)
	}
	return flags
}

// TestEnvDocumented: the table of docs/configuration.md and "spent help
// environment" name the variable of every serve flag, and serve --help
// shows it beside the flag.
func TestEnvDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	topic := MustRun(t, nil, "help", "environment")
	help := MustRun(t, nil, "serve", "--help")
	for _, f := range serveFlags(t) {
		v := "SPENT_" + strings.ToUpper(strings.ReplaceAll(f, "-", "_"))
		if f == "new-fence" {
			if !strings.Contains(topic, "(none) for --new-fence") || !strings.Contains(string(doc), "| — | `--new-fence` | (none) |") {
				t.Errorf("--new-fence has no variable: help environment and docs/configuration.md should say so")
			}
			continue
		}
		row := "| `" + v + "` | `--" + f + "`"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/configuration.md lacks the row %q", row)
		}
		if !strings.Contains(topic, v+" for --"+f) {
			t.Errorf("spent help environment does not name %s for --%s:\n%s", v, f, topic)
		}
		if !strings.Contains(help, "[$"+v+"]") {
			t.Errorf("serve --help does not show [$%s]:\n%s", v, help)
		}
	}
}
