package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// table renders r as the markdown of BENCHMARKS.md's cost-curve section:
// the command, the machine, the table and the notes of each run.
func table(r *Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run on %s: `%s`\n\nMachine: %s\n\n", r.Date, r.Command, r.Machine)
	b.WriteString("| store | records | claims/s single | claims/s batch 100 | p99 single ms | p99 batch ms | RSS | disk B/rec | mem B/rec | filter B/rec | restart clean s | restart kill -9 s | sweep s (swept) |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var notes []string
	for i, x := range r.Runs {
		sweep := "–"
		if x.Swept > 0 {
			sweep = fmt.Sprintf("%.1f (%s)", x.SweepS, count(x.Swept))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			x.Store, count(x.Records), num(x.ClaimsPerSecSingle, 0), num(x.ClaimsPerSecBatch, 0),
			num(x.P99SingleMs, 1), num(x.P99BatchMs, 1), size(x.RSSBytes),
			num(x.DiskBytesPerRecord, 0), num(x.MemBytesPerRecord, 0), num(x.FilterBytesPerRecord, 1),
			num(x.RestartCleanS, 2), num(x.RestartKillS, 2), sweep)
		if x.Notes != "" {
			notes = append(notes, fmt.Sprintf("%d. %s %s: %s", i+1, x.Store, count(x.Records), x.Notes))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nNotes, by row:\n\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}

// num formats v with prec decimals, or a dash for zero (not measured).
func num(v float64, prec int) string {
	if v == 0 {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// count writes n as 100k, 1M, 1.5M, 1G.
func count(n int64) string {
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if float64(n) >= u.div {
			return strconv.FormatFloat(float64(n)/u.div, 'g', 4, 64) + u.unit
		}
	}
	return strconv.FormatInt(n, 10)
}

// size writes n bytes in MiB or GiB, or a dash for zero.
func size(n int64) string {
	switch {
	case n == 0:
		return "–"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

// writeDat writes the data file bench/plot/cost-curve.gp plots: one block
// per store (blocks apart by two blank lines, as gnuplot's index wants),
// each starting with a header line whose first word is the store.
func writeDat(path string, r *Results) error {
	var b strings.Builder
	blocks := 0
	for _, st := range storeOrder {
		i := slices.IndexFunc(r.Runs, func(x Run) bool { return x.Store == st })
		if i < 0 {
			continue
		}
		if blocks > 0 {
			b.WriteString("\n\n")
		}
		blocks++
		fmt.Fprintf(&b, "%s single batch disk_B_rec mem_B_rec restart_clean_s restart_kill_s sweep_s swept\n", st)
		for _, x := range r.Runs {
			if x.Store != st {
				continue
			}
			fmt.Fprintf(&b, "%d %s %s %s %s %s %s %s %d\n", x.Records, dat(x.ClaimsPerSecSingle), dat(x.ClaimsPerSecBatch),
				dat(x.DiskBytesPerRecord), dat(x.MemBytesPerRecord), dat(x.RestartCleanS), dat(x.RestartKillS), dat(x.SweepS), x.Swept)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// dat writes v for gnuplot, with NaN for zero (not measured: no point).
func dat(v float64) string {
	if v == 0 {
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// human writes n bytes in B, KiB, MiB or GiB, for the notes.
func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
