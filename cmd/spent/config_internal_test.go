package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/ecash"
)

// mustParse parses doc over the defaults and fails the test on an error.
func mustParse(t *testing.T, doc string, env map[string]string) serveConfig {
	t.Helper()
	cfg := defaultServeConfig()
	if err := cfg.parse(doc, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("parse:\n%s\ngot error %v, want none", doc, err)
	}
	return cfg
}

// TestConfigDocExamplesLoad loads every TOML block of the README and the
// docs, so that no example a reader copies is refused.
func TestConfigDocExamplesLoad(t *testing.T) {
	env := map[string]string{
		"SPENT_TOKEN_API":   "api-token-0123456789",
		"SPENT_TOKEN_GATES": "gates-token-0123456789",
		"SPENT_TOKEN_OPS":   "ops-token-0123456789",
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	var blocks int
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rest := string(b)
		for i := 1; ; i++ {
			var block string
			var ok bool
			if _, rest, ok = strings.Cut(rest, "```toml\n"); !ok {
				break
			}
			if block, rest, ok = strings.Cut(rest, "```"); !ok {
				t.Fatalf("%s: toml block #%d is not closed", path, i)
			}
			blocks++
			t.Run(filepath.Base(path)+"#"+strconv.Itoa(i), func(t *testing.T) {
				mustParse(t, block, env)
			})
		}
	}
	if blocks < 6 {
		t.Fatalf("found %d toml blocks in the docs and README, want at least 6 (the six known on writing)", blocks)
	}
}

// TestConfigDecodesOverDefaults checks that a key the file leaves out keeps
// its default, in every section.
func TestConfigDecodesOverDefaults(t *testing.T) {
	t.Run("EmptyFileIsTheDefaults", func(t *testing.T) {
		got, want := mustParse(t, "", nil), defaultServeConfig()
		got.Ledger.Now, want.Ledger.Now = nil, nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	t.Run("TopLevelKeyKeepsTheOthers", func(t *testing.T) {
		cfg := mustParse(t, "sweep_batch = 7\n", nil)
		if cfg.SweepBatch != 7 || cfg.SweepInterval != defaultSweepInterval || cfg.Ledger.Node != 1 || cfg.Listen != defaultListen {
			t.Fatalf("got sweep_batch %d, sweep_interval %v, node %d, listen %q; want 7, %v, 1, %q",
				cfg.SweepBatch, cfg.SweepInterval, cfg.Ledger.Node, cfg.Listen, defaultSweepInterval, defaultListen)
		}
	})
	t.Run("NamespaceKeyKeepsTheDefaultPolicy", func(t *testing.T) {
		cfg := mustParse(t, "[namespaces.gate]\nmode = \"refuse\"\n[namespaces.plain]\n", nil)
		want := spent.DefaultPolicy()
		if got := cfg.Ledger.Namespaces["plain"]; got != want {
			t.Fatalf("plain: got %+v, want %+v", got, want)
		}
		want.Mode = spent.ModeRefuse
		if got := cfg.Ledger.Namespaces["gate"]; got != want {
			t.Fatalf("gate: got %+v, want %+v", got, want)
		}
		if _, ok := cfg.Ledger.Namespaces["default"]; ok || len(cfg.Ledger.Namespaces) != 2 {
			t.Fatalf("namespaces: got %v, want only gate and plain (a file's namespaces replace default)", sortedKeys(cfg.Ledger.Namespaces))
		}
	})
	t.Run("EcashKeyKeepsTheOthers", func(t *testing.T) {
		defaults := slices.Clone(ecash.DefaultDenominations)
		cfg := mustParse(t, "[ecash]\nissuer_name = \"bank.example\"\ndenominations = [3]\n", nil)
		if cfg.Ecash == nil {
			t.Fatal("ecash: got nil, want the section in force")
		}
		if !slices.Equal(cfg.Ecash.Denominations, []uint64{3}) || cfg.Ecash.Epoch != ecash.DefaultConfig().Epoch {
			t.Fatalf("ecash: got denominations %v, epoch %v; want [3], %v", cfg.Ecash.Denominations, cfg.Ecash.Epoch, ecash.DefaultConfig().Epoch)
		}
		if !slices.Equal(ecash.DefaultDenominations, defaults) {
			t.Fatalf("ecash.DefaultDenominations: got %v after decoding, want %v unchanged", ecash.DefaultDenominations, defaults)
		}
	})
	t.Run("AbsentSectionsAreOff", func(t *testing.T) {
		cfg := mustParse(t, "[store]\n", nil)
		if cfg.Privacypass != nil || cfg.Ecash != nil {
			t.Fatalf("got privacypass %v, ecash %v; want both nil without their sections", cfg.Privacypass, cfg.Ecash)
		}
	})
	t.Run("DurationsAreGoDurations", func(t *testing.T) {
		cfg := mustParse(t, "fence_interval = \"1m30s\"\n[namespaces.p]\nlease = \"2s\"\n", nil)
		if cfg.FenceInterval != 90*time.Second || cfg.Ledger.Namespaces["p"].Lease != 2*time.Second {
			t.Fatalf("got fence_interval %v, lease %v; want 1m30s, 2s", cfg.FenceInterval, cfg.Ledger.Namespaces["p"].Lease)
		}
	})
}

// TestConfigRefusals checks the messages of mistakes the end-to-end
// TestConfigErrors does not cover: each names the key at fault.
func TestConfigRefusals(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"UnknownEcashKey", "[ecash]\nissuer_name = \"b\"\nsecret = \"x\"\n", "unknown key ecash.secret"},
		{"UnknownKeysAllNamed", "a = 1\n[namespaces.p]\nb = 2\n", "unknown key a, namespaces.p.b"},
		{"UnknownKeyBeforeBadValue", "node = 0\n[namespaces.p]\nmode = \"x\"\nb = 2\n", "unknown key namespaces.p.b"},
		{"NodeTooLarge", "node = 4294967296\n", "node = 4294967296: want 1 to 4294967295"},
		{"DataEmpty", "data = \"\"\n", `data = "": want a directory`},
		{"MaxBodyZero", "max_body = 0\n", "max_body = 0: must be positive"},
		{"MaxResultTooLarge", "max_result = 1073741825\n", "max_result = 1073741825: want 1 to 1073741824 bytes"},
		{"MaxBatchResultZero", "max_batch_result = 0\n", "max_batch_result = 0: want 1 to"},
		{"MaxBodiesZero", "max_bodies = 0\n", "max_bodies = 0: must be positive"},
		{"MaxBodiesUnderMaxBody", "max_body = 2000\nmax_bodies = 1000\n", "max_bodies = 1000: must be at least max_body (2000)"},
		{"MaxBodiesUnderDefaultMaxBody", "max_bodies = 1000\n", "max_bodies = 1000: must be at least max_body (33554432)"},
		{"SweepIntervalZero", "sweep_interval = \"0s\"\n", `sweep_interval = "0s": must be positive`},
		{"SweepBatchTooLarge", "sweep_batch = 10001\n", "sweep_batch = 10001: want 1 to 10000"},
		{"ShutdownTimeoutNegative", "shutdown_timeout = \"-1s\"\n", `shutdown_timeout = "-1s": must be positive`},
		{"FenceIntervalShort", "fence_interval = \"500ms\"\n", `fence_interval = "500ms": want at least 1s`},
		{"LogFormat", "log_format = \"xml\"\n", `log_format = "xml": want text or json`},
		{"StoreURL", "[store]\nurl = \"mysql://h\"\n", `[store] url: store "mysql://h": unknown scheme`},
		{"StoreExpectedRecords", "[store]\nexpected_records = -1\n", "[store] expected_records = -1: must not be negative"},
		{"StoreMemtableNegative", "[store]\nmemtable_size = -1\n", "[store] memtable_size = -1: must not be negative"},
		{"PrivacypassInvalid", "[privacypass]\nissuer_name = \"i\"\n", "[privacypass]: privacypass: attester_tokens"},
		{"EcashWithoutIssuer", "[ecash]\n", "[ecash]: ecash: no issuer name"},
		{"EcashDurationInteger", "[ecash]\nissuer_name = \"b\"\nepoch = 60\n", `"60" is not a duration`},
		{"NamespaceNotATable", "[namespaces]\np = 1\n", "namespaces.p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultServeConfig()
			err := cfg.parse(tc.doc, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parse %q: got error %v, want one containing %q", tc.doc, err, tc.want)
			}
		})
	}
}
