package privacypass

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spentledger/spent/internal/atomicfile"
)

// KEKSize is the size of a key-encryption key: AES-256.
const KEKSize = 32

// KEKEnv is the environment variable spent serve reads the key-encryption
// key from: the standard base64 of 32 bytes.
const KEKEnv = "SPENT_KEK"

// ParseKEK decodes a key-encryption key written as standard base64 (with
// padding, as `openssl rand -base64 32` prints it) of exactly 32 bytes.
// Surrounding white space is ignored.
func ParseKEK(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("privacypass: key-encryption key: want base64 of %d bytes: %w", KEKSize, err)
	}
	if len(b) != KEKSize {
		return nil, fmt.Errorf("privacypass: key-encryption key of %d bytes: want %d", len(b), KEKSize)
	}
	return b, nil
}

// LoadOrCreateKEK reads the key-encryption key stored at path (base64, as
// ParseKEK reads it), or, when the file does not exist, generates one with
// crypto/rand and writes it there durably (mode 0600, written to a
// temporary file, synced, then linked into place so that two processes
// racing to create it end up with the same key) and reports created. A KEK
// kept beside the keys it encrypts protects against a leaked backup of the
// key directory alone, not against a leaked disk: prefer SPENT_KEK.
func LoadOrCreateKEK(path string) (kek []byte, created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		kek, err := ParseKEK(string(b))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return kek, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("privacypass: key-encryption key: %w", err)
	}
	kek = make([]byte, KEKSize)
	if _, err := rand.Read(kek); err != nil {
		return nil, false, fmt.Errorf("privacypass: key-encryption key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("privacypass: key-encryption key: %w", err)
	}
	err = atomicfile.WriteNew(path, []byte(base64.StdEncoding.EncodeToString(kek)+"\n"), 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it first: use theirs.
		return LoadOrCreateKEK(path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("privacypass: key-encryption key: %w", err)
	}
	return kek, true, nil
}
