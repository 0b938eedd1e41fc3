package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spentledger/spent/internal/scaleresults"
)

// Results and Run are the results file's (see package scaleresults).
type (
	Results = scaleresults.Results
	Run     = scaleresults.Run
)

// storeOrder is the order of the stores in the table and the plot.
var storeOrder = scaleresults.StoreOrder

func readResults(path string) (*Results, error) { return scaleresults.Read(path) }

func writeResults(path string, r *Results) error { return scaleresults.Write(path, r) }

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
