package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelp: --help prints the usage and every flag on stdout and exits 0;
// a bad flag exits 2 and says where help is.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{arg}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d, want 0; stderr: %s", arg, code, errb.String())
		}
		for _, w := range []string{"Usage:", "-listen", "-data", "-ledger", "-token-file", "-keys", "-source", "-tolerance", "-skew", "-lease", "-new-fence"} {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: stdout: got %q, want it to contain %q", arg, out.String(), w)
			}
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--no-such-flag"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "see webhooks --help") {
		t.Errorf("bad flag: exit %d, stderr %q; want 2 and a pointer to --help", code, errb.String())
	}
}
