package main_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pdb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// flipByte inverts the byte at off of the file at path; a negative off
// counts from the end.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if off < 0 {
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		off += fi.Size()
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedStore damages the embedded store's MANIFEST while the server is
// stopped: the next start is refused with a message that names the file and
// the way out, epoch retire refuses too unless told --accept-damage, and
// after that retirement the server starts.
func TestDamagedStore(t *testing.T) {
	data := t.TempDir()
	// Two runs: the second start flushes the first run's claims to a table
	// and starts a new MANIFEST, whose later records name it.
	for run := range 2 {
		s := MustServe(t, data, nil, nil)
		for i := range 50 {
			if code, out := claimOver(t, s.Addr, fmt.Sprintf("order-%d-%d", run, i)); code != http.StatusOK || out != "fresh" {
				t.Fatalf("claim: %d %s", code, out)
			}
		}
		if code := s.Stop(); code != 0 {
			t.Fatalf("stop: exit %d", code)
		}
	}
	storeDir := filepath.Join(data, "pebble")
	desc, err := pdb.Peek(storeDir, vfs.Default)
	if err != nil || !desc.Exists {
		t.Fatalf("peek %s: %+v, %v", storeDir, desc, err)
	}
	// A byte of the MANIFEST's last record: pebble alone would open the
	// version before it without a word.
	flipByte(t, desc.ManifestFilename, -3)
	manifest := filepath.Base(desc.ManifestFilename)

	r := Run(t, nil, "serve", "--listen", "127.0.0.1:0", "--data", data)
	if r.Code == 0 || !strings.Contains(r.Stderr, "store damaged") || !strings.Contains(r.Stderr, manifest) ||
		!strings.Contains(r.Stderr, `"A damaged store" in docs/operations.md`) {
		t.Fatalf("serve on a damaged store: exit %d, stderr %q; want a refusal naming %s and the way out", r.Code, r.Stderr, manifest)
	}
	r = Run(t, nil, "epoch", "retire", "--yes", "--data", data)
	if r.Code == 0 || !strings.Contains(r.Stderr, "--accept-damage") {
		t.Fatalf("epoch retire on a damaged store: exit %d, stderr %q; want a refusal that names --accept-damage", r.Code, r.Stderr)
	}
	MustRun(t, nil, "epoch", "retire", "--yes", "--accept-damage", "--data", data)
	s := MustServe(t, data, nil, nil)
	if code, _ := claimOver(t, s.Addr, "order-after"); code != http.StatusOK {
		t.Fatalf("claim after the retirement: %d, want 200", code)
	}
}
