package jwtreplay_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/jwtreplay"
)

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/jwt.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDocCodes checks that docs/jwt.md has one anchor (the problem
// documents' type links to it) for each code, and no other.
func TestDocCodes(t *testing.T) {
	var anchors []string
	for _, m := range regexp.MustCompile(`<a id="code-([a-z_]+)"></a>`).FindAllStringSubmatch(readDoc(t), -1) {
		anchors = append(anchors, m[1])
	}
	var codes []string
	for c := range jwtreplay.ProblemTitles {
		codes = append(codes, c)
	}
	slices.Sort(anchors)
	slices.Sort(codes)
	if !slices.Equal(anchors, codes) {
		t.Fatalf("docs/jwt.md anchors %v, want the codes %v", anchors, codes)
	}
}

// TestDocPolicies checks that the namespaces of the TOML example in
// docs/jwt.md are the policies the default options need.
func TestDocPolicies(t *testing.T) {
	_, rest, ok := strings.Cut(readDoc(t), "```toml\n")
	if !ok {
		t.Fatal("no toml block in docs/jwt.md")
	}
	block, _, _ := strings.Cut(rest, "```")
	var cfg struct {
		Namespaces map[string]spent.Policy `toml:"namespaces"`
	}
	if _, err := toml.Decode(block, &cfg); err != nil {
		t.Fatal(err)
	}
	jo, do := jwtreplay.DefaultJTIOptions(), jwtreplay.DefaultDPoPOptions()
	want := map[string]spent.Policy{jo.Namespace: jo.Policy(), do.Namespace: do.Policy()}
	if len(cfg.Namespaces) != len(want) {
		t.Fatalf("got namespaces %v, want %v", cfg.Namespaces, want)
	}
	for ns, p := range want {
		if got := cfg.Namespaces[ns]; got != p {
			t.Errorf("namespace %s: got %+v, want %+v", ns, got, p)
		}
	}
}
