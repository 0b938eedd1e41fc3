package ecash_test

import (
	"bytes"
	"testing"

	"github.com/spentledger/spent/ecash"
)

func TestOutputsAreDeterministicInTheSeed(t *testing.T) {
	e := newEnv(t, nil, nil)
	l, cur := e.currentKeys(t)
	seed := randSeed(t)
	ks := []*ecash.Key{cur[8], cur[1]}
	a, err := ecash.NewOutputs(l.TokenChallenge, ks, seed)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ecash.NewOutputs(l.TokenChallenge, ks, seed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Outputs {
		if !bytes.Equal(a.Outputs[i].Blinded, b.Outputs[i].Blinded) {
			t.Fatalf("output %d: blinded messages differ for one seed", i)
		}
	}
	c, err := ecash.NewOutputs(l.TokenChallenge, ks, randSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Outputs[0].Blinded, c.Outputs[0].Blinded) {
		t.Fatal("two seeds gave the same blinded message")
	}
}
