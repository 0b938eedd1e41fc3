package pebble_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/pebble"
)

// FuzzRecordCodec checks that decoding never panics, that whatever decodes
// encodes to bytes that decode to the same record, and that a corrupt value
// is reported as ErrCorrupt.
func FuzzRecordCodec(f *testing.F) {
	for _, r := range []spent.Record{
		{Namespace: "default", FirstSeen: t0, Place: "gate", State: spent.StateComplete, Result: []byte{},
			ExpiresAt: t0.Add(time.Hour), Seq: spent.Seq{Node: 1, Counter: 1}},
		{Namespace: "pay", RawKey: "order-17", FirstSeen: t0, Fingerprint: bytes.Repeat([]byte{7}, 32),
			State: spent.StatePending, ExpiresAt: t0.Add(time.Hour), LeaseUntil: t0.Add(time.Second),
			Seq: spent.Seq{Node: 1 << 31, Counter: 1 << 62}},
		{Namespace: "tok", State: spent.StateComplete, Result: []byte("r"),
			ExpiresAt: time.Date(9999, 1, 1, 0, 0, 0, 1, time.UTC), Seq: spent.Seq{Node: 9, Counter: 9}},
	} {
		f.Add(pebble.EncodeRecord(&r))
	}
	f.Add([]byte{})
	f.Add([]byte{1, 2, 0})
	var h spent.Hash
	f.Fuzz(func(t *testing.T, v []byte) {
		r, err := pebble.DecodeRecord(h, v)
		if err != nil {
			if !errors.Is(err, pebble.ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			return
		}
		again, err := pebble.DecodeRecord(h, pebble.EncodeRecord(&r))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !sameRecord(again, r) {
			t.Fatalf("got %+v, want %+v", again, r)
		}
	})
}
