package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/atomicfile"
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
	return openSecret(dir, filepath.Join(dir, storeDir), rnd, atomicfile.WriteFile)
}

// openSecret is openDataDir that checks for a store in pebbleDir and writes
// the secret with writeFile.
func openSecret(dir, pebbleDir string, rnd io.Reader, writeFile func(string, []byte, os.FileMode) error) (secret []byte, created bool, err error) {
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
	if ents, _ := os.ReadDir(pebbleDir); len(ents) > 0 {
		return nil, false, fmt.Errorf("secret %s is missing but %s holds a store: a new secret would forget every record. Restore the secret file, or move the data directory aside to start a new epoch (see docs/operations.md)",
			path, pebbleDir)
	}
	secret = make([]byte, spent.MinSecretLen)
	if _, err := io.ReadFull(rnd, secret); err != nil {
		return nil, false, fmt.Errorf("secret: generating: %w", err)
	}
	if err := writeFile(path, secret, 0o600); err != nil {
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
