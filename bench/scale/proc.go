package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procRSS returns the VmRSS of process pid in bytes, or 0.
func procRSS(pid int) int64 { return statusField("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS:") }

// treePSS returns the proportional set size of pid and its descendants.
func treePSS(pid int) int64 {
	total := statusField("/proc/"+strconv.Itoa(pid)+"/smaps_rollup", "Pss:")
	for _, child := range children(pid) {
		total += treePSS(child)
	}
	return total
}

func children(pid int) []int {
	var out []int
	p := fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// statusField reads a "Name:   123 kB" line of a /proc file, in bytes.
func statusField(path, name string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			fs := strings.Fields(v)
			if len(fs) > 0 {
				n, _ := strconv.ParseInt(fs[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// duBytes returns the disk space the files under dir occupy (allocated
// blocks, as du counts them).
func duBytes(dir string) (int64, error) { return duMatching(dir, "") }

// duMatching is duBytes of the files whose names end with suffix.
func duMatching(dir, suffix string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, suffix) {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total, err
}

// round rounds v to prec decimals.
func round(v float64, prec int) float64 {
	p := math.Pow(10, float64(prec))
	return math.Round(v*p) / p
}
