package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// stampedCommit is the commit the binary was built from when the build says
// so itself ("make build": go build -ldflags "-X main.stampedCommit=..."),
// for builds where Go records no VCS information (a git worktree, or
// -buildvcs=false).
var stampedCommit string

// moduleVersion is the module's version in the build information (ok false
// when there is none), "(devel)" when it records none.
func moduleVersion(bi *debug.BuildInfo, ok bool) string {
	if ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// versionText returns what "spent version" prints, from the build
// information of the binary (ok false when it has none): the module's
// version, the VCS commit and its time when the build recorded them (a
// build in a git checkout does, unless -buildvcs=false), and the Go version
// and platform.
func versionText(bi *debug.BuildInfo, ok bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "spent %s\n", moduleVersion(bi, ok))
	var commit, at, modified string
	if ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = "with uncommitted changes"
				}
			}
		}
	}
	if commit == "" {
		commit = stampedCommit
	}
	if commit != "" {
		fmt.Fprintf(&b, "commit %s", commit)
		if details := strings.Join(slices.DeleteFunc([]string{at, modified}, func(s string) bool { return s == "" }), ", "); details != "" {
			fmt.Fprintf(&b, " (%s)", details)
		}
		b.WriteString("\n")
	}
	goVersion := runtime.Version()
	if ok && bi.GoVersion != "" {
		goVersion = bi.GoVersion
	}
	fmt.Fprintf(&b, "%s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// buildVersion is versionText of the running binary.
func buildVersion() string {
	return versionText(debug.ReadBuildInfo())
}

// versionCommand returns "spent version".
func (m *Main) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Long: `Print the module version of this binary, the commit it was built from and
when (when the build recorded them: a build in a git checkout does), and the
Go version and platform. "spent --version" prints the same.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			m.run = func(context.Context) error {
				_, err := fmt.Fprint(m.Stdout, buildVersion())
				return err
			}
			return nil
		},
	}
}

// exitStatusTopic returns the help topic "spent help exit-status", made
// from the table of exit statuses.
func exitStatusTopic() *cobra.Command {
	byStatus := map[int]string{}
	for code, status := range exitCodes {
		if byStatus[status] != "" {
			byStatus[status] += ", "
		}
		byStatus[status] += code
	}
	var b strings.Builder
	fmt.Fprintf(&b, `Every command exits with one of these statuses, so that scripts can tell a
retryable outage from a final refusal without reading the message. Every
claim outcome (fresh, replayed, in_progress, refused, mismatch) is a
success: the command did its work.

  %3d  the command did its work
  %3d  an error without a more precise code (internal)
  %3d  bad flags, arguments, environment or configuration
`, ExitOK, ExitError, ExitUsage)
	for status := ExitUsage + 1; status < 256; status++ {
		if codes := byStatus[status]; codes != "" {
			fmt.Fprintf(&b, "  %3d  %s\n", status, codes)
		}
	}
	b.WriteString(`
unavailable is the retryable one; a server that cannot be reached counts as
unavailable. The codes are those of the HTTP API (docs/http-api.md); the
message on stderr names the code.`)
	return &cobra.Command{
		Use:   "exit-status",
		Short: "The exit statuses of spent, one per error code",
		Long:  b.String(),
	}
}
