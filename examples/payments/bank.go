package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// transfer is one sending of money, as the bank records it.
type transfer struct {
	// ID is the payment id: the ledger's hash of the payment's key, the
	// hash "spent unknown list" prints for its marker.
	ID string `json:"id"`
	// Seq is the seq of the payment's applied marker, the seed's
	// "machine_id:int": unique, and increasing on each node.
	Seq string `json:"seq"`
	// Amount is the payment's amount.
	Amount int64 `json:"amount"`
	// Destination is the payment's destination account.
	Destination string `json:"destination"`
	// At is when the money left.
	At time.Time `json:"at"`
}

// bank is the money ledger of the example: an append-only file with one
// transfer per line, fsynced before a transfer counts as sent. Concurrent
// sends share fsyncs (whoever syncs, syncs everything written so far).
type bank struct {
	mu      sync.Mutex
	f       *os.File
	written int64
	counts  map[string]int
	failed  error

	syncMu sync.Mutex
	synced int64
}

// openBank opens the money ledger at path, reading the transfers made so
// far. A last line without its newline (a write cut short) is dropped: that
// transfer never completed its sync, so it was never reported as sent.
func openBank(path string) (*bank, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bank: %w", err)
	}
	b := &bank{f: f, counts: make(map[string]int)}
	r := bufio.NewReader(f)
	var good int64
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("bank: %w", err)
		}
		var t transfer
		if err := json.Unmarshal(bytes.TrimSpace(line), &t); err != nil {
			f.Close()
			return nil, fmt.Errorf("bank: line at offset %d: %w", good, err)
		}
		b.counts[t.ID]++
		good += int64(len(line))
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("bank: %w", err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("bank: %w", err)
	}
	return b, nil
}

var errBankFailed = errors.New("bank: failed earlier; restart")

// send records t durably. An error means the transfer's fate is unknown.
func (b *bank) send(t transfer) error {
	line, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("bank: %w", err)
	}
	line = append(line, '\n')
	b.mu.Lock()
	if b.failed != nil {
		b.mu.Unlock()
		return b.failed
	}
	if _, err := b.f.Write(line); err != nil {
		b.failed = errBankFailed
		b.mu.Unlock()
		return fmt.Errorf("bank: %w", err)
	}
	b.written++
	mine := b.written
	b.mu.Unlock()

	b.syncMu.Lock()
	if b.synced < mine {
		b.mu.Lock()
		upto := b.written
		b.mu.Unlock()
		if err := b.f.Sync(); err != nil {
			b.syncMu.Unlock()
			b.mu.Lock()
			b.failed = errBankFailed
			b.mu.Unlock()
			return fmt.Errorf("bank: sync: %w", err)
		}
		b.synced = upto
	}
	b.syncMu.Unlock()

	b.mu.Lock()
	b.counts[t.ID]++
	b.mu.Unlock()
	return nil
}

// sent returns, for each payment id, how many times money was sent.
func (b *bank) sent() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.counts))
	for k, v := range b.counts {
		out[k] = v
	}
	return out
}

func (b *bank) close() error { return b.f.Close() }
