package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Results is the file bench/scale/results.json: the contract between
// bench/scale.sh and `spent size`. Its fields and their JSON names are
// fixed; keep them as they are.
type Results struct {
	Date    string `json:"date"`
	Command string `json:"command"`
	Machine string `json:"machine"`
	Runs    []Run  `json:"runs"`
}

// Run is one store at one size.
type Run struct {
	Store                string  `json:"store"`
	Records              int64   `json:"records"`
	ClaimsPerSecSingle   float64 `json:"claims_per_sec_single"`
	ClaimsPerSecBatch    float64 `json:"claims_per_sec_batch"`
	P99SingleMs          float64 `json:"p99_single_ms"`
	P99BatchMs           float64 `json:"p99_batch_ms"`
	RSSBytes             int64   `json:"rss_bytes"`
	DiskBytesPerRecord   float64 `json:"disk_bytes_per_record"`
	MemBytesPerRecord    float64 `json:"mem_bytes_per_record"`
	FilterBytesPerRecord float64 `json:"filter_bytes_per_record"`
	RestartCleanS        float64 `json:"restart_clean_s"`
	RestartKillS         float64 `json:"restart_kill_s"`
	SweepS               float64 `json:"sweep_s"`
	Swept                int64   `json:"swept"`
	Notes                string  `json:"notes"`
}

// storeOrder is the order of the stores in the table and the plot.
var storeOrder = []string{"pebble", "redis", "postgres", "etcd"}

func readResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

func writeResults(path string, r *Results) error {
	slices.SortStableFunc(r.Runs, func(a, b Run) int {
		if c := slices.Index(storeOrder, a.Store) - slices.Index(storeOrder, b.Store); c != 0 {
			return c
		}
		return int(a.Records - b.Records)
	})
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// upsert puts run into the results file at path, replacing a run of the
// same store and size.
func upsert(path string, run Run) error {
	r, err := readResults(path)
	if err != nil {
		return err
	}
	r.Runs = slices.DeleteFunc(r.Runs, func(x Run) bool { return x.Store == run.Store && x.Records == run.Records })
	r.Runs = append(r.Runs, run)
	return writeResults(path, r)
}

// find returns the run of store and records in r.
func find(r *Results, store string, records int64) (*Run, error) {
	for i := range r.Runs {
		if r.Runs[i].Store == store && r.Runs[i].Records == records {
			return &r.Runs[i], nil
		}
	}
	return nil, fmt.Errorf("no run of %s at %d records", store, records)
}

// setField sets one field of run from "name=value"; "notes+=text" appends
// to the notes.
func setField(run *Run, kv string) error {
	name, val, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("%q: want name=value", kv)
	}
	if n, ok := strings.CutSuffix(name, "+"); ok && n == "notes" {
		run.Notes = joinNotes(run.Notes, val)
		return nil
	}
	f, err := strconv.ParseFloat(val, 64)
	switch name {
	case "notes":
		run.Notes = val
		return nil
	case "restart_clean_s":
		run.RestartCleanS = f
	case "restart_kill_s":
		run.RestartKillS = f
	case "sweep_s":
		run.SweepS = f
	default:
		return fmt.Errorf("%q: only notes, notes+, restart_clean_s, restart_kill_s and sweep_s can be set", name)
	}
	if err != nil {
		return fmt.Errorf("%q: %w", kv, err)
	}
	return nil
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return strings.TrimRight(a, ". ") + "; " + b
}

// errNoMarkers is returned when BENCHMARKS.md lacks the table markers.
var errNoMarkers = errors.New("markers not found")

const (
	beginMarker = "<!-- scale-table: begin (bench/scale.sh writes this table) -->"
	endMarker   = "<!-- scale-table: end -->"
)

// replaceBetween replaces what lies between the markers in doc by body.
func replaceBetween(doc, body string) (string, error) {
	i := strings.Index(doc, beginMarker)
	j := strings.Index(doc, endMarker)
	if i < 0 || j < i {
		return "", errNoMarkers
	}
	return doc[:i+len(beginMarker)] + "\n" + body + doc[j:], nil
}
