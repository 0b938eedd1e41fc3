package atomicfile_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/spentledger/spent/internal/atomicfile"
	"github.com/spentledger/spent/internal/crashpoint"
)

func TestWriteFile(t *testing.T) {
	t.Run("WritesAndReplaces", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "f")
		for _, want := range []string{"one", "two"} {
			if err := atomicfile.WriteFile(p, []byte(want), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil || string(got) != want {
				t.Fatalf("content: got %q, %v, want %q", got, err, want)
			}
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Fatalf("mode: got %04o, want 0600", got)
		}
		assertNoTemp(t, filepath.Dir(p))
	})

	t.Run("FailureKeepsTheOldFileAndNoTemp", func(t *testing.T) {
		dir := t.TempDir()
		// A directory in the way makes the rename fail after the
		// temporary file was written.
		p := filepath.Join(dir, "f")
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "x"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.WriteFile(p, []byte("new"), 0o600); err == nil {
			t.Fatal("WriteFile over a non-empty directory: got nil, want an error")
		}
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			t.Fatalf("the directory in the way: %v, %v; want it kept", fi, err)
		}
		assertNoTemp(t, dir)
	})
}

func TestWriteNew(t *testing.T) {
	t.Run("WritesOnce", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "key")
		if err := atomicfile.WriteNew(p, []byte("first"), 0o640); err != nil {
			t.Fatal(err)
		}
		err := atomicfile.WriteNew(p, []byte("second"), 0o600)
		if !errors.Is(err, fs.ErrExist) {
			t.Fatalf("WriteNew over an existing file: got %v, want fs.ErrExist", err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != "first" {
			t.Fatalf("content: got %q, %v, want the first write kept", got, err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o640 {
			t.Fatalf("mode: got %04o, want 0640", got)
		}
		assertNoTemp(t, filepath.Dir(p))
	})

	t.Run("OneOfManyWins", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "key")
		const writers = 8
		errs := make(chan error, writers)
		for i := range writers {
			go func() { errs <- atomicfile.WriteNew(p, []byte{byte('a' + i)}, 0o600) }()
		}
		won := 0
		for range writers {
			switch err := <-errs; {
			case err == nil:
				won++
			case !errors.Is(err, fs.ErrExist):
				t.Fatalf("a losing writer: got %v, want fs.ErrExist", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d writers succeeded, want 1", won)
		}
		assertNoTemp(t, filepath.Dir(p))
	})

	t.Run("MissingDirectory", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "no", "key")
		if err := atomicfile.WriteNew(p, []byte("x"), 0o600); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("got %v, want fs.ErrNotExist", err)
		}
	})
}

func TestRemove(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := atomicfile.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after Remove: %v, want the file gone", err)
	}
	if err := atomicfile.Remove(p); err != nil {
		t.Fatalf("removing an absent file: got %v, want nil", err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(p), "other"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Remove(filepath.Dir(p)); err == nil {
		t.Fatal("removing a non-empty directory: got nil, want an error")
	}
}

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	names := map[string]bool{ // name: stale
		".fence.tmp-123456":  true,
		".secret.tmp-9":      true,
		"fence":              false,
		".fence.tmp-":        false,
		".fence.tmp-12a":     false,
		"fence.tmp-123":      false,
		".tmp-key-123":       false, // another package's naming
		".wallet.json.tmp-7": true,
	}
	for n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A directory named like a temporary file is not touched.
	if err := os.Mkdir(filepath.Join(dir, ".d.tmp-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	removed, err := atomicfile.RemoveStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for n, stale := range names {
		if stale {
			want = append(want, filepath.Join(dir, n))
		}
	}
	slices.Sort(want)
	slices.Sort(removed)
	if !slices.Equal(removed, want) {
		t.Fatalf("removed: got %q, want %q", removed, want)
	}
	for n, stale := range names {
		_, err := os.Stat(filepath.Join(dir, n))
		if exists := err == nil; exists == stale {
			t.Errorf("%s: exists %v after RemoveStale, want %v", n, exists, !stale)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".d.tmp-1")); err != nil {
		t.Errorf("the directory .d.tmp-1: %v, want it kept", err)
	}
}

// TestHelperWrite is not a test: run by TestCrash in a child process, it
// writes ATOMICFILE_TEST_PATH and exits 0 if it survives.
func TestHelperWrite(t *testing.T) {
	p := os.Getenv("ATOMICFILE_TEST_PATH")
	if p == "" {
		t.Skip("helper process for TestCrash")
	}
	write := atomicfile.WriteFile
	if os.Getenv("ATOMICFILE_TEST_NEW") != "" {
		write = atomicfile.WriteNew
	}
	if err := write(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Exit(0)
}

// TestCrash kills a writer at each crash point: the file holds the old or the
// new content, whole, and RemoveStale cleans what the writer left.
func TestCrash(t *testing.T) {
	for _, tc := range []struct {
		point, want string
		new         bool // WriteNew of a file that did not exist
	}{
		{"atomicfile:f:synced", "old", false},
		{"atomicfile:f:renamed", "new", false},
		{"atomicfile:f:synced", "", true},
		{"atomicfile:f:linked", "new", true},
	} {
		name := tc.point
		if tc.new {
			name = "WriteNew/" + name
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "f")
			env := []string{"ATOMICFILE_TEST_PATH=" + p, crashpoint.EnvVar + "=" + tc.point}
			if tc.new {
				env = append(env, "ATOMICFILE_TEST_NEW=1")
			} else if err := atomicfile.WriteFile(p, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWrite$")
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("writer with %s: got %v, want killed by SIGKILL; output:\n%s", tc.point, err, out)
			}
			got, err := os.ReadFile(p)
			if tc.want == "" {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("after a crash at %s: got %q, %v, want no file", tc.point, got, err)
				}
			} else if err != nil || string(got) != tc.want {
				t.Fatalf("after a crash at %s: got %q, %v, want %q", tc.point, got, err, tc.want)
			}
			removed, err := atomicfile.RemoveStale(dir)
			if err != nil {
				t.Fatal(err)
			}
			// WriteNew removes its temporary name before the link's
			// crash point.
			if wantRemoved := tc.point == "atomicfile:f:synced"; (len(removed) == 1) != wantRemoved {
				t.Fatalf("RemoveStale after a crash at %s: removed %q", tc.point, removed)
			}
			assertNoTemp(t, dir)
		})
	}
}

// assertNoTemp fails the test if dir holds a temporary file of WriteFile.
func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if atomicfile.IsTemp(e.Name()) {
			t.Fatalf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}
