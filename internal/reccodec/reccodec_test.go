package reccodec_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/internal/reccodec"
)

func TestRoundTrip(t *testing.T) {
	base := spent.Record{
		Namespace: "ns", Hash: spent.Hash{1, 2, 3}, RawKey: "raw", FirstSeen: time.Unix(1900000000, 123456789),
		Place: "gate", Fingerprint: bytes.Repeat([]byte{7}, 32), State: spent.StatePending,
		ExpiresAt: time.Unix(1900003600, 1), LeaseUntil: time.Unix(1900000030, 999999999),
		Seq: spent.Seq{Node: 1<<32 - 1, Counter: 1<<64 - 1},
	}
	complete := base
	complete.State, complete.LeaseUntil, complete.Result = spent.StateComplete, time.Time{}, []byte("ok")
	empty := complete
	empty.Result = []byte{}
	for _, r := range []spent.Record{base, complete, empty} {
		got, err := reccodec.Decode(r.Hash, reccodec.Append(nil, &r))
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if !got.FirstSeen.Equal(r.FirstSeen) || !got.ExpiresAt.Equal(r.ExpiresAt) || !got.LeaseUntil.Equal(r.LeaseUntil) {
			t.Fatalf("times: got %v, want %v", got, r)
		}
		got.FirstSeen, got.ExpiresAt, got.LeaseUntil = r.FirstSeen, r.ExpiresAt, r.LeaseUntil
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip: got %+v, want %+v", got, r)
		}
		if (got.Result == nil) != (r.Result == nil) {
			t.Fatalf("result presence: got %v, want %v", got.Result, r.Result)
		}
	}
	// Every truncation, and trailing bytes, are refused.
	enc := reccodec.Append(nil, &complete)
	for i := range enc {
		if _, err := reccodec.Decode(complete.Hash, enc[:i]); !errors.Is(err, reccodec.ErrBad) {
			t.Fatalf("Decode of %d of %d bytes: got %v, want ErrBad", i, len(enc), err)
		}
	}
	if _, err := reccodec.Decode(complete.Hash, append(enc, 0)); !errors.Is(err, reccodec.ErrBad) {
		t.Fatalf("Decode with a trailing byte: got %v, want ErrBad", err)
	}
}

func FuzzDecode(f *testing.F) {
	r := spent.Record{Namespace: "n", State: spent.StateComplete, Result: []byte("x"), Seq: spent.Seq{Node: 1, Counter: 2}}
	f.Add(reccodec.Append(nil, &r))
	f.Fuzz(func(t *testing.T, v []byte) {
		rec, err := reccodec.Decode(spent.Hash{}, v)
		if err != nil {
			return
		}
		// What decodes survives a round trip unchanged.
		again, err := reccodec.Decode(spent.Hash{}, reccodec.Append(nil, &rec))
		if err != nil {
			t.Fatalf("decoding the re-encoding of %+v: %v", rec, err)
		}
		if !reflect.DeepEqual(again, rec) {
			t.Fatalf("round trip: got %+v, want %+v", again, rec)
		}
	})
}

func TestDecodeLimit(t *testing.T) {
	r := spent.Record{
		Namespace: "ns", Hash: spent.Hash{9}, FirstSeen: time.Unix(1900000000, 5), Place: "gate",
		State: spent.StateComplete, Result: bytes.Repeat([]byte("r"), 100), ExpiresAt: time.Unix(1900003600, 0),
		Seq: spent.Seq{Node: 2, Counter: 7},
	}
	v := reccodec.Append(nil, &r)
	for _, tc := range []struct {
		limit, omitted int
	}{{0, 0}, {-1, 0}, {100, 0}, {101, 0}, {99, 100}, {1, 100}} {
		got, omitted, err := reccodec.DecodeLimit(r.Hash, v, tc.limit)
		if err != nil {
			t.Fatalf("DecodeLimit(%d): %v", tc.limit, err)
		}
		if omitted != tc.omitted {
			t.Fatalf("DecodeLimit(%d): omitted %d, want %d", tc.limit, omitted, tc.omitted)
		}
		if wantResult := tc.omitted == 0; (got.Result != nil) != wantResult || (wantResult && !bytes.Equal(got.Result, r.Result)) {
			t.Fatalf("DecodeLimit(%d): result of %d bytes, want it only when not omitted", tc.limit, len(got.Result))
		}
		if got.Seq != r.Seq || got.Namespace != r.Namespace || got.Place != r.Place || !got.ExpiresAt.Equal(r.ExpiresAt) {
			t.Fatalf("DecodeLimit(%d): got %+v, want the other fields of %+v", tc.limit, got, r)
		}
	}
	// Damage is still refused when the result is left out.
	if _, _, err := reccodec.DecodeLimit(r.Hash, v[:len(v)-1], 1); !errors.Is(err, reccodec.ErrBad) {
		t.Fatalf("DecodeLimit of a truncated record: got %v, want ErrBad", err)
	}
}
