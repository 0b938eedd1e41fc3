package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelp: --help prints the usage and every flag on stdout and exits 0,
// for the service and for pay; a bad flag exits 2 and says where help is.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Usage:", "payments pay [flags]", "-listen", "-data", "-admin", "-fail-rate", "-crash-rate", "-delay", "-lease", "-resolve-every", "-new-fence"}},
		{[]string{"-h"}, []string{"Usage:", "-listen"}},
		{[]string{"pay", "--help"}, []string{"payments pay --amount N", "-server", "-amount", "-destination", "-journal", "-timeout"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), tc.args, &out, &errb); code != 0 {
				t.Fatalf("exit %d, want 0; stderr: %s", code, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout: got %q, want it to contain %q", out.String(), w)
				}
			}
		})
	}
	for _, args := range [][]string{{"--no-such-flag"}, {"pay", "--no-such-flag"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--help)") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a pointer to --help", args, code, errb.String())
		}
	}
}
