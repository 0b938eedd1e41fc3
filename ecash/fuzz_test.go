package ecash_test

import (
	"bytes"
	"testing"

	"github.com/spentledger/spent/ecash"
)

func seedRequests(f *testing.F) {
	out := ecash.Output{Denomination: 4, Blinded: bytes.Repeat([]byte{7}, ecash.BlindedSize)}
	sp := ecash.Spend{Token: bytes.Repeat([]byte{2}, 98+256), Return: 4, Outputs: []ecash.Output{out, out}}
	b, _ := sp.MarshalBinary()
	f.Add(b)
	is := ecash.Issue{Challenge: make([]byte, ecash.ChallengeSize), Solution: 99, Outputs: []ecash.Output{out}}
	b, _ = is.MarshalBinary()
	f.Add(b)
	r := ecash.Response{Value: 8, Charge: 4, BlindSigs: [][]byte{out.Blinded}}
	b, _ = r.MarshalBinary()
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0})
}

// FuzzParse checks that every parser either refuses its input or accepts
// exactly the bytes its marshaller writes back.
func FuzzParse(f *testing.F) {
	seedRequests(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := ecash.ParseSpend(b); err == nil {
			if m, err := s.MarshalBinary(); err != nil || !bytes.Equal(m, b) {
				t.Fatalf("spend does not round-trip: %v", err)
			}
		}
		if s, err := ecash.ParseIssue(b); err == nil {
			if m, err := s.MarshalBinary(); err != nil || !bytes.Equal(m, b) {
				t.Fatalf("issue does not round-trip: %v", err)
			}
		}
		if s, err := ecash.ParseResponse(b); err == nil {
			if m, err := s.MarshalBinary(); err != nil || !bytes.Equal(m, b) {
				t.Fatalf("response does not round-trip: %v", err)
			}
		}
	})
}

// FuzzHandlers sends arbitrary bodies to the issuer: nothing may panic, and
// nothing unparsable may reach the ledger (every answer is a final 4xx).
func FuzzHandlers(f *testing.F) {
	seedRequests(f)
	e := newEnv(f, nil, nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, call := range []func() error{
			func() error { _, err := e.iss.Spend(t.Context(), b); return err },
			func() error { _, err := e.iss.Issue(t.Context(), b); return err },
		} {
			err := call()
			ee, ok := err.(*ecash.Error)
			if !ok || !ee.Final() {
				t.Fatalf("got %v, want a final refusal", err)
			}
		}
	})
}
