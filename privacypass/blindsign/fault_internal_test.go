package blindsign

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFaultCheck corrupts one CRT half, as a glitch would, and checks that
// BlindSign returns ErrFault instead of the faulty signature (which would
// reveal a prime factor of n: gcd(sig^e - m, n)).
func TestFaultCheck(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "rsa2048.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]string
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	num := func(k string) *big.Int {
		n, ok := new(big.Int).SetString(strings.TrimPrefix(v[k], "0x"), 16)
		if !ok {
			t.Fatalf("bad %s", k)
		}
		return n
	}
	sk := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: num("n"), E: int(num("e").Int64())}, D: num("d"),
		Primes: []*big.Int{num("p"), num("q")}}
	sk.Precompute()
	s, err := New(sk)
	if err != nil {
		t.Fatal(err)
	}
	m := make([]byte, s.Size())
	m[len(m)-1] = 7
	if _, err := s.BlindSign(m); err != nil {
		t.Fatalf("intact signer: %v", err)
	}
	for _, half := range []string{"p", "q"} {
		c := *s
		if half == "p" {
			c.dP = append([]byte(nil), s.dP...)
			c.dP[len(c.dP)-1] ^= 2
		} else {
			c.dQ = append([]byte(nil), s.dQ...)
			c.dQ[len(c.dQ)-1] ^= 2
		}
		sig, err := c.BlindSign(m)
		if !errors.Is(err, ErrFault) || sig != nil {
			t.Fatalf("corrupt %s half: got %x, %v; want nil, ErrFault", half, sig, err)
		}
	}
}
