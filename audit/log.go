package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"

	"github.com/spentledger/spent"
)

// Limits.
const (
	// DefaultMaxFileSize is the size past which a log file is rotated.
	DefaultMaxFileSize = 64 << 20
	// MinMaxFileSize and MaxMaxFileSize bound Config.MaxFileSize.
	MinMaxFileSize = 64 << 10
	MaxMaxFileSize = 1 << 30
	// MaxLine is the longest line of a log, newline included. An event is
	// far shorter: its longest field, the place, is at most
	// spent.MaxPlaceLen bytes.
	MaxLine = 4 << 10
)

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("audit: log closed")

// File is what the log writes to: an *os.File, or a test's stand-in.
type File interface {
	io.Writer
	Sync() error
	Close() error
}

// Config configures a Log.
type Config struct {
	// Dir is the directory of the log files, created if missing. Several
	// nodes may share it (a file names its node), or each keep its own.
	Dir string
	// Node is the node whose acceptances this log records
	// (spent.Config.Node); it names the files.
	Node uint32
	// MaxFileSize is the size past which the next append goes to a new
	// file. Zero means DefaultMaxFileSize.
	MaxFileSize int64
	// OpenFile creates a new log file, failing if it exists. Nil opens it
	// with os.OpenFile (O_CREATE|O_EXCL|O_WRONLY|O_APPEND, mode 0600). Tests
	// set it to fail writes or fsyncs.
	OpenFile func(path string) (File, error)
	// SyncDir makes a new file's name durable. Nil fsyncs the directory.
	SyncDir func(dir string) error
}

// Validate refuses an unusable configuration.
func (c *Config) Validate() error {
	if c.Dir == "" {
		return errors.New("audit: no directory")
	}
	if c.Node == 0 {
		return errors.New("audit: node must be at least 1")
	}
	if c.MaxFileSize != 0 && (c.MaxFileSize < MinMaxFileSize || c.MaxFileSize > MaxMaxFileSize) {
		return fmt.Errorf("audit: max file size %d: want %d to %d bytes", c.MaxFileSize, MinMaxFileSize, MaxMaxFileSize)
	}
	return nil
}

// fileName matches the log files: node-N.SEQUENCE.jsonl.
var fileName = regexp.MustCompile(`^node-([0-9]+)\.([0-9]{8})\.jsonl$`)

// FileName returns the name of the index-th log file of node.
func FileName(node uint32, index int) string {
	return fmt.Sprintf("node-%d.%08d.jsonl", node, index)
}

// Log is one node's audit log: a sequence of JSON-lines files in a
// directory, appended to in groups, each group fsynced once. It implements
// spent.Auditor. It is safe for concurrent use.
type Log struct {
	cfg Config

	mu     sync.Mutex
	next   *group // the group that the next append joins
	closed bool

	kick    chan struct{} // a group waits (capacity 1)
	stop    chan struct{} // closed by Close
	stopped chan struct{} // closed when the writer has returned

	// The file; only the writer goroutine (and Close, once it returned)
	// touches these.
	fmu   sync.Mutex
	f     File
	path  string
	size  int64
	index int
	shut  bool // Close has run
}

var _ spent.Auditor = (*Log)(nil)

// group is the appends that share one write and one fsync.
type group struct {
	buf  []byte
	n    int // events
	done chan struct{}
	err  error
}

// Open opens the log of cfg.Node in cfg.Dir. Each open starts a new file,
// after the node's last one, so that a torn line left by a crash stays the
// last line of its file.
func Open(cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxFileSize == 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	if cfg.OpenFile == nil {
		cfg.OpenFile = func(path string) (File, error) {
			return os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
		}
	}
	if cfg.SyncDir == nil {
		cfg.SyncDir = syncDir
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	ents, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	l := &Log{cfg: cfg, kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	for _, e := range ents {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil || m[1] != strconv.FormatUint(uint64(cfg.Node), 10) {
			continue
		}
		if i, _ := strconv.Atoi(m[2]); i > l.index {
			l.index = i
		}
	}
	if err := l.rotate(); err != nil {
		return nil, err
	}
	go l.writer()
	return l, nil
}

// writer writes the waiting groups, one write and one fsync each, until
// Close; it writes what waits before it returns.
func (l *Log) writer() {
	defer close(l.stopped)
	for {
		select {
		case <-l.kick:
		case <-l.stop:
			l.flush()
			return
		}
		l.flush()
	}
}

// flush writes groups until none waits.
func (l *Log) flush() {
	for {
		l.mu.Lock()
		g := l.next
		l.next = nil
		l.mu.Unlock()
		if g == nil {
			return
		}
		g.err = l.write(g.buf)
		close(g.done)
	}
}

// Path returns the file the log appends to now.
func (l *Log) Path() string {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	return l.path
}

// Audit appends events (see Append).
func (l *Log) Audit(ctx context.Context, events []spent.AuditEvent) error {
	return l.Append(ctx, events)
}

// Append writes events as one line each and returns once they are fsynced.
// A writer goroutine writes the appends that wait as one group, under one
// fsync: appends that arrive while a group is being written go together in
// the next. An error means the events may or may
// not be in the file: a failed write or fsync closes the file, and the next
// group starts a new one. When ctx ends first, Append returns its error; the
// events may still be written.
func (l *Log) Append(ctx context.Context, events []spent.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	var lines []byte
	for i := range events {
		var err error
		if lines, err = appendLine(lines, &events[i]); err != nil {
			return err
		}
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if l.next == nil {
		l.next = &group{done: make(chan struct{})}
	}
	g := l.next
	g.buf = append(g.buf, lines...)
	g.n += len(events)
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default: // the writer has been kicked already
	}
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		return fmt.Errorf("audit: waiting for the fsync: %w", ctx.Err())
	}
}

// write appends buf to the current file and fsyncs it, rotating first when
// buf would take the file past MaxFileSize.
func (l *Log) write(buf []byte) error {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if l.shut {
		return ErrClosed
	}
	if l.f == nil || (l.size > 0 && l.size+int64(len(buf)) > l.cfg.MaxFileSize) {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	n, err := l.f.Write(buf)
	l.size += int64(n)
	if err == nil {
		if err = l.f.Sync(); err != nil {
			err = fmt.Errorf("fsync: %w", err)
		}
	}
	if err != nil {
		// The file's end is unknown now: never write behind it again.
		_ = l.f.Close()
		l.f = nil
		return fmt.Errorf("audit: %s: %w", l.path, err)
	}
	return nil
}

// rotate closes the current file, if any, and creates the next one.
func (l *Log) rotate() error {
	if l.f != nil {
		if err := l.f.Close(); err != nil {
			l.f = nil
			return fmt.Errorf("audit: closing %s: %w", l.path, err)
		}
		l.f = nil
	}
	l.index++
	path := filepath.Join(l.cfg.Dir, FileName(l.cfg.Node, l.index))
	f, err := l.cfg.OpenFile(path)
	if err != nil {
		return fmt.Errorf("audit: creating %s: %w", path, err)
	}
	if err := l.cfg.SyncDir(l.cfg.Dir); err != nil {
		_ = f.Close()
		return fmt.Errorf("audit: fsync of %s: %w", l.cfg.Dir, err)
	}
	l.f, l.path, l.size = f, path, 0
	return nil
}

// Close writes the groups waiting, closes the file and returns its error.
// Appends after it return ErrClosed. It is safe to call more than once.
func (l *Log) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.stop)
	}
	l.mu.Unlock()
	<-l.stopped
	l.fmu.Lock()
	defer l.fmu.Unlock()
	l.shut = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("audit: closing %s: %w", l.path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
