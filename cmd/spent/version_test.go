package main_test

import (
	"runtime"
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	out := MustRun(t, nil, "version")
	if !strings.HasPrefix(out, "spent ") || !strings.Contains(out, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n") {
		t.Fatalf("spent version: got %q, want the module version and %s", out, runtime.Version())
	}
	for _, flag := range []string{"--version", "-v"} {
		if got := MustRun(t, nil, flag); got != out {
			t.Fatalf("spent %s: got %q, want what spent version prints, %q", flag, got, out)
		}
	}
}

func TestCompletionCommand(t *testing.T) {
	for shell, want := range map[string]string{
		"bash":       "complete -o default -F __start_spent spent",
		"zsh":        "#compdef spent",
		"fish":       "complete -c spent",
		"powershell": "Register-ArgumentCompleter",
	} {
		t.Run(shell, func(t *testing.T) {
			if out := MustRun(t, nil, "completion", shell); !strings.Contains(out, want) {
				t.Fatalf("spent completion %s: got %d bytes without %q", shell, len(out), want)
			}
		})
	}
	// The script completes the tree's commands: ask it as the shell does.
	out := MustRun(t, nil, "__complete", "wal")
	if !strings.Contains(out, "wallet") {
		t.Fatalf("completing \"wal\": got %q, want wallet", out)
	}
}

func TestHelpTopics(t *testing.T) {
	help := MustRun(t, nil, "help")
	for _, topic := range []string{"environment", "exit-status"} {
		if !strings.Contains(help, "spent "+topic) {
			t.Errorf("spent help does not list the topic %s:\n%s", topic, help)
		}
	}
	if out := MustRun(t, nil, "help", "exit-status"); !strings.Contains(out, "  9  seq_mismatch\n") {
		t.Fatalf("spent help exit-status: got %q, want seq_mismatch's 9", out)
	}
	if out := MustRun(t, nil, "help", "environment"); !strings.Contains(out, "SPENT_LISTEN for --listen") {
		t.Fatalf("spent help environment: got %q, want SPENT_LISTEN", out)
	}
}
