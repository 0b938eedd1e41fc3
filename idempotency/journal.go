package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spentledger/spent/internal/atomicfile"
	"github.com/spentledger/spent/internal/strictjson"
)

// Journal keeps requests on disk from before their first send until their
// outcome is known, so that a process that restarts can send them again
// with the same key instead of inventing a new one (which could pay twice).
// Give it to [ClientOptions].Journal; after a restart, [Journal.Pending]
// lists what to [Client.Resume].
//
// Each request is one file, written atomically (package atomicfile: a
// temporary file is written and fsynced, renamed into place, and the
// directory fsynced), so that after a crash a request is either wholly in
// the journal or not at all. Files are mode 0600: they hold the request's headers, credentials
// included. A Journal is safe for concurrent use, but one directory must
// belong to one process at a time.
type Journal struct {
	dir string
}

// JournalEntry is one journaled request.
type JournalEntry struct {
	// Key is the request's idempotency key.
	Key string `json:"key"`
	// Method is the request's method.
	Method string `json:"method"`
	// URL is the request's URL.
	URL string `json:"url"`
	// Header holds the request's headers as first sent, Idempotency-Key
	// included.
	Header http.Header `json:"header"`
	// Body is the request's body.
	Body []byte `json:"body"`
	// Created is when the request was journaled.
	Created time.Time `json:"created"`
}

// OpenJournal opens (creating it, mode 0700, if need be) the journal in
// dir and removes temporary files a crash left behind.
func OpenJournal(dir string) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("idempotency: journal: %w", err)
	}
	if _, err := atomicfile.RemoveStale(dir); err != nil {
		return nil, fmt.Errorf("idempotency: journal: %w", err)
	}
	// Versions before atomicfile named their temporary files ".tmp-*".
	// They hold a request's headers, credentials included.
	legacy, err := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	if err != nil {
		return nil, fmt.Errorf("idempotency: journal: %w", err)
	}
	for _, p := range legacy {
		if err := os.Remove(p); err != nil {
			return nil, fmt.Errorf("idempotency: journal: %w", err)
		}
	}
	return &Journal{dir: dir}, nil
}

func (j *Journal) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(j.dir, "k-"+hex.EncodeToString(sum[:16])+".json")
}

// Save writes e durably, replacing any entry with the same key. When Save
// returns nil the entry survives a crash of the process or the machine.
func (j *Journal) Save(e JournalEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("idempotency: journal: %w", err)
	}
	if err := atomicfile.WriteFile(j.path(e.Key), b, 0o600); err != nil {
		return fmt.Errorf("idempotency: journal: %w", err)
	}
	return nil
}

// Remove forgets the entry of key, durably. Removing an absent entry is not
// an error.
func (j *Journal) Remove(key string) error {
	if err := atomicfile.Remove(j.path(key)); err != nil {
		return fmt.Errorf("idempotency: journal: %w", err)
	}
	return nil
}

// Pending returns the journaled requests whose outcome is not known yet,
// oldest first.
func (j *Journal) Pending() ([]JournalEntry, error) {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, fmt.Errorf("idempotency: journal: %w", err)
	}
	var out []JournalEntry
	for _, de := range ents {
		name := de.Name()
		if !strings.HasPrefix(name, "k-") || !strings.HasSuffix(name, ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(j.dir, name))
		if err != nil {
			return nil, fmt.Errorf("idempotency: journal: %w", err)
		}
		var e JournalEntry
		// No size limit: an entry holds a request body as large as the
		// client's MaxBody, which the journal does not know.
		if err := (strictjson.Rules{MaxSize: -1}).Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("idempotency: journal: %s: %w", name, err)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Created.Equal(out[b].Created) {
			return out[a].Created.Before(out[b].Created)
		}
		return out[a].Key < out[b].Key
	})
	return out, nil
}
