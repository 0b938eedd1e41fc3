// Package atomicfile writes files so that a crash leaves either the old file
// or the whole new one, never a part, and cleans up after writes a crash
// interrupted.
//
// In the common case, write a file with
//
//	err := atomicfile.WriteFile(path, data, 0o600)
//
// or, for a file that must never be replaced once written (a key),
//
//	err := atomicfile.WriteNew(path, data, 0o600) // errors.Is(err, fs.ErrExist) if it exists
//
// and, at start, before anything in the directory is written again,
//
//	removed, err := atomicfile.RemoveStale(dir)
//
// # Guarantees
//
//   - When WriteFile returns nil, path holds data with mode perm, and both the
//     bytes and the name are durable: the temporary file is synced before the
//     rename and the directory after it.
//   - When WriteFile fails or the process dies during it, path holds what it
//     held before (or nothing, if it did not exist).
//   - WriteNew gives the same guarantees and never replaces a file: of
//     several writers of one path, one wins and the others get fs.ErrExist.
//   - When Remove returns nil, the file is gone durably.
//
// # Caveats
//
//   - A process killed during WriteFile or WriteNew leaves its temporary file,
//     ".NAME.tmp-RANDOM", in the directory. RemoveStale removes such files;
//     call it only while no other process writes to the directory (hold the
//     directory's lock).
//   - WriteFile and WriteNew have crash points (package crashpoint) after
//     the temporary file is synced ("atomicfile:NAME:synced") and after the
//     rename ("atomicfile:NAME:renamed") or the link
//     ("atomicfile:NAME:linked"), for tests.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spentledger/spent/internal/crashpoint"
)

// tmpInfix is what the temporary files of WriteFile carry in their name:
// ".NAME" + tmpInfix + random digits.
const tmpInfix = ".tmp-"

// WriteFile writes data to path so that a crash leaves either the old file
// or the whole new one: a temporary file in the same directory is written
// with mode perm, synced and renamed over path, and then the directory is
// synced so that the rename itself is durable. On error the temporary file
// is removed.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir, base, tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("atomicfile: writing %s: %w", path, err)
	}
	crashpoint.Hit("atomicfile:" + base + ":renamed")
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("atomicfile: writing %s: %w", path, err)
	}
	return nil
}

// WriteNew is WriteFile for a file that must not exist yet: the synced
// temporary file is hard-linked to path (a link, unlike a rename, never
// replaces a file), so that of two processes writing path at once exactly
// one succeeds. When path exists it fails with an error wrapping
// fs.ErrExist and leaves path as it was.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	dir, base, tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	err = os.Link(tmp, path)
	os.Remove(tmp)
	if err != nil {
		return fmt.Errorf("atomicfile: writing %s: %w", path, err)
	}
	crashpoint.Hit("atomicfile:" + base + ":linked")
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("atomicfile: writing %s: %w", path, err)
	}
	return nil
}

// writeTemp writes data to a new temporary file beside path with mode perm
// and syncs it. It returns path's directory and base name and the
// temporary file's path; on error it removes the temporary file.
func writeTemp(path string, data []byte, perm os.FileMode) (dir, base, tmp string, err error) {
	dir, base = filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+tmpInfix+"*")
	if err != nil {
		return "", "", "", fmt.Errorf("atomicfile: %w", err)
	}
	tmp = f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("atomicfile: writing %s: %w", path, err)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return "", "", "", err
	}
	if _, err = f.Write(data); err != nil {
		return "", "", "", err
	}
	if err = f.Sync(); err != nil {
		return "", "", "", err
	}
	if err = f.Close(); err != nil {
		return "", "", "", err
	}
	crashpoint.Hit("atomicfile:" + base + ":synced")
	return dir, base, tmp, nil
}

// Remove removes path durably: the directory is synced after the removal.
// Removing a file that does not exist is not an error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("atomicfile: %w", err)
	}
	dir := filepath.Dir(path)
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("atomicfile: removing %s: %w", path, err)
	}
	return nil
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// IsTemp reports whether name (a base name) is that of a temporary file of
// WriteFile.
func IsTemp(name string) bool {
	if !strings.HasPrefix(name, ".") {
		return false
	}
	i := strings.LastIndex(name, tmpInfix)
	if i <= 1 {
		return false
	}
	for _, c := range name[i+len(tmpInfix):] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(name) > i+len(tmpInfix)
}

// RemoveStale removes the temporary files that WriteFile calls on files of
// dir left behind when their process died, and returns their paths. It only
// removes regular files named as WriteFile names them (".NAME.tmp-DIGITS"),
// and only in dir itself. Call it while no other process writes files in dir.
func RemoveStale(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("atomicfile: %w", err)
	}
	var removed []string
	for _, e := range ents {
		if !e.Type().IsRegular() || !IsTemp(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil {
			return removed, fmt.Errorf("atomicfile: removing a stale temporary file: %w", err)
		}
		removed = append(removed, p)
	}
	if len(removed) > 0 {
		if err := syncDir(dir); err != nil {
			return removed, fmt.Errorf("atomicfile: %w", err)
		}
	}
	return removed, nil
}
