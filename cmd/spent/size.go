package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// sizePoint is one measured point of a store's cost curve: one run of
// bench/scale/results.json (its notes left out), with the same fields. A
// zero figure was not measured at that point.
type sizePoint struct {
	Records              int64
	ClaimsPerSecSingle   float64
	ClaimsPerSecBatch    float64
	P99SingleMS          float64
	P99BatchMS           float64
	RSSBytes             int64
	DiskBytesPerRecord   float64
	MemBytesPerRecord    float64
	FilterBytesPerRecord float64
	RestartCleanS        float64
	RestartKillS         float64
	SweepS               float64
	Swept                int64
}

// sizeBench is one run of the cost-curve benchmark: when, by which command,
// on which machine, and the points of each store in increasing record count.
type sizeBench struct {
	Date, Command, Machine string
	// Note is printed with the figures: "PROVISIONAL: …" while any run's
	// notes in results.json say PROVISIONAL, empty otherwise.
	Note   string
	Points map[string][]sizePoint
}

// etcd's storage quota. "The default storage size limit is 2 GiB,
// configurable with --quota-backend-bytes flag. 8 GiB is a suggested maximum
// size for normal environments and etcd warns at startup if the configured
// value exceeds it." (etcd documentation, "System limits",
// https://etcd.io/docs/latest/dev-guide/limit/). The benchmark's etcd 3.7.3
// member reported dbSizeQuota 2147483648.
const (
	etcdDefaultQuota = 2 << 30
	etcdMaxQuota     = 8 << 30
)

// sizeStore is what spent size says of one store: its name in the plan, what
// its restart time measures, and which limits bind it.
type sizeStore struct {
	title   string
	machine string // "one machine", "one Redis server", ...
	restart string
	memory  string   // what its memory figure is
	limits  []string // of "memory", "disk", "etcd quota", "write rate"
}

var sizeStores = map[string]sizeStore{
	"pebble": {"pebble (embedded, one spent process)", "one machine",
		"spent serve start to /readyz 200", "RSS of the spent process, filter and block cache included",
		[]string{"memory", "disk", "write rate"}},
	"redis": {"Redis (one primary, appendfsync always)", "one Redis server",
		"redis-server start to its first answer (AOF replay)", "used_memory per record; RSS of redis-server",
		[]string{"memory", "disk", "write rate"}},
	"postgres": {"PostgreSQL (one primary, synchronous_commit on)", "one PostgreSQL primary",
		"server start, pg_ctl start -w", "",
		[]string{"disk", "write rate"}},
	"etcd": {"etcd (one Raft group)", "one etcd cluster",
		"member start to /health true", "RSS of the member",
		[]string{"etcd quota", "write rate"}},
}

// sizeRequest is what spent size was asked.
type sizeRequest struct {
	store     string
	rate      float64
	retention time.Duration
	mem, disk int64  // 0: not checked
	memFrom   string // where mem came from
	diskFrom  string
	etcdQuota int64
	quotaFrom string
	asJSON    bool
}

// sizeCommand is "spent size": a capacity plan from the benchmark's figures.
func (m *Main) sizeCommand() *cobra.Command {
	var rate float64
	var retention, store, mem, disk, data, quota string
	var asJSON bool
	c := &cobra.Command{
		Use:   "size --rate R --retention D [--store S] [flags]",
		Short: "Print a capacity plan: records held, disk, memory, restart time and write rate for a rate and retention",
		Long: `Print a capacity plan for keeping --rate records a second for --retention on a
store: the records held (rate × retention), the bytes on disk and in memory,
the existence filter's memory (pebble), the restart time to ready, and the
write rate the store sustained in the benchmark against the rate asked. Then
one line per limit of the store, and a verdict: fits, or exceeds which limit.

The figures are those of bench/scale/results.json, kept in the command with
the date and the command that measured them (printed at the end). Between
measured record counts a figure is interpolated linearly; beyond the largest
the plan says it is an extrapolation: per-record figures and write rates are
held at the largest point's, restart times grow along the line through the
last two points.

--retention is a Go duration (720h, 90m) or days: 30d, 7d, 1.5d, 7d12h.
--mem and --disk take bytes with an optional unit (64GiB, 500GB, 2TB,
1.5TiB) and default to this machine's: MemTotal of /proc/meminfo, and the
free space of the file system holding --data; 0 means not checked.

The limits: pebble, the machine's memory (the existence filter and pebble's
block cache live in the spent process) and disk; Redis, memory (it holds
every record in RAM: maxmemory is at most the machine's RAM) and disk for
its append-only file; PostgreSQL, disk; etcd, its database size quota
(--etcd-quota, 2 GiB by default, 8 GiB at most as etcd suggests). Every
store: the write rate it sustained. See "Capacity planning" in
docs/operations.md.`,
		Example: `  spent size --rate 1157 --retention 720h --store pebble
  spent size --rate 1157 --retention 7d --store redis --mem 64GiB --disk 0
  spent size --rate 200000 --retention 7d --store postgres --disk 4TB --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			req, err := parseSizeFlags(rate, retention, store, mem, disk, data, quota, c.Flags().Changed)
			if err != nil {
				return err
			}
			req.asJSON = asJSON
			m.run = func(context.Context) error { return m.size(req) }
			return nil
		},
	}
	f := c.Flags()
	f.Float64Var(&rate, "rate", 0, "records claimed per second (fresh keys), on average over the retention")
	f.StringVar(&retention, "retention", "", "how long each record is kept: a Go `duration` (720h) or days (30d)")
	f.StringVar(&store, "store", "pebble", "`store`: pebble, redis, postgres or etcd")
	f.StringVar(&mem, "mem", "", "the machine's memory in `bytes` (64GiB); default this machine's MemTotal; 0: not checked")
	f.StringVar(&disk, "disk", "", "free disk in `bytes` (500GB); default the free space where --data is; 0: not checked")
	f.StringVar(&data, "data", defaultData, "the data `directory` whose free space --disk defaults to")
	f.StringVar(&quota, "etcd-quota", "2GiB", "etcd's --quota-backend-bytes, in `bytes`")
	f.BoolVar(&asJSON, "json", false, "print the plan as one JSON object")
	for _, name := range []string{"rate", "retention"} {
		_ = c.MarkFlagRequired(name)
	}
	return c
}

// parseSizeFlags checks the flags of spent size and fills in the machine's
// memory and free disk where they were not given.
func parseSizeFlags(rate float64, retention, store, mem, disk, data, quota string, changed func(string) bool) (sizeRequest, error) {
	req := sizeRequest{store: store, rate: rate}
	if _, ok := sizeStores[store]; !ok {
		return req, usagef("--store %q: want pebble, redis, postgres or etcd", store)
	}
	if _, ok := sizeFigures.Points[store]; !ok {
		return req, usagef("--store %s: the benchmark measured nothing for it", store)
	}
	if rate <= 0 || math.IsInf(rate, 0) || math.IsNaN(rate) {
		return req, usagef("--rate %g: must be a positive number of records a second", rate)
	}
	d, err := parseRetention(retention)
	if err != nil {
		return req, usagef("--retention %q: %w", retention, err)
	}
	req.retention = d
	if rate*d.Seconds() > maxSizeRecords {
		return req, usagef("--rate %g × --retention %s: %.3g records, more than spent size plans for", rate, retention, rate*d.Seconds())
	}
	if req.mem, req.memFrom, err = sizeFlagBytes("mem", mem, changed("mem"), machineMemory); err != nil {
		return req, err
	}
	freeDisk := func() (int64, string, error) { return freeSpace(data) }
	if req.disk, req.diskFrom, err = sizeFlagBytes("disk", disk, changed("disk"), freeDisk); err != nil {
		return req, err
	}
	if req.etcdQuota, err = parseBytes(quota); err != nil || req.etcdQuota <= 0 {
		if err == nil {
			err = errors.New("must be positive")
		}
		return req, usagef("--etcd-quota %q: %w", quota, err)
	}
	req.quotaFrom = "etcd's default quota"
	if changed("etcd-quota") {
		req.quotaFrom = "--etcd-quota"
	}
	return req, nil
}

// sizeFlagBytes returns the value of the byte-size flag name, or, when it was
// not given, what def finds on this machine; and where the value came from.
// Zero means not checked.
func sizeFlagBytes(name, value string, given bool, def func() (int64, string, error)) (int64, string, error) {
	if !given {
		n, from, err := def()
		if err != nil {
			return 0, fmt.Sprintf("%v; give --%s", err, name), nil
		}
		return n, from, nil
	}
	n, err := parseBytes(value)
	if err != nil {
		return 0, "", usagef("--%s %q: %w", name, value, err)
	}
	if n < 0 {
		return 0, "", usagef("--%s %q: must not be negative", name, value)
	}
	if n == 0 {
		return 0, "--" + name + " 0", nil
	}
	return n, "--" + name, nil
}

var daysPrefix = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)d`)

// parseRetention parses a Go duration, optionally led by a number of days
// ("30d", "1.5d", "7d12h"), and refuses one that is not positive.
func parseRetention(s string) (time.Duration, error) {
	var d time.Duration
	if m := daysPrefix.FindStringSubmatch(s); m != nil {
		days, err := strconv.ParseFloat(m[1], 64)
		if err != nil || days > 100*365 {
			return 0, errors.New("too many days")
		}
		d = time.Duration(days * 24 * float64(time.Hour))
		s = s[len(m[0]):]
	} else if s == "" {
		return 0, errors.New("want a duration such as 720h or 30d")
	}
	if s != "" {
		rest, err := time.ParseDuration(s)
		if err != nil {
			return 0, errors.New("want a Go duration (720h) or days (30d)")
		}
		d += rest
	}
	if d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, nil
}

var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
}

var bytesPattern = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)$`)

// parseBytes parses a byte count with an optional SI (kB, MB, GB, TB) or IEC
// (KiB, MiB, GiB, TiB) unit, case-insensitive.
func parseBytes(s string) (int64, error) {
	m := bytesPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, errors.New("want bytes with an optional unit, such as 64GiB or 500GB")
	}
	unit, ok := byteUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q: want B, kB, MB, GB, TB, KiB, MiB, GiB or TiB", m[2])
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v*unit > math.MaxInt64/2 {
		return 0, errors.New("too large")
	}
	return int64(v * unit), nil
}

// machineMemory returns MemTotal of /proc/meminfo.
func machineMemory() (int64, string, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, "", errors.New("cannot read /proc/meminfo")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if _, err := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); err == nil && kb > 0 {
			return kb << 10, "this machine's MemTotal", nil
		}
	}
	return 0, "", errors.New("no MemTotal in /proc/meminfo")
}

// freeSpace returns the space available to this user on the file system of
// dir, or of its nearest existing parent.
func freeSpace(dir string) (int64, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return 0, "", err
	}
	for p := abs; ; p = filepath.Dir(p) {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err == nil {
			return int64(st.Bavail) * int64(st.Bsize), "free space of the file system of " + p, nil
		}
		if p == filepath.Dir(p) {
			return 0, "", fmt.Errorf("cannot read the free space of %s", dir)
		}
	}
}

// size prints the plan.
func (m *Main) size(req sizeRequest) error {
	plan := planSize(req, sizeFigures)
	if req.asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(plan)
	}
	return writeSizePlan(m.Stdout, plan)
}

// How a figure was read off a store's cost curve.
const (
	howMeasured     = "measured"     // at a measured record count
	howInterpolated = "interpolated" // linearly, between two measured counts
	howExtrapolated = "extrapolated" // beyond the largest measured count
	howBelow        = "below_range"  // below the smallest: the smallest's figure
)

// sizeFigure is one figure of a plan: its value (bytes, seconds or
// claims/s), what it was made from, and how that was read off the curve.
type sizeFigure struct {
	Value float64 `json:"value"`
	// PerRecord and Base make Value = Base + PerRecord × records, for the
	// figures in bytes.
	PerRecord float64 `json:"per_record,omitempty"`
	Base      float64 `json:"base,omitempty"`
	How       string  `json:"how"`
	// FromRecords is the measured record count the figure comes from,
	// unless it was interpolated.
	FromRecords int64 `json:"from_records,omitempty"`
}

// sizeLimit is one limit of a store, checked against the plan.
type sizeLimit struct {
	Name    string  `json:"limit"` // memory, disk, etcd quota, write rate
	Need    float64 `json:"need"`  // bytes, or records/s
	Have    float64 `json:"have"`  // 0 when not checked
	From    string  `json:"from"`  // where Have comes from
	Checked bool    `json:"checked"`
	Fits    bool    `json:"fits"`
	Note    string  `json:"note,omitempty"`
}

// sizePlan is spent size's answer; --json prints it as is.
type sizePlan struct {
	Store            string      `json:"store"`
	RatePerSec       float64     `json:"rate_per_sec"`
	Retention        string      `json:"retention"`
	RetentionSeconds float64     `json:"retention_seconds"`
	Records          int64       `json:"records"`
	MeasuredRecords  []int64     `json:"measured_records"`
	Disk             *sizeFigure `json:"disk_bytes,omitempty"`
	Memory           *sizeFigure `json:"memory_bytes,omitempty"`
	Filter           *sizeFigure `json:"filter_bytes,omitempty"`
	RestartClean     *sizeFigure `json:"restart_clean_s,omitempty"`
	RestartKill      *sizeFigure `json:"restart_kill_s,omitempty"`
	Batch            *sizeFigure `json:"claims_per_sec_batch,omitempty"`
	Single           *sizeFigure `json:"claims_per_sec_single,omitempty"`
	Limits           []sizeLimit `json:"limits"`
	Fits             bool        `json:"fits"`
	Verdict          string      `json:"verdict"`
	Figures          sizeSource  `json:"figures"`
}

// sizeSource says where a plan's figures come from.
type sizeSource struct {
	File    string `json:"file"`
	Date    string `json:"date"`
	Command string `json:"command"`
	Machine string `json:"machine"`
	Note    string `json:"note,omitempty"`
}

// maxSizeRecords bounds rate × retention, far above any plan, so that the
// record count stays exact in an int64 and a float64.
const maxSizeRecords = 1 << 53

// planSize makes the plan of req from the benchmark's figures.
func planSize(req sizeRequest, fig sizeBench) sizePlan {
	pts := fig.Points[req.store]
	n := math.Round(req.rate * req.retention.Seconds())
	p := sizePlan{
		Store:            req.store,
		RatePerSec:       req.rate,
		Retention:        req.retention.String(),
		RetentionSeconds: req.retention.Seconds(),
		Records:          int64(n),
		Figures:          sizeSource{"bench/scale/results.json", fig.Date, fig.Command, fig.Machine, fig.Note},
	}
	for _, pt := range pts {
		p.MeasuredRecords = append(p.MeasuredRecords, pt.Records)
	}
	p.Disk = perRecord(pts, n, func(pt sizePoint) float64 { return pt.DiskBytesPerRecord })
	p.Memory = perRecord(pts, n, func(pt sizePoint) float64 { return pt.MemBytesPerRecord })
	if p.Memory != nil {
		p.Memory.Base = memoryBase(pts)
		p.Memory.Value += p.Memory.Base
	}
	p.Filter = perRecord(pts, n, func(pt sizePoint) float64 { return pt.FilterBytesPerRecord })
	p.RestartClean = readCurve(pts, n, func(pt sizePoint) float64 { return pt.RestartCleanS }, true)
	p.RestartKill = readCurve(pts, n, func(pt sizePoint) float64 { return pt.RestartKillS }, true)
	p.Batch = readCurve(pts, n, func(pt sizePoint) float64 { return pt.ClaimsPerSecBatch }, false)
	p.Single = readCurve(pts, n, func(pt sizePoint) float64 { return pt.ClaimsPerSecSingle }, false)
	p.Limits = sizeLimits(req, &p)
	p.Fits, p.Verdict = sizeVerdict(sizeStores[req.store].machine, p.Limits)
	return p
}

// readCurve returns the figure f at n records, read off the points where f
// was measured (is not zero), or nil when none was. Between two measured
// counts it interpolates linearly. Beyond the largest it extrapolates: with
// grow, along the line through the last two points (through the origin and
// the point, when there is one; never downwards), else holding the largest
// point's figure. Below the smallest it holds the smallest's.
func readCurve(pts []sizePoint, n float64, f func(sizePoint) float64, grow bool) *sizeFigure {
	var xs, ys []float64
	for _, pt := range pts {
		if v := f(pt); v > 0 {
			xs, ys = append(xs, float64(pt.Records)), append(ys, v)
		}
	}
	if len(xs) == 0 {
		return nil
	}
	last := len(xs) - 1
	switch {
	case n < xs[0]:
		return &sizeFigure{Value: ys[0], How: howBelow, FromRecords: int64(xs[0])}
	case n > xs[last]:
		v := ys[last]
		if grow {
			slope := ys[last] / xs[last]
			if last > 0 {
				slope = (ys[last] - ys[last-1]) / (xs[last] - xs[last-1])
			}
			v += max(slope, 0) * (n - xs[last])
		}
		return &sizeFigure{Value: v, How: howExtrapolated, FromRecords: int64(xs[last])}
	}
	for i := range xs {
		if n == xs[i] {
			return &sizeFigure{Value: ys[i], How: howMeasured, FromRecords: int64(xs[i])}
		}
		if n < xs[i+1] {
			t := (n - xs[i]) / (xs[i+1] - xs[i])
			return &sizeFigure{Value: ys[i] + t*(ys[i+1]-ys[i]), How: howInterpolated}
		}
	}
	panic("unreachable: n is within the measured range")
}

// perRecord is readCurve of a per-record figure in bytes, made a total for n
// records.
func perRecord(pts []sizePoint, n float64, f func(sizePoint) float64) *sizeFigure {
	fig := readCurve(pts, n, f, false)
	if fig != nil {
		fig.PerRecord = fig.Value
		fig.Value *= n
	}
	return fig
}

// memoryBase is the memory of the store's process that does not grow with
// records: at the largest point where RSS and memory per record were both
// measured, the RSS less memory per record × records (never below zero).
func memoryBase(pts []sizePoint) float64 {
	for i := len(pts) - 1; i >= 0; i-- {
		pt := pts[i]
		if pt.RSSBytes > 0 && pt.MemBytesPerRecord > 0 {
			return max(float64(pt.RSSBytes)-pt.MemBytesPerRecord*float64(pt.Records), 0)
		}
	}
	return 0
}

// sizeLimits checks the plan against each limit of the store.
func sizeLimits(req sizeRequest, p *sizePlan) []sizeLimit {
	var ls []sizeLimit
	for _, name := range sizeStores[req.store].limits {
		l := sizeLimit{Name: name}
		var need *sizeFigure
		switch name {
		case "memory":
			need, l.Have, l.From = p.Memory, float64(req.mem), req.memFrom
		case "disk":
			need, l.Have, l.From = p.Disk, float64(req.disk), req.diskFrom
		case "etcd quota":
			need, l.Have, l.From = p.Disk, float64(req.etcdQuota), req.quotaFrom
			l.Note = etcdQuotaNote(p.Disk, req.etcdQuota)
		case "write rate":
			need, l.From = p.Batch, "measured, batches of 100"
			if need == nil {
				need, l.From = p.Single, "measured, single claims"
			}
			if need != nil {
				l.Have, need = need.Value, &sizeFigure{Value: req.rate}
			}
			if p.Batch != nil && p.Single != nil && req.rate > p.Single.Value {
				l.Note = "in batches only: single claims were measured at " + humanCount(p.Single.Value) + "/s"
			}
		}
		switch {
		case need == nil:
			l.From = "not measured by the benchmark"
		case l.Have > 0:
			l.Need, l.Checked, l.Fits = need.Value, true, need.Value <= l.Have
		default:
			l.Need = need.Value
		}
		ls = append(ls, l)
	}
	return ls
}

// etcdQuotaNote says when the database would outgrow what etcd suggests as
// the largest quota, or when the quota given is larger than that.
func etcdQuotaNote(db *sizeFigure, quota int64) string {
	switch {
	case db != nil && db.Value > etcdMaxQuota:
		return "beyond the 8 GiB etcd suggests as the largest quota: use another store, or keep records for less long"
	case quota > etcdMaxQuota:
		return "the quota is above the 8 GiB etcd suggests as the largest"
	}
	return ""
}

// sizeVerdict sums up the limits: whether the plan fits, and one line saying
// on what, or which limits it exceeds, with their numbers.
func sizeVerdict(machine string, ls []sizeLimit) (bool, string) {
	var over, with, unchecked []string
	for _, l := range ls {
		switch {
		case !l.Checked:
			unchecked = append(unchecked, l.Name)
		case !l.Fits:
			over = append(over, fmt.Sprintf("%s (needs %s, has %s)", l.Name, limitAmount(l.Name, l.Need), limitAmount(l.Name, l.Have)))
		case l.Name == "memory":
			with = append(with, humanBytes(l.Have)+" RAM")
		case l.Name == "disk":
			with = append(with, humanBytes(l.Have)+" free disk")
		case l.Name == "etcd quota":
			with = append(with, "a "+humanBytes(l.Have)+" database quota")
		}
	}
	if len(over) > 0 {
		return false, "exceeds " + machine + ": " + strings.Join(over, ", ")
	}
	v := "fits " + machine
	if len(with) > 0 {
		v += " with " + strings.Join(with, " and ")
	}
	if len(unchecked) > 0 {
		v += "; not checked: " + strings.Join(unchecked, ", ")
	}
	return true, v
}

// limitAmount formats an amount of the limit name: records/s for the write
// rate, bytes for the others.
func limitAmount(name string, v float64) string {
	if name == "write rate" {
		return humanCount(v) + "/s"
	}
	return humanBytes(v)
}

// writeSizePlan prints the plan as aligned text, to paste into a review.
func writeSizePlan(w io.Writer, p sizePlan) error {
	st := sizeStores[p.Store]
	bw := &errWriter{w: w}
	fmt.Fprintf(bw, "Capacity plan: %s records/s kept %s on %s\n\n", humanCount(p.RatePerSec), humanDuration(p.RetentionSeconds), st.title)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  records held\t%s\t\t%s/s × %s s\n", humanCount(float64(p.Records)), humanCount(p.RatePerSec), humanCount(p.RetentionSeconds))
	bytesRow(tw, "disk", p.Disk, "")
	bytesRow(tw, "memory", p.Memory, st.memory)
	if p.Filter != nil {
		bytesRow(tw, "filter memory", p.Filter, "part of the memory")
	}
	restartRow(tw, "restart, clean", p.RestartClean, st.restart+" after a clean stop")
	restartRow(tw, "restart, kill -9", p.RestartKill, st.restart+" after kill -9")
	rateRow(tw, "write rate", p.Batch, p.RatePerSec, "batches of 100")
	rateRow(tw, "", p.Single, p.RatePerSec, "single claims")
	tw.Flush()
	for _, note := range howNotes(p) {
		fmt.Fprintf(bw, "  %s\n", note)
	}
	fmt.Fprintf(bw, "\nLimits\n")
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	for _, l := range p.Limits {
		limitRow(tw, l)
	}
	tw.Flush()
	fmt.Fprintf(bw, "\nVerdict: %s\n\n", p.Verdict)
	fmt.Fprintf(bw, "Figures: %s of %s", p.Figures.File, p.Figures.Date)
	if p.Figures.Note != "" {
		fmt.Fprintf(bw, ". %s", p.Figures.Note)
	}
	fmt.Fprintf(bw, "\n  measured points (records): %s\n", joinCounts(p.MeasuredRecords))
	fmt.Fprintf(bw, "  command: %s\n  machine: %s\n", p.Figures.Command, p.Figures.Machine)
	return bw.err
}

// errWriter keeps the first write error, so that the printing can ignore
// them.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

// bytesRow prints a figure in bytes: its total, and what it is made of.
func bytesRow(w io.Writer, label string, f *sizeFigure, what string) {
	if f == nil {
		fmt.Fprintf(w, "  %s\tnot measured\n", label)
		return
	}
	detail := humanPer(f.PerRecord) + " B a record"
	if f.Base > 0 {
		detail = humanBytes(f.Base) + " + " + detail
	}
	if what != "" {
		detail += " (" + what + ")"
	}
	fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", label, humanBytes(f.Value), howLabel[f.How], detail)
}

// restartRow prints a restart time.
func restartRow(w io.Writer, label string, f *sizeFigure, what string) {
	if f == nil {
		fmt.Fprintf(w, "  %s\tnot measured\n", label)
		return
	}
	fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", label, humanDuration(f.Value), howLabel[f.How], what)
}

// rateRow prints a measured write rate and its ratio to the rate asked.
func rateRow(w io.Writer, label string, f *sizeFigure, asked float64, what string) {
	if f == nil {
		fmt.Fprintf(w, "  %s\tnot measured\t\t%s\n", label, what)
		return
	}
	fmt.Fprintf(w, "  %s\t%s/s\t%s\t%s: %s× the rate asked\n", label, humanCount(f.Value), howLabel[f.How], what, humanRatio(f.Value/asked))
}

// limitRow prints one limit: fits, EXCEEDS or not checked, with its numbers.
func limitRow(w io.Writer, l sizeLimit) {
	state := "fits"
	switch {
	case !l.Checked:
		state = "not checked"
	case !l.Fits:
		state = "EXCEEDS"
	}
	nums := "needs " + limitAmount(l.Name, l.Need)
	if l.Checked {
		nums += ", has " + limitAmount(l.Name, l.Have)
	}
	nums += " (" + l.From + ")"
	if l.Note != "" {
		nums += "; " + l.Note
	}
	fmt.Fprintf(w, "  %s\t%s\t%s\n", l.Name, state, nums)
}

// howLabel names, in the text plan, how each figure was read off the curve.
var howLabel = map[string]string{
	howMeasured:     "measured",
	howInterpolated: "interpolated",
	howExtrapolated: "EXTRAPOLATED",
	howBelow:        "below range",
}

// howNotes explains the labels of the figures of p that are not plain
// readings: an extrapolation, or a record count below the measured range.
func howNotes(p sizePlan) []string {
	seen := map[string]bool{}
	for _, f := range []*sizeFigure{p.Disk, p.Memory, p.Filter, p.RestartClean, p.RestartKill, p.Batch, p.Single} {
		if f != nil {
			seen[f.How] = true
		}
	}
	var notes []string
	if seen[howExtrapolated] {
		notes = append(notes, "EXTRAPOLATED: more records than the largest count measured (the measured points are below):"+
			" per-record figures and write rates are the largest point's, restart times grow linearly in records"+
			" along the last two points. Rerun the benchmark at this size to know.")
	}
	if seen[howBelow] {
		notes = append(notes, "below range: fewer records than the smallest count measured: the smallest point's figures.")
	}
	return notes
}

// humanBytes formats a byte count in IEC units: 512 B, 1.5 KiB, 273.4 GiB.
func humanBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for ; math.Round(v*10)/10 >= 1024 && i < len(units)-1; i++ {
		v /= 1024
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", v)
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// humanDuration formats seconds: 850 ms, 4.2 s, 30.1 min, 5 h, 30 days.
func humanDuration(s float64) string {
	var v float64
	var unit string
	switch {
	case s < 1:
		return fmt.Sprintf("%.0f ms", s*1000)
	case s < 60:
		v, unit = s, "s"
	case s < 3600:
		v, unit = s/60, "min"
	case s < 48*3600:
		v, unit = s/3600, "h"
	default:
		v, unit = s/86400, "days"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + " " + unit
}

// humanCount formats a count or rate: whole with thousands separators from
// 100 up, with up to 4 significant digits below.
func humanCount(v float64) string {
	if v < 100 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// humanPer formats a per-record figure or a ratio to two decimals at most.
func humanPer(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// humanRatio formats a ratio: two decimals at most, two significant digits
// below 1.
func humanRatio(v float64) string {
	if v < 1 {
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return humanPer(v)
}

// joinCounts formats record counts.
func joinCounts(ns []int64) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = humanCount(float64(n))
	}
	return strings.Join(s, ", ")
}
