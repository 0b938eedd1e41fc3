package privacypass

import (
	"crypto/rsa"

	"github.com/cloudflare/circl/group"

	"github.com/spentledger/spent/privacypass/blindsign"
)

// Test-only exports: the deterministic halves of the protocol, so that
// tests can replay the RFC vectors.

// NewPendingVOPRFWithBlind is NewPendingToken for type 0x0001 with a given
// nonce and blind (a serialized P-384 scalar).
func NewPendingVOPRFWithBlind(challenge, tokenKey []byte, nonce [NonceSize]byte, blind []byte) (*PendingToken, error) {
	s := group.P384.NewScalar()
	if err := s.UnmarshalBinary(blind); err != nil {
		return nil, err
	}
	return newPendingVOPRF(challenge, tokenKey, nonce, s)
}

// IssueWithSecret answers the token request req (wire form) with the issuer
// key whose stored secret is secret (PKCS #8 DER for 0x0002, the scalar for
// 0x0001), and returns the response in wire form and the key's token-key.
func IssueWithSecret(t TokenType, secret, req []byte) (resp, tokenKey []byte, err error) {
	k, err := keyFromSecret(t, secret)
	if err != nil {
		return nil, nil, err
	}
	r, err := ParseTokenRequest(req)
	if err != nil {
		return nil, nil, err
	}
	p, err := k.prepare(&r)
	if err != nil {
		return nil, nil, err
	}
	out, err := p.issue()
	if err != nil {
		return nil, nil, err
	}
	b, err := out.MarshalBinary()
	return b, k.TokenKey, err
}

// VerifyWithSecret verifies a token (wire form) with the issuer key whose
// stored secret is secret.
func VerifyWithSecret(t TokenType, secret, token []byte) (bool, error) {
	k, err := keyFromSecret(t, secret)
	if err != nil {
		return false, err
	}
	tok, err := ParseToken(token)
	if err != nil {
		return false, err
	}
	return k.Verify(&tok), nil
}

// BlindSignForTest signs a blinded message with the issuer's signer.
func BlindSignForTest(sk *rsa.PrivateKey, blinded []byte) ([]byte, error) {
	s, err := blindsign.New(sk)
	if err != nil {
		return nil, err
	}
	return s.BlindSign(blinded)
}

// LedgerKey is the ledger key a token is spent under.
func LedgerKey(t *Token) string { return ledgerKey(t) }

// VerifyPSSForTest checks an RSASSA-PSS (SHA-384, 48-byte salt) signature
// with the verifier type 0x0002 tokens use.
func VerifyPSSForTest(pk *rsa.PublicKey, msg, sig []byte) bool {
	v, err := newPSSVerifier(pk)
	if err != nil {
		return false
	}
	return v.verify(msg, sig)
}

// ParseKeyFileHeader parses the clear header of a key file and returns it
// re-encoded, with the rest of the file.
func ParseKeyFileHeader(b []byte) (header, rest []byte, err error) {
	h, rest, err := parseKeyHeader(b)
	if err != nil {
		return nil, nil, err
	}
	return h.append(nil), rest, nil
}
