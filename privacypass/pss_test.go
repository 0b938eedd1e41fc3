package privacypass_test

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"testing"

	"github.com/spentledger/spent/privacypass"
)

func stdVerify(pk *rsa.PublicKey, msg, sig []byte) bool {
	h := sha512.Sum384(msg)
	return rsa.VerifyPSS(pk, crypto.SHA384, h[:], sig, &rsa.PSSOptions{SaltLength: 48}) == nil
}

// TestPSSVerifierMatchesCryptoRSA checks the prepared verifier against
// crypto/rsa on valid signatures and on every single-byte corruption of
// one.
func TestPSSVerifierMatchesCryptoRSA(t *testing.T) {
	sk, err := keyGen()()
	if err != nil {
		t.Fatal(err)
	}
	pk := &sk.PublicKey
	for i := range 20 {
		msg := bytes.Repeat([]byte{byte(i)}, i*7)
		h := sha512.Sum384(msg)
		sig, err := rsa.SignPSS(rand.Reader, sk, crypto.SHA384, h[:], &rsa.PSSOptions{SaltLength: 48})
		if err != nil {
			t.Fatal(err)
		}
		if !privacypass.VerifyPSSForTest(pk, msg, sig) {
			t.Fatalf("valid signature %d refused", i)
		}
		if privacypass.VerifyPSSForTest(pk, append(msg, 0), sig) {
			t.Fatalf("signature %d accepted for another message", i)
		}
		if i == 0 {
			for j := range sig {
				bad := bytes.Clone(sig)
				bad[j] ^= 0x40
				if got, want := privacypass.VerifyPSSForTest(pk, msg, bad), stdVerify(pk, msg, bad); got != want {
					t.Fatalf("byte %d flipped: got %v, crypto/rsa says %v", j, got, want)
				}
			}
		}
	}
	// A signature with another salt length is refused, as crypto/rsa does.
	h := sha512.Sum384([]byte("m"))
	sig, _ := rsa.SignPSS(rand.Reader, sk, crypto.SHA384, h[:], &rsa.PSSOptions{SaltLength: 32})
	if privacypass.VerifyPSSForTest(pk, []byte("m"), sig) {
		t.Fatal("32-byte salt accepted")
	}
}

// FuzzPSSVerify compares the prepared verifier with crypto/rsa on
// arbitrary signatures under the RFC 9578 A.2 key.
func FuzzPSSVerify(f *testing.F) {
	var pk *rsa.PublicKey
	for _, v := range hexVectors(f, "rfc9578-type2-issuance.json") {
		var err error
		if pk, err = privacypass.ParsePublicKey(unhex(f, v["pkS"])); err != nil {
			f.Fatal(err)
		}
		tok := unhex(f, v["token"])
		f.Add(tok[:98], tok[98:])
	}
	f.Fuzz(func(t *testing.T, msg, sig []byte) {
		if got, want := privacypass.VerifyPSSForTest(pk, msg, sig), stdVerify(pk, msg, sig); got != want {
			t.Fatalf("got %v, crypto/rsa says %v", got, want)
		}
	})
}
