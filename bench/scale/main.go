// Command scale is the driver of bench/scale.sh, the cost curve of spent's
// stores: for one store at one size it loads the records in process,
// measures claims/s and their p99, memory, bytes per record, restart time
// and sweep time, and writes the figures into bench/scale/results.json;
// it also renders that file as the table of BENCHMARKS.md and as the data
// of the plot. See bench/scale/README.md for the subcommands; bench/scale.sh
// runs them in order.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("scale: ")
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmds := map[string]func(context.Context, []string) error{
		"init": cmdInit, "pebble": cmdPebble, "shared": cmdShared, "check": cmdCheck, "set": cmdSet, "render": cmdRender,
	}
	run, ok := cmds[os.Args[1]]
	if !ok {
		usage()
	}
	if err := run(ctx, os.Args[2:]); err != nil {
		log.Fatalf("%s: FAILED: %v", os.Args[1], err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: scale init|pebble|shared|check|set|render [flags] (see bench/scale/README.md)")
	os.Exit(2)
}

// parseCount reads a record count written 1000000, 1e6 or 1M.
func parseCount(s string) (int64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1e9, strings.TrimSuffix(s, "G")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f*mult < 1 || f*mult > 1e10 {
		return 0, fmt.Errorf("record count %q: want a number from 1 to 1e10", s)
	}
	return int64(f * mult), nil
}

func cmdInit(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("init", flag.ExitOnError)
	out := fs.String("out", "bench/scale/results.json", "results file to create")
	command := fs.String("command", "", "the command line of the run")
	machine := fs.String("machine", "", "the machine")
	fs.Parse(args)
	return writeResults(*out, &Results{Date: time.Now().UTC().Format(time.DateOnly), Command: *command, Machine: *machine, Runs: []Run{}})
}

// common are the flags of pebble and shared.
type common struct {
	out                          *string
	records                      *string
	duration                     *time.Duration
	workers, batch, batchers, sm *int
	sweepBatch                   *int
}

func commonFlags(fs *flag.FlagSet) common {
	return common{
		out:        fs.String("out", "bench/scale/results.json", "results file (made by init) to add the run to"),
		records:    fs.String("records", "1e6", "records to load"),
		duration:   fs.Duration("duration", 20*time.Second, "duration of each claim measurement (single, then batched)"),
		workers:    fs.Int("load-workers", 4, "goroutines loading the records"),
		batch:      fs.Int("load-batch", 1000, "claims per ClaimBatch of the load"),
		batchers:   fs.Int("batchers", 4, "goroutines calling ClaimBatch of 100 in the batched measurement"),
		sm:         fs.Int("sample", 1000, "loaded keys checked after the load, each restart and the sweep"),
		sweepBatch: fs.Int("sweep-batch", 1000, "records per DeleteExpired call (spent serve's sweeper uses 1000)"),
	}
}

func cmdPebble(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pebble", flag.ExitOnError)
	c := commonFlags(fs)
	dir := fs.String("dir", "", "a new or empty directory on the disk to measure (required)")
	bin := fs.String("spent", "", "the spent binary (required)")
	fs.Parse(args)
	n, err := parseCount(*c.records)
	if err != nil {
		return err
	}
	if *dir == "" || *bin == "" {
		return errors.New("-dir and -spent are required")
	}
	run, err := runPebble(ctx, pebbleConfig{records: n, dir: *dir, spentBin: *bin, duration: *c.duration, workers: *c.workers,
		loadBatch: *c.batch, batchers: *c.batchers, sample: *c.sm, sweepBatch: *c.sweepBatch})
	if err != nil {
		return err
	}
	return upsert(*c.out, run)
}

func cmdShared(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("shared", flag.ExitOnError)
	c := commonFlags(fs)
	store := fs.String("store", "", "redis, postgres or etcd")
	addr := fs.String("addr", "", "redis: host:port; postgres: DSN; etcd: host:port[,host:port...]")
	pid := fs.Int("pid", 0, "the server's process id, for its memory")
	fs.Parse(args)
	n, err := parseCount(*c.records)
	if err != nil {
		return err
	}
	run, err := runShared(ctx, sharedConfig{store: *store, addr: *addr, pid: *pid, records: n, duration: *c.duration,
		workers: *c.workers, loadBatch: *c.batch, batchers: *c.batchers, sample: *c.sm, sweepB: *c.sweepBatch})
	if err != nil {
		return err
	}
	return upsert(*c.out, run)
}

func cmdCheck(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	store := fs.String("store", "", "redis, postgres or etcd")
	addr := fs.String("addr", "", "as for shared")
	records := fs.String("records", "", "records loaded")
	sample := fs.Int("sample", 1000, "loaded keys to check")
	fs.Parse(args)
	n, err := parseCount(*records)
	if err != nil {
		return err
	}
	return checkShared(ctx, *store, *addr, n, *sample)
}

func cmdSet(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("set", flag.ExitOnError)
	out := fs.String("out", "bench/scale/results.json", "results file")
	store := fs.String("store", "", "store of the run")
	records := fs.String("records", "", "records of the run")
	all := fs.Bool("all", false, "set the fields of every run instead of one")
	fs.Parse(args)
	r, err := readResults(*out)
	if err != nil {
		return err
	}
	runs := []*Run{}
	if *all {
		for i := range r.Runs {
			runs = append(runs, &r.Runs[i])
		}
	} else {
		n, err := parseCount(*records)
		if err != nil {
			return err
		}
		run, err := find(r, *store, n)
		if err != nil {
			return err
		}
		runs = append(runs, run)
	}
	for _, run := range runs {
		for _, kv := range fs.Args() {
			if err := setField(run, kv); err != nil {
				return err
			}
		}
	}
	return writeResults(*out, r)
}

func cmdRender(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("render", flag.ExitOnError)
	in := fs.String("in", "bench/scale/results.json", "results file")
	md := fs.String("md", "", "markdown file whose table between the scale-table markers is replaced (none: print the table)")
	dat := fs.String("dat", "", "data file for bench/plot/cost-curve.gp to write")
	gofile := fs.String("go", "", "Go file of spent size's figures to write (cmd/spent/size_figures.go)")
	fs.Parse(args)
	r, err := readResults(*in)
	if err != nil {
		return err
	}
	if *gofile != "" {
		if err := writeGoFigures(*gofile, r); err != nil {
			return err
		}
	}
	if *dat != "" {
		if err := writeDat(*dat, r); err != nil {
			return err
		}
	}
	t := table(r)
	if *md == "" {
		fmt.Print(t)
		return nil
	}
	doc, err := os.ReadFile(*md)
	if err != nil {
		return err
	}
	out, err := replaceBetween(string(doc), t)
	if err != nil {
		return fmt.Errorf("%s: %w: add them to the \"Cost curve\" section", *md, err)
	}
	return os.WriteFile(*md, []byte(out), 0o644)
}
