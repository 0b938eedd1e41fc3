package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spentledger/spent"
)

// The data directory's layout.
const (
	// secretFile holds the HMAC secret: spent.MinSecretLen random bytes, mode 0600.
	secretFile = "secret"
	// storeDir holds the embedded pebble store.
	storeDir = "pebble"
)

// openDataDir makes sure dir exists and returns the HMAC secret kept in it,
// generating one from rnd on first start. It refuses a secret file that
// others may read or that has the wrong size, and refuses to generate a new
// secret beside an existing store: a new secret would silently forget every
// record, which is an epoch retirement, never an accident.
func openDataDir(dir string, rnd io.Reader) (secret []byte, created bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dir, secretFile)
	secret, err = readSecret(path)
	if err == nil {
		return secret, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, storeDir)); len(ents) > 0 {
		return nil, false, fmt.Errorf("secret %s is missing but %s holds a store: a new secret would forget every record. Restore the secret file, or move the data directory aside to start a new epoch (see docs/operations.md)",
			path, filepath.Join(dir, storeDir))
	}
	secret = make([]byte, spent.MinSecretLen)
	if _, err := io.ReadFull(rnd, secret); err != nil {
		return nil, false, fmt.Errorf("secret: generating: %w", err)
	}
	if err := writeFileAtomic(path, secret, 0o600); err != nil {
		return nil, false, fmt.Errorf("secret: %w", err)
	}
	return secret, true, nil
}

// readSecret reads the secret file at path, checking its mode and size. A
// missing file is reported with fs.ErrNotExist in the chain.
func readSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("secret: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("secret %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secret %s has mode %04o: others may read it; refusing to start (chmod 600 it after checking who read it)", path, perm)
	}
	if fi.Size() != spent.MinSecretLen {
		return nil, fmt.Errorf("secret %s holds %d bytes, want %d: refusing to start with a damaged secret", path, fi.Size(), spent.MinSecretLen)
	}
	secret := make([]byte, spent.MinSecretLen)
	if _, err := io.ReadFull(f, secret); err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	return secret, nil
}

// writeFileAtomic writes data to path so that a crash leaves either no file
// or the whole file: a temporary file in the same directory is written,
// synced and renamed over path, and then the directory is synced so that the
// rename itself is durable.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
