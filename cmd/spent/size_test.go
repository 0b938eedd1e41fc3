package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"math"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/internal/scaleresults"
)

// TestSizeFiguresMatchResults: the figures spent size plans with are those
// of bench/scale/results.json, so that a new run of the benchmark fails this
// test until they are copied into sizeFigures.
func TestSizeFiguresMatchResults(t *testing.T) {
	res, err := scaleresults.Read("../../bench/scale/results.json")
	if err != nil {
		t.Fatal(err)
	}
	const fix = ": copy bench/scale/results.json's figures into sizeFigures in cmd/spent/size.go"
	if sizeFigures.Date != res.Date || sizeFigures.Command != res.Command || sizeFigures.Machine != res.Machine {
		t.Errorf("sizeFigures' date, command, machine:\ngot  %q, %q, %q\nwant %q, %q, %q%s",
			sizeFigures.Date, sizeFigures.Command, sizeFigures.Machine, res.Date, res.Command, res.Machine, fix)
	}
	want := map[string][]sizePoint{}
	provisional := false
	for _, r := range res.Runs {
		want[r.Store] = append(want[r.Store], sizePoint{
			Records: r.Records, ClaimsPerSecSingle: r.ClaimsPerSecSingle, ClaimsPerSecBatch: r.ClaimsPerSecBatch,
			P99SingleMS: r.P99SingleMs, P99BatchMS: r.P99BatchMs, RSSBytes: r.RSSBytes,
			DiskBytesPerRecord: r.DiskBytesPerRecord, MemBytesPerRecord: r.MemBytesPerRecord,
			FilterBytesPerRecord: r.FilterBytesPerRecord, RestartCleanS: r.RestartCleanS, RestartKillS: r.RestartKillS,
			SweepS: r.SweepS, Swept: r.Swept,
		})
		provisional = provisional || strings.Contains(strings.ToUpper(r.Notes), "PROVISIONAL")
	}
	if len(want) == 0 {
		t.Fatal("bench/scale/results.json has no runs: the test reads it wrong")
	}
	for store, pts := range want {
		slices.SortFunc(pts, func(a, b sizePoint) int { return cmp.Compare(a.Records, b.Records) })
		if _, ok := sizeStores[store]; !ok {
			t.Errorf("results.json measures store %q, which spent size does not know", store)
		}
		if got := sizeFigures.Points[store]; !slices.Equal(got, pts) {
			t.Errorf("%s:\ngot  %+v\nwant %+v%s", store, got, pts, fix)
		}
	}
	for store := range sizeFigures.Points {
		if _, ok := want[store]; !ok {
			t.Errorf("sizeFigures has %s, which results.json does not measure%s", store, fix)
		}
	}
	if provisional != strings.HasPrefix(sizeFigures.Note, "PROVISIONAL") {
		t.Errorf("sizeFigures.Note %q; results.json's notes say provisional: %v. Say PROVISIONAL in Note exactly when they do", sizeFigures.Note, provisional)
	}
}

// TestSizeFiguresIncrease: each store's points go up in record count, as
// readCurve needs.
func TestSizeFiguresIncrease(t *testing.T) {
	for store, pts := range sizeFigures.Points {
		for i := 1; i < len(pts); i++ {
			if pts[i].Records <= pts[i-1].Records {
				t.Errorf("%s: point %d has %d records after %d: want increasing counts", store, i, pts[i].Records, pts[i-1].Records)
			}
		}
	}
}

// runSize runs "spent size" with args and returns what it printed and its
// exit status.
func runSize(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	m := NewMain()
	m.Stdout, m.Stderr, m.Getenv = &out, &errb, func(string) string { return "" }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = m.Execute(ctx, append([]string{"size"}, args...))
	return out.String(), errb.String(), code
}

// sizeJSON runs "spent size --json" with args and decodes the plan.
func sizeJSON(t *testing.T, args ...string) sizePlan {
	t.Helper()
	out, errs, code := runSize(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("spent size %s: exit %d, want 0; stderr: %s", strings.Join(args, " "), code, errs)
	}
	var p sizePlan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("spent size --json: %v; output:\n%s", err, out)
	}
	return p
}

// near reports whether got is want to within a relative 1e-9.
func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-9*math.Max(math.Abs(want), 1)
}

// restartPoints returns the pebble points with a clean restart time
// measured, failing the test when there are fewer than two.
func restartPoints(t *testing.T) []sizePoint {
	t.Helper()
	var pts []sizePoint
	for _, p := range sizeFigures.Points["pebble"] {
		if p.RestartCleanS > 0 {
			pts = append(pts, p)
		}
	}
	if len(pts) < 2 {
		t.Fatalf("sizeFigures has %d pebble points with a restart time: these tests need two", len(pts))
	}
	return pts
}

// TestSizeSeed001: the example, 1,157 payments a second kept 30
// days on pebble: 2,998,944,000 records, whichever way the retention is
// written, with the figures' date at the end.
func TestSizeSeed001(t *testing.T) {
	const records = 1157 * 720 * 3600 // 2,998,944,000
	for _, retention := range []string{"720h", "30d"} {
		p := sizeJSON(t, "--rate", "1157", "--retention", retention, "--store", "pebble", "--mem", "0", "--disk", "0")
		if p.Records != records {
			t.Errorf("--retention %s: got %d records, want 2,998,944,000", retention, p.Records)
		}
	}
	out, _, _ := runSize(t, "--rate", "1157", "--retention", "720h", "--store", "pebble", "--mem", "0", "--disk", "0")
	for _, want := range []string{"  records held      2,998,944,000 ", "not checked", "Figures: bench/scale/results.json of " + sizeFigures.Date} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// TestSizeExtrapolates: beyond the largest measured point, per-record
// figures and write rates are the largest point's, restart times grow along
// the last two points, and the plan says so.
func TestSizeExtrapolates(t *testing.T) {
	pts := sizeFigures.Points["pebble"]
	last := pts[len(pts)-1]
	records := 2 * float64(last.Records)
	p := sizeJSON(t, "--rate", strconv.FormatInt(2*last.Records, 10), "--retention", "1s", "--mem", "0", "--disk", "0")
	base := float64(last.RSSBytes) - last.MemBytesPerRecord*float64(last.Records)
	rp := restartPoints(t)
	a, b := rp[len(rp)-2], rp[len(rp)-1]
	restart := b.RestartCleanS + (b.RestartCleanS-a.RestartCleanS)/float64(b.Records-a.Records)*(records-float64(b.Records))
	for _, c := range []struct {
		name string
		got  *sizeFigure
		want float64
	}{
		{"disk", p.Disk, last.DiskBytesPerRecord * records},
		{"memory", p.Memory, base + last.MemBytesPerRecord*records},
		{"filter", p.Filter, last.FilterBytesPerRecord * records},
		{"restart", p.RestartClean, restart},
		{"claims/s batched", p.Batch, last.ClaimsPerSecBatch},
	} {
		if c.got == nil {
			t.Errorf("%s: missing", c.name)
			continue
		}
		if !near(c.got.Value, c.want) || c.got.How != howExtrapolated {
			t.Errorf("%s: got %v (%s), want %v (extrapolated)", c.name, c.got.Value, c.got.How, c.want)
		}
	}
	out, _, _ := runSize(t, "--rate", strconv.FormatInt(2*last.Records, 10), "--retention", "1s", "--mem", "0", "--disk", "0")
	for _, re := range []string{`(?m)^  disk +[0-9.]+ [KMGTP]iB +EXTRAPOLATED +`, `(?m)^  EXTRAPOLATED: more records than the largest count measured`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("plan beyond the largest point lacks %s:\n%s", re, out)
		}
	}
}

// TestSizeInterpolates reads the restart time between, at and below the
// measured points.
func TestSizeInterpolates(t *testing.T) {
	pts := restartPoints(t)
	a, b := pts[0], pts[1]
	mid := float64(a.Records+b.Records) / 2
	p := sizeJSON(t, "--rate", strconv.FormatFloat(mid, 'f', -1, 64), "--retention", "1s", "--mem", "0", "--disk", "0")
	n := math.Round(mid)
	want := a.RestartCleanS + (b.RestartCleanS-a.RestartCleanS)*(n-float64(a.Records))/float64(b.Records-a.Records)
	if float64(p.Records) != n || !near(p.RestartClean.Value, want) || p.RestartClean.How != howInterpolated {
		t.Errorf("at %v records: got %d records, restart %v (%s); want %v, %v (interpolated)", mid, p.Records, p.RestartClean.Value, p.RestartClean.How, n, want)
	}
	out, _, _ := runSize(t, "--rate", strconv.FormatFloat(mid, 'f', -1, 64), "--retention", "1s", "--mem", "0", "--disk", "0")
	if !regexp.MustCompile(`(?m)^  restart, clean +[0-9.]+ (ms|s|min|h) +interpolated +`).MatchString(out) {
		t.Errorf("plan between measured points: want the restart interpolated:\n%s", out)
	}

	p = sizeJSON(t, "--rate", strconv.FormatInt(a.Records, 10), "--retention", "1s", "--mem", "0", "--disk", "0")
	if p.RestartClean.Value != a.RestartCleanS || p.RestartClean.How != howMeasured {
		t.Errorf("at a measured point: got %v (%s), want %v (measured)", p.RestartClean.Value, p.RestartClean.How, a.RestartCleanS)
	}
	p = sizeJSON(t, "--rate", "1", "--retention", "1h", "--mem", "0", "--disk", "0")
	if p.RestartClean.Value != a.RestartCleanS || p.RestartClean.How != howBelow {
		t.Errorf("below the smallest point: got %v (%s), want %v (below_range)", p.RestartClean.Value, p.RestartClean.How, a.RestartCleanS)
	}
}

// TestSizeReadCurve checks readCurve on points made here.
func TestSizeReadCurve(t *testing.T) {
	one := []sizePoint{{Records: 100, RestartCleanS: 2}}
	two := []sizePoint{{Records: 100, RestartCleanS: 2}, {Records: 200, RestartCleanS: 3}}
	down := []sizePoint{{Records: 100, RestartCleanS: 3}, {Records: 200, RestartCleanS: 2}}
	gap := []sizePoint{{Records: 100}, {Records: 200, RestartCleanS: 4}}
	f := func(p sizePoint) float64 { return p.RestartCleanS }
	for _, c := range []struct {
		name string
		pts  []sizePoint
		n    float64
		grow bool
		want float64
		how  string
	}{
		{"OnePointGrowsThroughOrigin", one, 300, true, 6, howExtrapolated},
		{"OnePointHeld", one, 300, false, 2, howExtrapolated},
		{"Between", two, 150, true, 2.5, howInterpolated},
		{"AtPoint", two, 200, true, 3, howMeasured},
		{"BeyondAlongLastTwo", two, 400, true, 5, howExtrapolated},
		{"BeyondHeld", two, 400, false, 3, howExtrapolated},
		{"NeverDownwards", down, 400, true, 2, howExtrapolated},
		{"Below", two, 50, true, 2, howBelow},
		{"ZeroIsNotMeasured", gap, 150, true, 4, howBelow},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := readCurve(c.pts, c.n, f, c.grow)
			if got == nil || got.Value != c.want || got.How != c.how {
				t.Fatalf("got %+v, want %v (%s)", got, c.want, c.how)
			}
		})
	}
	if got := readCurve([]sizePoint{{Records: 100}}, 50, f, true); got != nil {
		t.Errorf("nothing measured: got %+v, want nil", got)
	}
}

// TestSizeVerdictFlips: the verdict follows the machine's memory, and etcd's
// quota.
func TestSizeVerdictFlips(t *testing.T) {
	pts := sizeFigures.Points["pebble"]
	last := pts[len(pts)-1]
	need := float64(last.RSSBytes) - last.MemBytesPerRecord*float64(last.Records) + pts[0].MemBytesPerRecord*36000
	if need >= 1<<30 || need <= 1<<20 {
		t.Fatalf("36,000 records need %v bytes by the table: the test expects 1 MiB to 1 GiB", need)
	}
	args := []string{"--rate", "10", "--retention", "1h", "--store", "pebble", "--disk", "1TB"}
	p := sizeJSON(t, append(args, "--mem", "1GiB")...)
	if !p.Fits || !strings.HasPrefix(p.Verdict, "fits one machine with 1.0 GiB RAM and 931.3 GiB free disk") {
		t.Errorf("--mem 1GiB: got fits %v, %q; want fits one machine with 1.0 GiB RAM and 931.3 GiB free disk", p.Fits, p.Verdict)
	}
	p = sizeJSON(t, append(args, "--mem", "1MiB")...)
	if p.Fits || p.Limits[0].Name != "memory" || p.Limits[0].Fits || !p.Limits[1].Fits ||
		!strings.HasPrefix(p.Verdict, "exceeds one machine: memory (needs ") {
		t.Errorf("--mem 1MiB: got fits %v, limits %+v, %q; want memory exceeded", p.Fits, p.Limits, p.Verdict)
	}
	out, _, _ := runSize(t, append(args, "--mem", "1MiB")...)
	if !regexp.MustCompile(`(?m)^  memory +EXCEEDS +needs .*, has 1\.0 MiB \(--mem\)$`).MatchString(out) {
		t.Errorf("--mem 1MiB: no memory EXCEEDS line:\n%s", out)
	}

	etcd := sizeFigures.Points["etcd"]
	db := etcd[len(etcd)-1].DiskBytesPerRecord * 1000 * 86400 // beyond the largest point
	if db <= etcdDefaultQuota || db >= etcdMaxQuota*4 {
		t.Fatalf("a day at 1,000/s needs %v bytes of etcd database by the table: the test expects 2 to 32 GiB", db)
	}
	p = sizeJSON(t, "--store", "etcd", "--rate", "1000", "--retention", "1d")
	if p.Fits || p.Limits[0].Name != "etcd quota" || p.Limits[0].Have != etcdDefaultQuota || !near(p.Limits[0].Need, db) {
		t.Errorf("etcd, default quota: got fits %v, limits %+v; want the 2 GiB quota exceeded by %v", p.Fits, p.Limits, db)
	}
	p = sizeJSON(t, "--store", "etcd", "--rate", "1000", "--retention", "1d", "--etcd-quota", "64GiB")
	if !p.Fits || p.Limits[0].Note == "" {
		t.Errorf("etcd, --etcd-quota 64GiB: got fits %v, limits %+v; want fits, with a note on etcd's 8 GiB", p.Fits, p.Limits)
	}
}

// TestSizeDefaultsToThisMachine: without --mem, the plan checks this
// machine's memory.
func TestSizeDefaultsToThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/meminfo")
	}
	p := sizeJSON(t, "--rate", "10", "--retention", "1h")
	if l := p.Limits[0]; l.Name != "memory" || !l.Checked || l.Have <= 0 || l.From != "this machine's MemTotal" {
		t.Errorf("got %+v, want memory checked against this machine's MemTotal", l)
	}
	if l := p.Limits[1]; l.Name != "disk" || !l.Checked || !strings.HasPrefix(l.From, "free space of") {
		t.Errorf("got %+v, want disk checked against the free space where --data is", l)
	}
}

// TestSizeBadInput: each bad flag is a usage error naming the flag.
func TestSizeBadInput(t *testing.T) {
	ok := []string{"--rate", "10", "--retention", "1h", "--mem", "0", "--disk", "0"}
	with := func(flag, value string) []string {
		args := slices.Clone(ok)
		if i := slices.Index(args, flag); i >= 0 {
			args[i+1] = value
			return args
		}
		return append(args, flag, value)
	}
	for _, c := range []struct {
		name string
		args []string
		flag string
	}{
		{"NegativeRate", with("--rate", "-5"), "--rate"},
		{"ZeroRate", with("--rate", "0"), "--rate"},
		{"NaNRate", with("--rate", "NaN"), "--rate"},
		{"ZeroRetention", with("--retention", "0s"), "--retention"},
		{"ZeroDays", with("--retention", "0d"), "--retention"},
		{"NegativeRetention", with("--retention", "-5h"), "--retention"},
		{"NotADuration", with("--retention", "a week"), "--retention"},
		{"UnknownStore", with("--store", "mysql"), "--store"},
		{"BadMem", with("--mem", "12XB"), "--mem"},
		{"NegativeDisk", with("--disk", "-1GB"), "--disk"},
		{"ZeroQuota", with("--etcd-quota", "0"), "--etcd-quota"},
		{"TooManyRecords", with("--rate", "1e15"), "--rate"},
		{"NoRate", ok[2:], "rate"},
		{"Argument", append(slices.Clone(ok), "extra"), "no arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := runSize(t, c.args...)
			if code != ExitUsage || !strings.Contains(errs, c.flag) || out != "" {
				t.Fatalf("spent size %s: exit %d, stderr %q, stdout %q; want exit %d, an error naming %s, nothing printed",
					strings.Join(c.args, " "), code, errs, out, ExitUsage, c.flag)
			}
		})
	}
}

// TestSizeRetentionDays: --retention takes days.
func TestSizeRetentionDays(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30d": 720 * time.Hour, "7d": 168 * time.Hour, "1.5d": 36 * time.Hour, "7d12h": 180 * time.Hour, "90m": 90 * time.Minute,
	} {
		if got, err := parseRetention(in); got != want || err != nil {
			t.Errorf("%q: got %v, %v; want %v", in, got, err, want)
		}
	}
	out, _, _ := runSize(t, "--help")
	if !strings.Contains(out, "30d") {
		t.Errorf("--help does not say --retention takes days:\n%s", out)
	}
}

// TestSizeJSONRoundTrips: the --json plan decodes into the plan and encodes
// back to the same bytes, with no member the plan lacks.
func TestSizeJSONRoundTrips(t *testing.T) {
	for _, store := range []string{"pebble", "redis", "postgres", "etcd"} {
		t.Run(store, func(t *testing.T) {
			out, errs, code := runSize(t, "--rate", "1157", "--retention", "7d", "--store", store, "--mem", "64GiB", "--disk", "2TB", "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			var p sizePlan
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			again, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if string(again)+"\n" != out {
				t.Fatalf("re-encoded:\n%s\nwant:\n%s", again, out)
			}
			if p.Store != store || p.Records != 1157*7*86400 || p.RatePerSec != 1157 || p.RetentionSeconds != 7*86400 || len(p.Limits) == 0 {
				t.Fatalf("got store %s, %d records, rate %v, retention %v s, limits %v", p.Store, p.Records, p.RatePerSec, p.RetentionSeconds, p.Limits)
			}
		})
	}
}

// TestSizeDocsExamplesRun runs the spent size commands of "Capacity
// planning" in docs/operations.md as written, and checks the plan shown
// after one (a ``` block; … stands for anything) against what it prints.
func TestSizeDocsExamplesRun(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Capacity planning\n")
	if !ok {
		t.Fatal("docs/operations.md has no ## Capacity planning")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := strings.Split(section, "```")
	var ran, checked int
	var last string
	for i := 1; i < len(blocks); i += 2 {
		lang, body, _ := strings.Cut(blocks[i], "\n")
		if lang == "" && last != "" {
			checked++
			matchPlan(t, last, body)
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			args, ok := strings.CutPrefix(line, "spent size ")
			if !ok {
				continue
			}
			args, _, _ = strings.Cut(args, "#")
			out, errs, code := runSize(t, strings.Fields(args)...)
			if code != 0 {
				t.Errorf("docs/operations.md: %s: exit %d: %s", line, code, errs)
			}
			ran++
			last = out
		}
	}
	if ran < 2 || checked < 1 {
		t.Fatalf("ran %d spent size commands and checked %d plans of the docs: the test reads them wrong", ran, checked)
	}
}

// matchPlan checks that the lines of want appear in got in order, … in a
// line of want standing for anything.
func matchPlan(t *testing.T, got, want string) {
	t.Helper()
	lines := strings.Split(got, "\n")
	j := 0
	for _, w := range strings.Split(strings.TrimRight(want, "\n"), "\n") {
		parts := strings.Split(w, "…")
		for k := range parts {
			parts[k] = regexp.QuoteMeta(parts[k])
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		for j < len(lines) && !re.MatchString(lines[j]) {
			j++
		}
		if j == len(lines) {
			t.Errorf("docs/operations.md: the plan shown has %q, which spent size does not print (in that order); it prints:\n%s", w, got)
			return
		}
		j++
	}
}
