package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	pdb "github.com/cockroachdb/pebble/v2"

	"github.com/spentledger/spent/pebble"
)

// pebbleConfig is what the pebble subcommand measures.
type pebbleConfig struct {
	records    int64
	dir        string // a new directory: the data directory goes in it
	spentBin   string
	duration   time.Duration
	workers    int // load goroutines
	loadBatch  int
	batchers   int // ClaimBatch goroutines
	sample     int // loaded keys checked after each restart
	sweepBatch int
}

// runPebble measures the embedded store at c.records records: it makes a
// data directory with spent serve, loads it in process, measures claims,
// restarts spent serve on it (clean stop, then kill -9 under load), and
// sweeps the expired tenth.
func runPebble(ctx context.Context, c pebbleConfig) (Run, error) {
	run := Run{Store: "pebble", Records: c.records}
	data, logPath := filepath.Join(c.dir, "data"), filepath.Join(c.dir, "serve.log")
	storeDir := filepath.Join(data, "pebble")
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return run, err
	}
	log.Printf("pebble %d: first start of spent serve on %s (secret, fence, empty store)", c.records, data)
	srv, _, err := startServe(c.spentBin, data, logPath)
	if err != nil {
		return run, err
	}
	if err := srv.stop(); err != nil {
		return run, err
	}
	secret, err := os.ReadFile(filepath.Join(data, "secret"))
	if err != nil {
		return run, err
	}
	k, err := newKeyer(secret)
	if err != nil {
		return run, err
	}

	rss0 := procRSS(os.Getpid())
	opts := pebble.DefaultOptions()
	// Room for the claims the measurement adds (a few million at most), at
	// every size: no larger filter is built in the background while
	// claims are measured, which would load the 1M point more than the
	// 100M one. The filter's bytes a record are thus over its steady 2.4
	// to 3.6 at the small sizes (see the notes).
	opts.ExpectedRecords = int(c.records) + measureRoom
	s, err := pebble.Open(storeDir, opts)
	if err != nil {
		return run, err
	}
	base := time.Now()
	log.Printf("pebble %d: loading in batches of %d from %d goroutines", c.records, c.loadBatch, c.workers)
	loadRate, err := load(ctx, s, k, 0, c.records, base, c.workers, c.loadBatch)
	if err != nil {
		s.Close()
		return run, err
	}
	log.Printf("pebble %d: loaded at %.0f records/s", c.records, loadRate)
	if err := checkLoaded(ctx, s, k, c.records, c.sample, base); err != nil {
		s.Close()
		return run, err
	}
	settled := settle(s, c.records)
	claimed, err := measureBoth(ctx, s, c.duration, c.batchers, &run)
	if err != nil {
		s.Close()
		return run, err
	}
	held := c.records + claimed
	run.RSSBytes = procRSS(os.Getpid())
	run.MemBytesPerRecord = round(float64(run.RSSBytes-rss0)/float64(held), 1)
	run.FilterBytesPerRecord = round(float64(s.Stats().FilterBytes)/float64(held), 2)
	if err := s.Close(); err != nil {
		return run, err
	}
	disk, err := duBytes(storeDir)
	if err != nil {
		return run, err
	}
	run.DiskBytesPerRecord = round(float64(disk)/float64(held), 1)
	sst, err := duMatching(storeDir, ".sst")
	if err != nil {
		return run, err
	}
	log.Printf("pebble %d: %d bytes on disk, RSS %d, filter %.1f B/record", c.records, disk, run.RSSBytes, run.FilterBytesPerRecord)

	serveRSS, err := restarts(ctx, c, data, logPath, &run)
	if err != nil {
		return run, err
	}
	debt, err := sweepPebble(ctx, c, storeDir, opts, k, base, &run)
	if err != nil {
		return run, err
	}
	run.Notes = fmt.Sprintf("loaded at %.0f records/s (ClaimBatch of %d from %d goroutines); per-record figures divide by the %d records held when measured (%d loaded + %d claimed by the measurement); "+
		"disk is du of the store directory after Close, %s, of which %s in tables (the rest: WAL files, zero-filled ahead, and the MANIFEST); RSS is the driver's, holding the store (spent serve held %s after its clean restart); restarts are `spent serve` exec to /readyz 200; "+
		"sweep of the expired tenth in DeleteExpired calls of %d (the sweeper's batch); pebble after the sweep: %s; "+
		"expected_records %d (the records loaded and room for the measurement's); claims measured after %s",
		loadRate, c.loadBatch, c.workers, held, c.records, claimed, human(disk), human(sst), human(serveRSS), c.sweepBatch, debt,
		opts.ExpectedRecords, settled)
	return run, nil
}

// restarts times spent serve's restart after a clean stop and after a kill
// -9 under claims, checking loaded and acknowledged keys after each, and
// returns spent serve's RSS once ready after the clean stop.
func restarts(ctx context.Context, c pebbleConfig, data, logPath string, run *Run) (int64, error) {
	log.Printf("pebble %d: restart of spent serve after a clean stop", c.records)
	srv, took, err := startServe(c.spentBin, data, logPath)
	if err != nil {
		return 0, err
	}
	run.RestartCleanS = round(took.Seconds(), 3)
	serveRSS := srv.rss()
	log.Printf("pebble %d: ready in %s (RSS %d); checking %d loaded keys through it", c.records, took, serveRSS, c.sample)
	if err := checkServe(ctx, srv.url, c.records, c.sample, nil); err != nil {
		srv.kill()
		return 0, err
	}
	acked := claimUntilKilled(ctx, srv, 16, 3*time.Second)
	log.Printf("pebble %d: restart after kill -9", c.records)
	srv, took, err = startServe(c.spentBin, data, logPath)
	if err != nil {
		return 0, err
	}
	run.RestartKillS = round(took.Seconds(), 3)
	log.Printf("pebble %d: ready in %s; checking %d loaded keys and the %d acknowledged ones", c.records, took, c.sample, len(acked))
	if err := checkServe(ctx, srv.url, c.records, c.sample, acked); err != nil {
		srv.kill()
		return 0, err
	}
	return serveRSS, srv.stop()
}

// sweepPebble reopens the store, times the sweep of the expired tenth and
// returns pebble's compaction debt and tombstones once it is closed.
func sweepPebble(ctx context.Context, c pebbleConfig, dir string, opts pebble.Options, k *keyer, base time.Time, run *Run) (string, error) {
	s, err := pebble.Open(dir, opts)
	if err != nil {
		return "", err
	}
	log.Printf("pebble %d: sweeping the %d expired records", c.records, expiring(c.records))
	took, n, err := sweep(ctx, s, base, c.sweepBatch)
	if err == nil && n != expiring(c.records) {
		err = fmt.Errorf("sweep removed %d records, want %d", n, expiring(c.records))
	}
	if err == nil {
		err = checkLoaded(ctx, s, k, c.records, c.sample, base)
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	run.SweepS, run.Swept = round(took.Seconds(), 3), n
	log.Printf("pebble %d: swept %d in %s", c.records, n, took)
	return compactionDebt(dir)
}

// compactionDebt opens the closed store with pebble itself, flushes what
// the sweep left in the memtables (its deletions) into tables, without
// compactions, and describes the LSM: the estimated compaction debt and,
// per level, the tables and the point and range deletions they hold. The
// directory is not meant to be opened by the store again afterwards: its
// witness did not see this flush.
func compactionDebt(dir string) (string, error) {
	db, err := pdb.Open(dir, &pdb.Options{DisableAutomaticCompactions: true, Logger: quiet{}})
	if err != nil {
		return "", fmt.Errorf("opening the store with pebble for its metrics: %w", err)
	}
	defer db.Close()
	if err := db.Flush(); err != nil {
		return "", err
	}
	m := db.Metrics()
	tables, err := db.SSTables(pdb.WithProperties())
	if err != nil {
		return "", err
	}
	var levels []string
	for l, ts := range tables {
		var dels, rangeDels, entries uint64
		for _, t := range ts {
			if p := t.Properties; p != nil {
				dels += p.NumDeletions - p.NumRangeDeletions
				rangeDels += p.NumRangeDeletions
				entries += p.NumEntries
			}
		}
		if len(ts) > 0 {
			levels = append(levels, fmt.Sprintf("L%d %d tables %s, %d entries, %d point deletions, %d range deletions",
				l, len(ts), human(m.Levels[l].TablesSize), entries, dels, rangeDels))
		}
	}
	out := fmt.Sprintf("estimated compaction debt %s; %s", human(int64(m.Compact.EstimatedDebt)), strings.Join(levels, "; "))
	log.Printf("pebble LSM after the sweep:\n%s", m)
	return out, nil
}

// quiet drops pebble's informational messages.
type quiet struct{}

func (quiet) Infof(string, ...any) {}

func (quiet) Errorf(format string, args ...any) { log.Printf(format, args...) }

func (quiet) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }

// measureRoom is how many records the claims measurement may add, which
// the filter is made to hold beside the loaded ones.
const measureRoom = 5_000_000

// maxSettle bounds the wait for pebble's compactions after a load.
const maxSettle = 15 * time.Minute

// settle waits, after a load, until pebble runs no compaction and owes
// less than 256 MiB of them, or has run none for three checks in a row
// (pebble leaves a debt it does not think worth a compaction), or
// maxSettle has passed, so that the claims
// are measured on a store that holds its records, as a server that has
// held them a while does, not on one still digesting a bulk load that no
// server sees; every size waits the same way. It returns what it waited
// and how, for the notes.
func settle(s *pebble.Store, records int64) string {
	t0 := time.Now()
	for quiet := 0; ; {
		st := s.Stats()
		if st.Compacting == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if st.Compacting == 0 && (st.CompactionDebt < 256<<20 || quiet >= 3) {
			return fmt.Sprintf("pebble's compactions settled (%s waited, debt %s)",
				time.Since(t0).Round(time.Second), human(int64(st.CompactionDebt)))
		}
		if time.Since(t0) > maxSettle {
			return fmt.Sprintf("%s waiting for pebble's compactions, which had not settled (debt %s, %d running)",
				time.Since(t0).Round(time.Second), human(int64(st.CompactionDebt)), st.Compacting)
		}
		log.Printf("pebble %d: waiting for compactions: debt %s, %d running", records, human(int64(st.CompactionDebt)), st.Compacting)
		time.Sleep(10 * time.Second)
	}
}
