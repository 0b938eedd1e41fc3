package privacypass

import (
	"bytes"
	"crypto/rsa"
	"crypto/sha512"
	"encoding/binary"
	"errors"

	"filippo.io/bigmod"
)

// pssVerifier checks RSASSA-PSS signatures (RFC 8017 §8.1.2) with SHA-384,
// MGF1-SHA-384 and a 48-byte salt, the parameters of token type 0x0002,
// under one public key whose modulus is prepared once: crypto/rsa prepares
// it again for every signature, which costs a third of a verification.
// Everything here is public, so variable-time arithmetic is fine.
type pssVerifier struct {
	n    *bigmod.Modulus
	e    uint
	size int // modulus length in bytes
}

func newPSSVerifier(pk *rsa.PublicKey) (*pssVerifier, error) {
	if pk.E < 3 || pk.E > 1<<31-1 || pk.N.Sign() <= 0 || pk.N.BitLen()%8 != 0 {
		return nil, errors.New("privacypass: unsupported RSA public key")
	}
	n, err := bigmod.NewModulus(pk.N.Bytes())
	if err != nil {
		return nil, err
	}
	return &pssVerifier{n: n, e: uint(pk.E), size: (pk.N.BitLen() + 7) / 8}, nil
}

const (
	pssHashLen = sha512.Size384
	pssSaltLen = sha512.Size384
)

// verify reports whether sig is a valid signature of msg. The modulus
// length is a multiple of 8 bits (newPSSVerifier checks), so the encoded
// message is as long as the modulus, with its top bit clear.
func (v *pssVerifier) verify(msg, sig []byte) bool {
	if len(sig) != v.size {
		return false
	}
	s, err := bigmod.NewNat().SetBytes(sig, v.n)
	if err != nil {
		return false // s >= n
	}
	em := bigmod.NewNat().ExpShortVarTime(s, v.e, v.n).Bytes(v.n)
	// emBits = modBits - 1, a multiple of 8 minus one: EM is as long as the
	// modulus and its top bit must be zero.
	emLen := len(em)
	if emLen < pssHashLen+pssSaltLen+2 || em[emLen-1] != 0xbc || em[0]&0x80 != 0 {
		return false
	}
	db := em[:emLen-pssHashLen-1]
	h := em[emLen-pssHashLen-1 : emLen-1]
	mgf1XOR(db, h)
	db[0] &= 0x7f
	ps := len(db) - pssSaltLen - 1
	for _, b := range db[:ps] {
		if b != 0 {
			return false
		}
	}
	if db[ps] != 0x01 {
		return false
	}
	mHash := sha512.Sum384(msg)
	d := sha512.New384()
	var zeros [8]byte
	d.Write(zeros[:])
	d.Write(mHash[:])
	d.Write(db[len(db)-pssSaltLen:])
	var sum [pssHashLen]byte
	return bytes.Equal(d.Sum(sum[:0]), h)
}

// mgf1XOR xors out with MGF1-SHA-384(seed).
func mgf1XOR(out, seed []byte) {
	d := sha512.New384()
	var ctr [4]byte
	var sum [pssHashLen]byte
	for i, done := uint32(0), 0; done < len(out); i++ {
		binary.BigEndian.PutUint32(ctr[:], i)
		d.Reset()
		d.Write(seed)
		d.Write(ctr[:])
		m := d.Sum(sum[:0])
		for j := 0; j < len(m) && done < len(out); j++ {
			out[done] ^= m[j]
			done++
		}
	}
}
