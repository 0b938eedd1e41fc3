package main_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of the given size (e.g. "16m") on a new
// directory and unmounts it at cleanup. Mounting needs root: outside CI a
// machine that refuses it skips the test, saying why; under CI it fails.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("mounting a %s tmpfs needs root (run the tests as root, or in CI): mount: %v: %s", size, err, out)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// claimOver posts a one-step claim of key to the server at addr and returns
// the HTTP status and the outcome.
func claimOver(t *testing.T, addr, key string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"namespace":"default","key":%q,"result":"b2s="}`, key)
	resp, err := http.Post(addr+"/v1/claim", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("claim %s: %v", key, err)
	}
	defer resp.Body.Close()
	var ans struct {
		Outcome string `json:"outcome"`
	}
	json.NewDecoder(resp.Body).Decode(&ans)
	return resp.StatusCode, ans.Outcome
}

func readyz(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get(addr + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// fill writes zeros to path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", path, err)
			}
			// The last blocks: byte by byte pieces no longer fit either.
			for n := len(buf) / 2; n > 0; n /= 2 {
				for {
					if _, err := f.Write(buf[:n]); err != nil {
						break
					}
				}
			}
			return
		}
	}
}

// TestDiskFullThenFreed fills the file system under a running server on the
// embedded store: claims get 503 and /readyz fails, nothing that was not
// stored is acknowledged, and once the space is freed the server serves
// again by itself, with every key it acknowledged kept.
func TestDiskFullThenFreed(t *testing.T) {
	fsDir := mountTmpfs(t, "16m")
	data := filepath.Join(fsDir, "data")
	s := MustServe(t, data, nil, nil)

	var acked []string
	for i := range 20 {
		key := fmt.Sprintf("before-%d", i)
		if code, out := claimOver(t, s.Addr, key); code != http.StatusOK || out != "fresh" {
			t.Fatalf("claim %s: %d %s, want 200 fresh", key, code, out)
		}
		acked = append(acked, key)
	}

	filler := filepath.Join(fsDir, "filler")
	fill(t, filler)
	failedAt := -1
	for i := 0; i < 200_000; i++ {
		key := fmt.Sprintf("full-%d", i)
		code, out := claimOver(t, s.Addr, key)
		if code == http.StatusOK && out == "fresh" {
			acked = append(acked, key)
			continue
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("claim %s on a full disk: %d %s, want 200 fresh or 503", key, code, out)
		}
		failedAt = i
		break
	}
	if failedAt < 0 {
		t.Fatal("200,000 claims on a full disk and none failed: the disk did not fill")
	}
	if code := readyz(t, s.Addr); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz on a full disk: %d, want 503", code)
	}
	for i := range 5 {
		if code, _ := claimOver(t, s.Addr, fmt.Sprintf("still-full-%d", i)); code != http.StatusServiceUnavailable {
			t.Fatalf("claim while the disk is still full: %d, want 503", code)
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		key := fmt.Sprintf("after-%d", i)
		code, out := claimOver(t, s.Addr, key)
		if code == http.StatusOK && out == "fresh" {
			acked = append(acked, key)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60 s after the disk was freed the server still answers %d %s; stderr:\n%s", code, out, s.Stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := readyz(t, s.Addr); code != http.StatusOK {
		t.Fatalf("/readyz after recovery: %d, want 200", code)
	}
	for _, key := range acked {
		if code, out := claimOver(t, s.Addr, key); code != http.StatusOK || out != "replayed" {
			t.Fatalf("acknowledged %s after recovery: %d %s, want 200 replayed", key, code, out)
		}
	}
	log := s.Stderr.String()
	if n := strings.Count(log, "a write failed"); n != 1 {
		t.Errorf("the log says %d times that a write failed, want once:\n%s", n, log)
	}
	if n := strings.Count(log, "serves again"); n != 1 {
		t.Errorf("the log says %d times that the store serves again, want once:\n%s", n, log)
	}
	t.Logf("%d claims acknowledged before the disk filled (%d on the full disk); all kept after recovery", len(acked)-1, failedAt)
}
