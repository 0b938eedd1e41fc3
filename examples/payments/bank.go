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
	// At is when the money left (or, for a void, when it was voided).
	At time.Time `json:"at"`
	// Void marks a line that moved no money: the resolver's look-up found
	// no transfer of this attempt (ID and Seq) and voided it, so that the
	// bank refuses it from then on (see bank.settle).
	Void bool `json:"void,omitempty"`
}

// attempt names one attempt at a payment: its id and its marker's seq. A
// payment whose first attempt was voided is paid by a later attempt, with
// another seq.
type attempt struct{ id, seq string }

// bank is the money ledger of the example: an append-only file with one
// transfer (or void) per line, fsynced before a transfer counts as sent or
// a void as made. Concurrent writers share fsyncs (whoever syncs, syncs
// everything written so far).
type bank struct {
	mu      sync.Mutex
	f       *os.File
	written int64
	counts  map[string]int      // payment id: transfers synced
	byID    map[string]transfer // transfers written, synced or not
	voided  map[attempt]bool
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
	b := &bank{f: f, counts: make(map[string]int), byID: make(map[string]transfer), voided: make(map[attempt]bool)}
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
		if t.Void {
			b.voided[attempt{t.ID, t.Seq}] = true
		} else {
			b.counts[t.ID]++
			if _, ok := b.byID[t.ID]; !ok {
				b.byID[t.ID] = t
			}
		}
		good += int64(len(line))
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("bank: %w", err)
	}
	// What was read may not be on disk yet (the last run was killed before
	// its sync): make it durable before anyone reports it.
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("bank: sync: %w", err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("bank: %w", err)
	}
	return b, nil
}

var (
	errBankFailed = errors.New("bank: failed earlier; restart")
	// errVoided is returned by send for an attempt the resolver voided: no
	// money moved, and none will for this attempt.
	errVoided = errors.New("bank: attempt voided by the resolver; no money sent")
)

// send records t durably. errVoided means no money moved; any other error
// means the transfer's fate is unknown.
func (b *bank) send(t transfer) error {
	line, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("bank: %w", err)
	}
	a := attempt{t.ID, t.Seq}
	b.mu.Lock()
	if b.voided[a] {
		b.mu.Unlock()
		return errVoided
	}
	mine, err := b.write(line)
	if _, ok := b.byID[t.ID]; err == nil && !ok {
		b.byID[t.ID] = t
	}
	b.mu.Unlock()
	if err != nil {
		return err
	}
	if err := b.syncUpTo(mine); err != nil {
		return err
	}
	b.mu.Lock()
	b.counts[t.ID]++
	b.mu.Unlock()
	return nil
}

// write appends line and its newline; b.mu is held. It returns the line's
// number, for syncUpTo.
func (b *bank) write(line []byte) (int64, error) {
	if b.failed != nil {
		return 0, b.failed
	}
	if _, err := b.f.Write(append(line, '\n')); err != nil {
		b.failed = errBankFailed
		return 0, fmt.Errorf("bank: %w", err)
	}
	b.written++
	return b.written, nil
}

// syncUpTo returns once line mine (and every line before it) is durable.
func (b *bank) syncUpTo(mine int64) error {
	b.syncMu.Lock()
	defer b.syncMu.Unlock()
	if b.synced >= mine {
		return nil
	}
	b.mu.Lock()
	upto, failed := b.written, b.failed
	b.mu.Unlock()
	if failed != nil {
		return failed
	}
	if err := b.f.Sync(); err != nil {
		b.mu.Lock()
		b.failed = errBankFailed
		b.mu.Unlock()
		return fmt.Errorf("bank: sync: %w", err)
	}
	b.synced = upto
	return nil
}

// settle is the resolver's look-up: it reports whether attempt (id, seq)
// sent money, and the transfer if so; if not, it voids the attempt in the
// same critical section as the look-up (send checks voids under the same
// lock), so that a send of this attempt still in flight is refused from
// then on and can never land after the answer. Both answers are durable
// before settle returns: the transfer found, or the void. An error means
// the bank cannot tell (it failed, or this payment was sent by another
// attempt, which the at-most-once marker rules out: an operator looks).
func (b *bank) settle(id, seq string) (transfer, bool, error) {
	a := attempt{id, seq}
	b.mu.Lock()
	if t, ok := b.byID[id]; ok {
		mine := b.written // the transfer's line is at or before it
		b.mu.Unlock()
		if t.Seq != seq {
			return transfer{}, false, fmt.Errorf("bank: payment %s was sent by attempt %s, not %s", id, t.Seq, seq)
		}
		if err := b.syncUpTo(mine); err != nil {
			return transfer{}, false, err
		}
		return t, true, nil
	}
	mine := b.written
	if !b.voided[a] {
		line, err := json.Marshal(transfer{ID: id, Seq: seq, At: time.Now().UTC(), Void: true})
		if err == nil {
			mine, err = b.write(line)
		}
		if err != nil {
			b.mu.Unlock()
			return transfer{}, false, err
		}
		b.voided[a] = true
	}
	b.mu.Unlock()
	if err := b.syncUpTo(mine); err != nil {
		return transfer{}, false, err
	}
	return transfer{}, false, nil
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
