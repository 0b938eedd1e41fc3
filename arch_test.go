package spent_test

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// roles gives each package of the module its role in docs/architecture.md,
// by its path inside the module ("" is the root).
var roles = map[string]string{
	"": "domain",

	"inmem": "store", "pebble": "store", "redis": "store", "postgres": "store", "etcd": "store", "storetest": "store",

	"privacypass": "component", "privacypass/blindsign": "component", "ecash": "component", "wallet": "component",
	"idempotency": "component", "webhooks": "component", "jwtreplay": "component", "audit": "component",
	"opentelemetry": "component",

	"node": "node",

	"door": "front end", "http": "front end", "resp": "front end", "console": "front end", "doortest": "front end",
}

// rank orders the roles as the page's table does: a package imports only
// from a role of a lower rank, and from its own only where allowed says.
var rank = map[string]int{"domain": 1, "store": 2, "component": 3, "node": 4, "front end": 5, "command": 6}

// sameRole are the imports within one role that the page allows.
var sameRole = map[[2]string]bool{
	{"ecash", "privacypass"}: true, {"ecash", "privacypass/blindsign"}: true, {"privacypass", "privacypass/blindsign"}: true,
	{"wallet", "ecash"}: true,
	{"console", "http"}: true, {"console", "door"}: true, {"http", "door"}: true, {"resp", "door"}: true, {"doortest", "door"}: true,
}

// internalExceptions are the internal packages allowed to import a store:
// the bare engine the benchmarks compare the store against.
var internalExceptions = map[[2]string]bool{{"internal/barepebble", "pebble"}: true}

func roleOf(p string) string {
	switch {
	case strings.HasPrefix(p, "cmd/"):
		return "command"
	case strings.HasPrefix(p, "internal/"):
		return "internal"
	case strings.HasPrefix(p, "examples/"), strings.HasPrefix(p, "bench/"):
		return "outside"
	}
	return roles[p]
}

// TestArchitecture checks every import between the module's packages
// against the arrows docs/architecture.md allows.
func TestArchitecture(t *testing.T) {
	const module = "github.com/spentledger/spent"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rel := func(p string) (string, bool) {
		if p == module {
			return "", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	var wrong []string
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		from, _ := rel(f[0])
		fr := roleOf(from)
		if fr == "" {
			wrong = append(wrong, "package "+f[0]+" has no role: give it one in arch_test.go and docs/architecture.md")
			continue
		}
		seen++
		for _, imp := range f[1:] {
			to, ok := rel(imp)
			if !ok {
				continue // the standard library or another module
			}
			tr := roleOf(to)
			if !allowed(from, fr, to, tr) {
				wrong = append(wrong, f[0]+" ("+fr+") imports "+imp+" ("+tr+")")
			}
		}
	}
	if seen < len(roles) {
		t.Fatalf("go list reported %d packages with a role, fewer than the %d named: %s", seen, len(roles), out)
	}
	sort.Strings(wrong)
	for _, w := range wrong {
		t.Error(w)
	}
}

func allowed(from, fr, to, tr string) bool {
	switch {
	case tr == "outside" || tr == "command":
		return fr == "outside" // examples and benchmarks may use each other; nothing imports them or a command
	case fr == "command" || fr == "outside":
		return true
	case fr == "internal":
		return tr == "domain" || tr == "internal" || internalExceptions[[2]string{from, to}]
	case tr == "internal":
		return true
	case fr == tr:
		return sameRole[[2]string{from, to}]
	}
	return rank[tr] < rank[fr]
}
