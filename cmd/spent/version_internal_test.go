package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionText(t *testing.T) {
	stamped := stampedCommit
	t.Cleanup(func() { stampedCommit = stamped })
	stampedCommit = ""
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/spentledger/spent", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		name    string
		bi      *debug.BuildInfo
		ok      bool
		stamped string
		want    string
	}{
		{"VCS", bi, true, "", "spent v1.2.3\ncommit 0123abcd (2026-01-02T03:04:05Z, with uncommitted changes)\ngo1.99.1 " + platform + "\n"},
		{"VCSWinsOverStamp", bi, true, "ffff", "spent v1.2.3\ncommit 0123abcd (2026-01-02T03:04:05Z, with uncommitted changes)\ngo1.99.1 " + platform + "\n"},
		{"Stamped", &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"}}, true, "ffff-dirty", "spent (devel)\ncommit ffff-dirty\ngo1.99.1 " + platform + "\n"},
		{"NoBuildInfo", nil, false, "", "spent (devel)\n" + runtime.Version() + " " + platform + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stampedCommit = tc.stamped
			if got := versionText(tc.bi, tc.ok); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestExitStatusTopic: "spent help exit-status" gives the status of every
// error code.
func TestExitStatusTopic(t *testing.T) {
	topic := exitStatusTopic().Long
	for code, status := range exitCodes {
		if status == ExitError {
			continue // listed as "an error without a more precise code"
		}
		if line := fmt.Sprintf("%3d  %s\n", status, code); !strings.Contains(topic, line) {
			t.Errorf("help exit-status lacks %q:\n%s", line, topic)
		}
	}
}
