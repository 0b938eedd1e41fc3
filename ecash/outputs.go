package ecash

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/spentledger/spent/privacypass"
)

// SeedSize is the size of the secret seed outputs are derived from.
const SeedSize = 32

// Pending is the client's half of a set of outputs: the blinded messages to
// send and the secrets to finish them. It is derived from a seed, entirely:
// the same seed, challenge and keys give the same nonces, blinds and bytes,
// so a wallet that journals the seed can finish a response after a crash.
type Pending struct {
	// Outputs are the outputs to put in the request.
	Outputs []Output

	keys   []*Key
	tokens []*privacypass.PendingToken
}

// stream is a deterministic byte stream: SHA-256(seed ‖ index ‖ counter)
// blocks. It feeds privacypass.NewPendingToken the nonce and the blinding
// randomness of one output.
type stream struct {
	seed    []byte
	index   uint32
	counter uint64
	buf     []byte
}

// Read fills p from the stream; it never fails.
func (s *stream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(s.buf) == 0 {
			h := sha256.New()
			h.Write([]byte("spent ecash output v1"))
			h.Write(s.seed)
			var b [12]byte
			binary.BigEndian.PutUint32(b[:4], s.index)
			binary.BigEndian.PutUint64(b[4:], s.counter)
			h.Write(b[:])
			s.counter++
			s.buf = h.Sum(nil)
		}
		c := copy(p[n:], s.buf)
		s.buf = s.buf[c:]
		n += c
	}
	return n, nil
}

// NewOutputs blinds one token per key (its denomination is the key's) for
// the TokenChallenge challenge (KeyList.TokenChallenge), with every secret
// derived from seed (SeedSize random bytes, kept secret).
func NewOutputs(challenge []byte, keys []*Key, seed []byte) (*Pending, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("ecash: seed of %d bytes: want %d", len(seed), SeedSize)
	}
	if len(keys) > MaxOutputs {
		return nil, fmt.Errorf("ecash: %d outputs: at most %d", len(keys), MaxOutputs)
	}
	p := &Pending{keys: keys}
	for i, k := range keys {
		pt, err := privacypass.NewPendingToken(challenge, privacypass.TypeBlindRSA, k.TokenKey, &stream{seed: seed, index: uint32(i)})
		if err != nil {
			return nil, fmt.Errorf("ecash: output %d: %w", i, err)
		}
		p.tokens = append(p.tokens, pt)
		p.Outputs = append(p.Outputs, Output{Denomination: k.Denomination, KeyID: k.ID, Blinded: pt.Request.BlindedMsg})
	}
	return p, nil
}

// Sum returns the total value of the outputs.
func (p *Pending) Sum() uint64 {
	var s uint64
	for _, o := range p.Outputs {
		s += o.Denomination
	}
	return s
}

// Coin is a finished value token.
type Coin struct {
	// Denomination is what the token is worth.
	Denomination uint64 `json:"denomination"`
	// Token is the token's wire form (privacypass.Token, type 0x0002).
	Token []byte `json:"token"`
}

// Finish unblinds the response (its exact bytes) into coins, checking every
// signature under its key.
func (p *Pending) Finish(response []byte) ([]Coin, *Response, error) {
	resp, err := ParseResponse(response)
	if err != nil {
		return nil, nil, err
	}
	if len(resp.BlindSigs) != len(p.tokens) {
		return nil, nil, fmt.Errorf("%w: %d signatures for %d outputs", ErrMalformed, len(resp.BlindSigs), len(p.tokens))
	}
	coins := make([]Coin, len(p.tokens))
	for i, pt := range p.tokens {
		tok, err := pt.Finalize(resp.BlindSigs[i])
		if err != nil {
			return nil, nil, fmt.Errorf("ecash: output %d: %w", i, err)
		}
		if !p.keys[i].Verify(&tok) {
			return nil, nil, errors.New("ecash: output signature does not verify")
		}
		b, err := tok.MarshalBinary()
		if err != nil {
			return nil, nil, err
		}
		coins[i] = Coin{Denomination: p.keys[i].Denomination, Token: b}
	}
	return coins, &resp, nil
}

// Decompose writes amount as denominations of the keys given (greedy,
// largest first) and returns the keys to ask for, or an error when the
// amount cannot be made exactly.
func Decompose(amount uint64, keys map[uint64]*Key) ([]*Key, error) {
	var denoms []uint64
	for d := range keys {
		denoms = append(denoms, d)
	}
	// sort descending
	for i := 1; i < len(denoms); i++ {
		for j := i; j > 0 && denoms[j] > denoms[j-1]; j-- {
			denoms[j], denoms[j-1] = denoms[j-1], denoms[j]
		}
	}
	var out []*Key
	for _, d := range denoms {
		for amount >= d {
			out = append(out, keys[d])
			amount -= d
		}
	}
	if amount != 0 {
		return nil, fmt.Errorf("ecash: %d cannot be made of the denominations offered", amount)
	}
	if len(out) > MaxOutputs {
		return nil, fmt.Errorf("ecash: %d outputs needed: at most %d", len(out), MaxOutputs)
	}
	return out, nil
}
