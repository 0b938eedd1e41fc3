package node

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFile is the data directory's lock: a process that uses the directory
// holds an exclusive flock on it, and writes its pid into it.
const LockFile = "lock"

// ErrDirInUse is returned, wrapped in a message that names the holder, when
// another process holds the data directory's lock.
var ErrDirInUse = errors.New("node: data directory in use")

// refusal is an error whose message is written out in full and whose cause
// is a sentinel of this package, for errors.Is.
type refusal struct {
	msg   string
	cause error
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.cause }

// lockDataDir takes the lock of the data directory dir, creating dir when
// create is set, and returns the open lock file: closing it releases the
// lock (so does the process's death). When another process holds the lock
// the error names that process and ends with wayOut.
func lockDataDir(dir string, create bool, wayOut string) (*os.File, error) {
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	} else if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir: locking: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "another process"
			if b, _ := io.ReadAll(io.LimitReader(f, 32)); len(b) > 0 {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					holder = "process " + strconv.Itoa(pid)
				}
			}
			return nil, &refusal{fmt.Sprintf("data directory %s is in use by %s (%s): %s", dir, holder, path, wayOut), ErrDirInUse}
		}
		return nil, fmt.Errorf("data dir: locking %s: %w", path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir: writing %s: %w", path, err)
	}
	return f, nil
}
