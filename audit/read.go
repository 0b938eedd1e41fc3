package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/spentledger/spent"
)

// DefaultMaxEvents is the default limit on the events one Read keeps.
const DefaultMaxEvents = 10_000_000

// ErrDamaged is returned, wrapped in a message naming the file and offset,
// for a line that cannot be read anywhere but at the end of a file.
var ErrDamaged = errors.New("damaged audit log")

// ErrTooMany is returned, wrapped, when the logs hold more events than
// ReadOptions.MaxEvents.
var ErrTooMany = errors.New("too many audit events")

// Warning reports a torn last line, left out of the read: a crash in the
// middle of a write leaves one. Its events were never acknowledged.
type Warning struct {
	File   string
	Offset int64
	Err    error
}

// String says what was left out, and where.
func (w Warning) String() string {
	return fmt.Sprintf("%s: offset %d: last line torn (%v): left out; a crash during a write leaves one", w.File, w.Offset, w.Err)
}

// ReadOptions tunes Read.
type ReadOptions struct {
	// MaxEvents bounds the events kept in memory; zero means
	// DefaultMaxEvents.
	MaxEvents int
}

// Read reads the log files named by paths (files, or directories whose log
// files, named as Log names them, are read) and returns their events in
// time order, with a warning for each file whose last line is torn. A line
// that cannot be read elsewhere in a file is an error wrapping ErrDamaged
// that names the file and the line's offset: silently skipping it could hide
// a double acceptance. A file given twice is read once.
func Read(paths []string, opt ReadOptions) ([]spent.AuditEvent, []Warning, error) {
	if opt.MaxEvents <= 0 {
		opt.MaxEvents = DefaultMaxEvents
	}
	files, err := logFiles(paths)
	if err != nil {
		return nil, nil, err
	}
	var evs []spent.AuditEvent
	var warns []Warning
	for _, f := range files {
		var w *Warning
		evs, w, err = readFile(f, evs, opt.MaxEvents)
		if err != nil {
			return nil, nil, err
		}
		if w != nil {
			warns = append(warns, *w)
		}
	}
	Sort(evs)
	return evs, warns, nil
}

// logFiles expands paths into the list of files to read, each once.
func logFiles(paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, errors.New("audit: no log file or directory given")
	}
	seen := make(map[string]bool)
	var out []string
	add := func(p string) error {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		if !seen[abs] {
			seen[abs] = true
			out = append(out, p)
		}
		return nil
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("audit: cannot read %s: %w", p, err)
		}
		if !fi.IsDir() {
			if err := add(p); err != nil {
				return nil, err
			}
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("audit: cannot read directory %s: %w", p, err)
		}
		n := 0
		for _, e := range ents {
			if e.Type().IsRegular() && fileName.MatchString(e.Name()) {
				if err := add(filepath.Join(p, e.Name())); err != nil {
					return nil, err
				}
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("audit: directory %s holds no audit log (files named like %s): is it the [audit] dir?", p, FileName(1, 1))
		}
	}
	return out, nil
}

// readFile appends the events of the file at path to evs.
func readFile(path string, evs []spent.AuditEvent, max int) ([]spent.AuditEvent, *Warning, error) {
	f, err := os.Open(path)
	if err != nil {
		return evs, nil, fmt.Errorf("audit: cannot read %s: %w", path, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var off int64
	var bad *Warning // a bad line, an error unless it is the last
	for {
		b, n, err := readLine(r)
		if n == 0 && err == io.EOF {
			return evs, bad, nil
		}
		if bad != nil {
			return evs, nil, fmt.Errorf("audit: %s: offset %d: %w: %v; a damaged line before the last cannot be skipped, it may hide a double acceptance: restore the file from a copy, or move it aside and audit without it knowing what it held",
				bad.File, bad.Offset, ErrDamaged, bad.Err)
		}
		if err != nil && err != io.EOF {
			if errors.Is(err, errLong) {
				bad = &Warning{File: path, Offset: off, Err: err}
				off += n
				continue
			}
			return evs, nil, fmt.Errorf("audit: reading %s: %w", path, err)
		}
		if err == io.EOF {
			// No newline: a torn write.
			return evs, &Warning{File: path, Offset: off, Err: errors.New("no newline at the end")}, nil
		}
		ev, perr := parseLine(bytes.TrimSuffix(b, []byte{'\n'}))
		if perr != nil {
			bad = &Warning{File: path, Offset: off, Err: perr}
		} else {
			if len(evs) >= max {
				return evs, nil, fmt.Errorf("audit: %w: more than %d events; audit fewer files at a time, or raise the limit", ErrTooMany, max)
			}
			evs = append(evs, ev)
		}
		off += n
	}
}

var errLong = fmt.Errorf("line longer than %d bytes", MaxLine)

// readLine reads one line, newline included, of at most MaxLine bytes, and
// returns it with its length. A longer line is consumed and reported with
// errLong and its length.
func readLine(r *bufio.Reader) ([]byte, int64, error) {
	var out []byte
	for {
		b, err := r.ReadSlice('\n')
		if len(out)+len(b) > MaxLine {
			n := int64(len(out) + len(b))
			for errors.Is(err, bufio.ErrBufferFull) {
				b, err = r.ReadSlice('\n')
				n += int64(len(b))
			}
			if err != nil && err != io.EOF {
				return nil, n, err
			}
			return nil, n, errLong
		}
		out = append(out, b...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return out, int64(len(out)), err
		}
	}
}

// Sort orders events by time, then node and seq: the order Doubles wants.
func Sort(evs []spent.AuditEvent) {
	sort.SliceStable(evs, func(i, j int) bool {
		a, b := &evs[i], &evs[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		if a.Seq != b.Seq {
			return a.Seq.Less(b.Seq)
		}
		return kindOrder(a.Kind) < kindOrder(b.Kind)
	})
}

func kindOrder(k spent.AuditKind) int {
	switch k {
	case spent.AuditAccepted:
		return 0
	case spent.AuditCompleted:
		return 1
	}
	return 2
}
