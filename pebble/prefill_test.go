package pebble

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spentledger/spent"
)

// TestPrefilledWritesIntact writes a WAL-sized file through the zero-filler
// in pieces of random sizes, new and recycled, and reads it back: the
// background zeroing must never overwrite what was written, and the file
// must read as the data followed by zeros only.
func TestPrefilledWritesIntact(t *testing.T) {
	for _, recycled := range []int{0, 3 << 20} {
		fs := walFS{vfs.NewMem()}
		if recycled > 0 {
			old, err := fs.FS.Create("old.log", walCategory)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := old.Write(bytes.Repeat([]byte{0xee}, recycled)); err != nil {
				t.Fatal(err)
			}
			old.Close()
		}
		var f vfs.File
		var err error
		if recycled > 0 {
			f, err = fs.ReuseForWrite("old.log", "wal.log", walCategory)
		} else {
			f, err = fs.Create("wal.log", walCategory)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(*prefilled); !ok {
			t.Fatalf("WAL file is a %T, want *prefilled", f)
		}
		rng := rand.New(rand.NewPCG(3, uint64(recycled)))
		var want []byte
		for len(want) < 11<<20 {
			b := make([]byte, 1+rng.IntN(96<<10))
			for i := range b {
				b[i] = byte(1 + rng.IntN(255)) // never zero
			}
			want = append(want, b...) // before Write, which may change b
			if _, err := f.Write(b); err != nil {
				t.Fatal(err)
			}
			if rng.IntN(8) == 0 {
				if err := f.SyncData(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := fs.Open("wal.log")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < len(want) || !bytes.Equal(got[:len(want)], want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Fatalf("recycled %d: file differs from what was written at offset %d of %d (file %d bytes)", recycled, i, len(want), len(got))
		}
		if len(got) == len(want) {
			t.Fatalf("recycled %d: file of %d bytes, exactly what was written: nothing was filled ahead", recycled, len(got))
		}
		if tail := got[len(want):]; !bytes.Equal(tail, make([]byte, len(tail))) {
			if recycled == 0 || len(want) < recycled {
				t.Fatalf("recycled %d: the %d bytes after the data are not all zero", recycled, len(tail))
			}
		}
	}
}

// TestStoreWALPrefilled checks, on the operating system's files, that the
// store's WAL is zero-filled ahead of its writes, and a plain one is not:
// the wrapper is in place, and pebble still names its WAL category so.
func TestStoreWALPrefilled(t *testing.T) {
	walSize := func(opts Options) int64 {
		dir := t.TempDir()
		s, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		for i := range 50 {
			var h spent.Hash
			h[0], h[1] = byte(i), 0xaa
			op := spent.ClaimOp{Now: now, Record: spent.Record{
				Namespace: "ns", Hash: h, FirstSeen: now, State: spent.StateComplete,
				Result: []byte("ok"), ExpiresAt: now.Add(time.Hour), Seq: spent.Seq{Node: 1, Counter: uint64(i + 1)},
			}}
			if _, err := s.Claim(context.Background(), op); err != nil {
				t.Fatal(err)
			}
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		var size int64
		for _, l := range logs {
			if fi, err := os.Stat(l); err == nil {
				size = max(size, fi.Size())
			}
		}
		s.Close()
		return size
	}
	plain := walSize(Options{MaxBatchRound: 8192, CacheSize: 8 << 20, MemTableSize: 64 << 20, plainWAL: true})
	filled := walSize(Options{MaxBatchRound: 8192, CacheSize: 8 << 20, MemTableSize: 64 << 20})
	if plain <= 0 || plain >= prefillFirst {
		t.Fatalf("plain WAL of %d bytes: want some, under %d", plain, prefillFirst)
	}
	if filled < prefillFirst {
		t.Fatalf("WAL of %d bytes after %d bytes of claims: want it zero-filled to at least %d", filled, plain, prefillFirst)
	}
}
