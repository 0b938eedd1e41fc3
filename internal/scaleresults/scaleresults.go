// Package scaleresults is the file bench/scale/results.json: the contract
// between the cost-curve benchmark (bench/scale), which writes it, and
// spent size, whose figures (cmd/spent/size_figures.go) are generated from
// it and checked against it.
package scaleresults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
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

// StoreOrder is the order of the stores in the file, the table and the
// plot.
var StoreOrder = []string{"pebble", "redis", "postgres", "etcd"}

// Read reads and checks a results file; unknown fields are refused.
func Read(path string) (*Results, error) {
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

// Write writes r to path (through a temporary file and a rename), its runs
// sorted by store (StoreOrder), then records.
func Write(path string, r *Results) error {
	slices.SortStableFunc(r.Runs, func(a, b Run) int {
		if c := slices.Index(StoreOrder, a.Store) - slices.Index(StoreOrder, b.Store); c != 0 {
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
