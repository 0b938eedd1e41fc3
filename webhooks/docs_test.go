package webhooks_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spentledger/spent"
	"github.com/spentledger/spent/webhooks"
)

// TestDocsCodes: docs/webhooks.md has an anchor for every problem code the
// receiver answers, and no other.
func TestDocsCodes(t *testing.T) {
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile(`<a id="code-([a-z_]+)"></a>`).FindAllSubmatch(doc, -1) {
		got = append(got, string(m[1]))
	}
	want := []string{webhooks.CodeHeadersMissing, webhooks.CodeHeadersInvalid, webhooks.CodeTimestamp, webhooks.CodeSignature,
		webhooks.CodeMethod, webhooks.CodeBodyInvalid, webhooks.CodeTooLarge, webhooks.CodeInProgress, webhooks.CodeUnavailable, webhooks.CodeInternal}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("code anchors: got %v, want %v", got, want)
	}
	if !strings.HasPrefix(webhooks.ProblemType, "https://github.com/spentledger/spent/blob/main/docs/webhooks.md#code-") {
		t.Fatalf("ProblemType %q does not point at docs/webhooks.md", webhooks.ProblemType)
	}
}

// TestDocsServerConfig: the namespace configuration docs/webhooks.md gives
// for a remote server is the policy Options.Policy returns for the
// defaults, and one New accepts.
func TestDocsServerConfig(t *testing.T) {
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```toml\n")
	if !ok {
		t.Fatal("docs/webhooks.md: no toml block")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/webhooks.md: toml block not closed")
	}
	var cfg struct {
		Namespaces map[string]struct {
			Mode          string `toml:"mode"`
			Retention     string `toml:"retention"`
			Lease         string `toml:"lease"`
			OnLeaseExpiry string `toml:"on_lease_expiry"`
		} `toml:"namespaces"`
	}
	md, err := toml.Decode(block, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if u := md.Undecoded(); len(u) != 0 {
		t.Fatalf("docs/webhooks.md: unknown keys %v", u)
	}
	o := webhooks.DefaultOptions()
	ns, ok := cfg.Namespaces[o.Namespace]
	if !ok {
		t.Fatalf("docs/webhooks.md: no [namespaces.%s]", o.Namespace)
	}
	ret, err1 := time.ParseDuration(ns.Retention)
	lease, err2 := time.ParseDuration(ns.Lease)
	if err1 != nil || err2 != nil {
		t.Fatalf("durations: %v, %v", err1, err2)
	}
	got := spent.Policy{Mode: spent.Mode(ns.Mode), Retention: ret, Lease: lease, OnLeaseExpiry: spent.LeaseExpiry(ns.OnLeaseExpiry)}
	if want := o.Policy(30 * time.Second); got != want {
		t.Fatalf("docs policy: got %+v, want %+v", got, want)
	}
}
