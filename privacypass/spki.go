package privacypass

import (
	"bytes"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
)

// pssAlgorithm is the DER AlgorithmIdentifier of RSASSA-PSS with SHA-384,
// MGF1 with SHA-384 and a 48-byte salt (RFC 4055), which RFC 9578 §6.5
// requires of a type 0x0002 issuer key:
//
//	SEQUENCE {
//	  OID 1.2.840.113549.1.1.10 (id-RSASSA-PSS)
//	  SEQUENCE {
//	    [0] SEQUENCE { OID 2.16.840.1.101.3.4.2.2 (sha384) }
//	    [1] SEQUENCE { OID 1.2.840.113549.1.1.8 (id-mgf1), SEQUENCE { OID sha384 } }
//	    [2] INTEGER 48
//	  }
//	}
var pssAlgorithm = mustHexBytes("303d06092a864886f70d01010a3030a00d300b0609608648016503040202" +
	"a11a301806092a864886f70d010108300b0609608648016503040202a203020130")

func mustHexBytes(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// spki is SubjectPublicKeyInfo with the algorithm kept as raw bytes.
type spki struct {
	Algorithm asn1.RawValue  // AlgorithmIdentifier, compared as bytes
	PublicKey asn1.BitString // RSAPublicKey (PKCS #1)
}

// MarshalPublicKey returns the RSASSA-PSS SubjectPublicKeyInfo (DER) of a
// 2048-bit key, the token-key of a type 0x0002 issuer. Its SHA-256 is the
// token_key_id.
func MarshalPublicKey(pk *rsa.PublicKey) ([]byte, error) {
	if pk == nil || pk.N == nil || pk.N.BitLen() != 8*rsaNk {
		return nil, fmt.Errorf("%w: a type 0x0002 key must be 2048-bit RSA", ErrMalformed)
	}
	inner := x509.MarshalPKCS1PublicKey(pk)
	b, err := asn1.Marshal(spki{
		Algorithm: asn1.RawValue{FullBytes: pssAlgorithm},
		PublicKey: asn1.BitString{Bytes: inner, BitLength: 8 * len(inner)},
	})
	if err != nil {
		return nil, fmt.Errorf("privacypass: marshal public key: %w", err)
	}
	return b, nil
}

// ParsePublicKey parses a type 0x0002 token-key strictly: an RSASSA-PSS
// SubjectPublicKeyInfo with exactly the SHA-384 parameters of RFC 9578, a
// 2048-bit modulus, and DER that marshals back to exactly b. Keys
// published under the rsaEncryption OID are refused.
func ParsePublicKey(b []byte) (*rsa.PublicKey, error) {
	var s spki
	rest, err := asn1.Unmarshal(b, &s)
	if err != nil {
		return nil, fmt.Errorf("%w: token-key: %w", ErrMalformed, err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: token-key: %d bytes after the key", ErrMalformed, len(rest))
	}
	if !bytes.Equal(s.Algorithm.FullBytes, pssAlgorithm) {
		return nil, fmt.Errorf("%w: token-key: not RSASSA-PSS with SHA-384, MGF1-SHA-384 and a 48-byte salt", ErrMalformed)
	}
	if s.PublicKey.BitLength != 8*len(s.PublicKey.Bytes) {
		return nil, fmt.Errorf("%w: token-key: bit string with unused bits", ErrMalformed)
	}
	pk, err := x509.ParsePKCS1PublicKey(s.PublicKey.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: token-key: %w", ErrMalformed, err)
	}
	again, err := MarshalPublicKey(pk)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, b) {
		return nil, fmt.Errorf("%w: token-key: not in canonical DER", ErrMalformed)
	}
	return pk, nil
}

// KeyID returns the token_key_id of an issuer key: SHA-256 of its encoding
// (the SPKI for type 0x0002, the compressed point for type 0x0001).
func KeyID(tokenKey []byte) [KeyIDSize]byte { return sha256.Sum256(tokenKey) }

// TruncatedKeyID returns the last byte of a token_key_id, which token
// requests carry.
func TruncatedKeyID(id [KeyIDSize]byte) uint8 { return id[KeyIDSize-1] }
