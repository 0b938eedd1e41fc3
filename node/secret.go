package node

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spentledger/spent"
)

// SecretFile is the name of the data directory's secret: spent.MinSecretLen
// random bytes, mode 0600.
const SecretFile = "secret"

// ErrSecretMismatch is returned, wrapped, when the store was set up with
// another secret than the data directory's.
var ErrSecretMismatch = errors.New("this store was set up with another secret")

// OpenSecret makes sure cfg.Dir exists and returns the HMAC secret kept in
// it, generating one from cfg.Rand on first start and writing it with
// cfg.WriteFile. It refuses a secret file that others may read or that has
// the wrong size, and refuses to generate a new secret beside an embedded
// store inside the data directory (cfg.EmbeddedDir) that holds files: a new
// secret would silently forget every record, which is an epoch retirement,
// never an accident. It takes no lock: [Open] calls it under the data
// directory's lock; call it alone only where no server runs.
func OpenSecret(cfg Config) (secret []byte, created bool, err error) {
	cfg.fill()
	secret, created, err = readOrNewSecret(cfg)
	if err != nil || !created {
		return secret, created, err
	}
	if err := writeSecret(cfg, secret); err != nil {
		return nil, false, err
	}
	return secret, true, nil
}

// writeSecret writes a secret readOrNewSecret generated into cfg.Dir.
func writeSecret(cfg Config, secret []byte) error {
	if err := cfg.WriteFile(filepath.Join(cfg.Dir, SecretFile), secret, 0o600); err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	return nil
}

// readOrNewSecret is OpenSecret without the write: a secret it generates
// (created) is the caller's to write with writeSecret. [Open] writes it only
// once the store has opened and passed its read-only checks, so that a start
// refused before then leaves no secret behind.
func readOrNewSecret(cfg Config) (secret []byte, created bool, err error) {
	dir := cfg.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dir, SecretFile)
	secret, err = readSecret(path)
	if err == nil {
		return secret, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	if guard := ownStoreDir(dir, cfg.EmbeddedDir); guard != "" {
		if ents, _ := os.ReadDir(guard); len(ents) > 0 {
			return nil, false, fmt.Errorf("secret %s is missing but %s holds a store: a new secret would forget every record. Restore the secret file, or move the data directory aside to start a new epoch (see docs/operations.md)",
				path, guard)
		}
	}
	secret = make([]byte, spent.MinSecretLen)
	if _, err := io.ReadFull(cfg.Rand, secret); err != nil {
		return nil, false, fmt.Errorf("secret: generating: %w", err)
	}
	return secret, true, nil
}

// ownStoreDir returns embedded when it lies inside the data directory dir,
// and "" otherwise. A store inside the data directory was made with its
// secret; a store elsewhere may have been made by another data directory,
// and its secret check record tells.
func ownStoreDir(dir, embedded string) string {
	if embedded == "" {
		return ""
	}
	d, err1 := filepath.Abs(dir)
	e, err2 := filepath.Abs(embedded)
	if err1 != nil || err2 != nil {
		return ""
	}
	rel, err := filepath.Rel(d, e)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return embedded
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

// The secret check. Every server records (a MAC of) its secret in the
// store, so that a server started with another secret refuses to run: two
// secrets over one store would hash one key two ways and answer it fresh
// twice.

// secretCheckKey is the store key of the secret check record.
var secretCheckKey = func() spent.Hash {
	sum := sha256.Sum256([]byte("spent: secret check key v1"))
	var h spent.Hash
	copy(h[:], sum[:])
	return h
}()

// secretCheckLife is how long the check record lives: for the store's life.
const secretCheckLife = 100 * 365 * 24 * time.Hour

// secretMAC is what the secret check record holds: a MAC of the secret,
// which does not reveal it.
func secretMAC(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("spent: secret check v1"))
	return m.Sum(nil)
}

// findSecretCheck reports whether the store holds a secret check record,
// without writing one: a store that holds one holds records. It returns
// ErrSecretMismatch when the record was made with another secret.
func findSecretCheck(ctx context.Context, store spent.Store, secret []byte, now time.Time) (bool, error) {
	rec, err := store.Get(ctx, secretCheckKey, now)
	if errors.Is(err, spent.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("secret check: %w", err)
	}
	if !hmac.Equal(rec.Result, secretMAC(secret)) {
		return true, ErrSecretMismatch
	}
	return true, nil
}

// checkSecret records a MAC of secret in the store on first start, and on
// every later start checks that the secret is the same. It reports whether
// it created the record (the store held none: it was empty, or set up by a
// server older than the check). The MAC does not reveal the secret.
func checkSecret(ctx context.Context, store spent.Store, secret []byte, node uint32, now time.Time) (created bool, err error) {
	mac := secretMAC(secret)
	first, err := store.ReserveSeq(ctx, node, 1)
	if err != nil {
		return false, fmt.Errorf("secret check: %w", err)
	}
	rec := spent.Record{
		Namespace: "spent.meta", Hash: secretCheckKey, FirstSeen: now, Place: "secret-check",
		State: spent.StateComplete, Result: mac, ExpiresAt: now.Add(secretCheckLife),
		Seq: spent.Seq{Node: node, Counter: first},
	}
	res, err := store.Claim(ctx, spent.ClaimOp{Record: rec, Now: now})
	if err != nil {
		return false, fmt.Errorf("secret check: %w", err)
	}
	if !hmac.Equal(res.Record.Result, mac) {
		return false, ErrSecretMismatch
	}
	return res.Inserted, nil
}
