package privacypass

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// TokenType is a Privacy Pass token type from the IANA "Privacy Pass Token
// Types" registry.
type TokenType uint16

// The token types this package issues and redeems (RFC 9578).
const (
	// TypeVOPRF is token type 0x0001: VOPRF(P-384, SHA-384), privately
	// verifiable. Only the issuer and the origins that hold its secret key
	// can check a token.
	TypeVOPRF TokenType = 0x0001
	// TypeBlindRSA is token type 0x0002: Blind RSA (2048-bit),
	// RSABSSA-SHA384-PSS-Deterministic, publicly verifiable with the key in
	// the issuer directory.
	TypeBlindRSA TokenType = 0x0002
)

// String returns the type's name and number.
func (t TokenType) String() string {
	switch t {
	case TypeVOPRF:
		return "VOPRF(P-384, SHA-384) (0x0001)"
	case TypeBlindRSA:
		return "Blind RSA 2048 (0x0002)"
	}
	return fmt.Sprintf("token type 0x%04x", uint16(t))
}

// Supported reports whether this package issues and redeems tokens of t.
func (t TokenType) Supported() bool { return t == TypeVOPRF || t == TypeBlindRSA }

// Sizes of the fixed fields of the wire formats, in bytes.
const (
	// NonceSize is the size of a token's client nonce.
	NonceSize = 32
	// DigestSize is the size of a challenge digest (SHA-256).
	DigestSize = sha256.Size
	// KeyIDSize is the size of a token_key_id (SHA-256 of the issuer key).
	KeyIDSize = sha256.Size
	// RedemptionContextSize is the size of a non-empty redemption context.
	RedemptionContextSize = 32

	rsaNk        = 256 // Blind RSA 2048: modulus, blinded message and signature length
	voprfNe      = 49  // P-384 compressed element
	voprfNs      = 48  // P-384 scalar
	voprfNh      = 48  // SHA-384 output: the type 0x0001 authenticator
	maxNameBytes = 1<<16 - 1
)

// blindedSize is the size of a token request's blinded message for t.
func (t TokenType) blindedSize() int {
	switch t {
	case TypeVOPRF:
		return voprfNe
	case TypeBlindRSA:
		return rsaNk
	}
	return -1
}

// responseSize is the size of a token response for t.
func (t TokenType) responseSize() int {
	switch t {
	case TypeVOPRF:
		return voprfNe + 2*voprfNs
	case TypeBlindRSA:
		return rsaNk
	}
	return -1
}

// authenticatorSize is the size of a token's authenticator for t.
func (t TokenType) authenticatorSize() int {
	switch t {
	case TypeVOPRF:
		return voprfNh
	case TypeBlindRSA:
		return rsaNk
	}
	return -1
}

// Errors of the wire-format parsers. Every parse error wraps one of them.
var (
	// ErrTokenType is returned for a token type this package does not
	// support. The issuer answers it with 422.
	ErrTokenType = errors.New("privacypass: unsupported token type")
	// ErrSize is returned for a message whose length does not match its
	// token type. The issuer answers it with 422.
	ErrSize = errors.New("privacypass: wrong size")
	// ErrMalformed is returned for any other malformed message: a length
	// prefix that overruns, trailing bytes, a field value the format forbids.
	ErrMalformed = errors.New("privacypass: malformed")
)

// TokenChallenge is the challenge an origin sends (RFC 9577 §2.1.1):
//
//	struct {
//	    uint16_t token_type;
//	    opaque issuer_name<1..2^16-1>;
//	    opaque redemption_context<0..32>;
//	    opaque origin_info<0..2^16-1>;
//	} TokenChallenge;
type TokenChallenge struct {
	// TokenType is the type of token the origin asks for.
	TokenType TokenType
	// IssuerName names the issuer whose tokens the origin accepts.
	IssuerName string
	// RedemptionContext is empty or 32 bytes. A random one binds the token
	// to this one challenge; an empty one lets clients fetch tokens ahead.
	RedemptionContext []byte
	// OriginInfo is empty or a comma-separated list of origin names.
	OriginInfo string
}

// validName reports whether s is 1 to 65535 bytes of visible ASCII.
func validName(s string) bool {
	if len(s) == 0 || len(s) > maxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Validate checks the fields against RFC 9577: an issuer name of 1 to 65535
// bytes, a redemption context of 0 or 32 bytes, and origin info that is
// empty or a list of names separated by single commas. Names are visible
// ASCII (no spaces).
func (c *TokenChallenge) Validate() error {
	if !validName(c.IssuerName) {
		return fmt.Errorf("%w: issuer_name must be 1 to %d bytes of visible ASCII", ErrMalformed, maxNameBytes)
	}
	if n := len(c.RedemptionContext); n != 0 && n != RedemptionContextSize {
		return fmt.Errorf("%w: redemption_context of %d bytes: want 0 or %d", ErrMalformed, n, RedemptionContextSize)
	}
	if c.OriginInfo != "" {
		if len(c.OriginInfo) > maxNameBytes {
			return fmt.Errorf("%w: origin_info longer than %d bytes", ErrMalformed, maxNameBytes)
		}
		for o := range strings.SplitSeq(c.OriginInfo, ",") {
			if !validName(o) {
				return fmt.Errorf("%w: origin_info %q: want names of visible ASCII separated by single commas", ErrMalformed, c.OriginInfo)
			}
		}
	}
	return nil
}

// Origins returns the origin names of OriginInfo (none when it is empty).
func (c *TokenChallenge) Origins() []string {
	if c.OriginInfo == "" {
		return nil
	}
	return strings.Split(c.OriginInfo, ",")
}

// AppendBinary appends the wire form of c to b. It fails when c does not
// pass Validate.
func (c *TokenChallenge) AppendBinary(b []byte) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return b, err
	}
	b = binary.BigEndian.AppendUint16(b, uint16(c.TokenType))
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.IssuerName)))
	b = append(b, c.IssuerName...)
	b = append(b, byte(len(c.RedemptionContext)))
	b = append(b, c.RedemptionContext...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.OriginInfo)))
	return append(b, c.OriginInfo...), nil
}

// MarshalBinary returns the wire form of c.
func (c *TokenChallenge) MarshalBinary() ([]byte, error) { return c.AppendBinary(nil) }

// ParseTokenChallenge parses the wire form of a TokenChallenge strictly: the
// result marshals back to exactly b. Any token type is accepted (a client
// decides which it can answer); the fields must pass Validate and no byte
// may follow origin_info.
func ParseTokenChallenge(b []byte) (TokenChallenge, error) {
	var c TokenChallenge
	r := reader{b: b}
	c.TokenType = TokenType(r.u16())
	c.IssuerName = string(r.bytes(int(r.u16())))
	c.RedemptionContext = r.bytes(int(r.u8()))
	c.OriginInfo = string(r.bytes(int(r.u16())))
	if r.bad {
		return TokenChallenge{}, fmt.Errorf("%w: token challenge truncated", ErrMalformed)
	}
	if len(r.b) != 0 {
		return TokenChallenge{}, fmt.Errorf("%w: %d bytes after the token challenge", ErrMalformed, len(r.b))
	}
	if len(c.RedemptionContext) == 0 {
		c.RedemptionContext = nil
	}
	if err := c.Validate(); err != nil {
		return TokenChallenge{}, err
	}
	return c, nil
}

// ChallengeDigest returns SHA-256 of a TokenChallenge's wire form, the
// challenge_digest a token carries.
func ChallengeDigest(challenge []byte) [DigestSize]byte { return sha256.Sum256(challenge) }

// TokenRequest is a client's request for one token (RFC 9578 §5.1, §6.1):
//
//	struct {
//	    uint16_t token_type;
//	    uint8_t truncated_token_key_id;
//	    uint8_t blinded_msg[Nk or Ne];
//	} TokenRequest;
type TokenRequest struct {
	// TokenType is TypeVOPRF or TypeBlindRSA.
	TokenType TokenType
	// TruncatedKeyID is the last byte of the issuer key's token_key_id.
	TruncatedKeyID uint8
	// BlindedMsg is the blinded element (49 bytes, type 0x0001) or the
	// blinded message (256 bytes, type 0x0002).
	BlindedMsg []byte
}

// AppendBinary appends the wire form of r to b. It fails for an unsupported
// type or a blinded message of the wrong size.
func (r *TokenRequest) AppendBinary(b []byte) ([]byte, error) {
	if !r.TokenType.Supported() {
		return b, fmt.Errorf("%w: %v", ErrTokenType, r.TokenType)
	}
	if len(r.BlindedMsg) != r.TokenType.blindedSize() {
		return b, fmt.Errorf("%w: blinded message of %d bytes for %v: want %d", ErrSize, len(r.BlindedMsg), r.TokenType, r.TokenType.blindedSize())
	}
	b = binary.BigEndian.AppendUint16(b, uint16(r.TokenType))
	b = append(b, r.TruncatedKeyID)
	return append(b, r.BlindedMsg...), nil
}

// MarshalBinary returns the wire form of r.
func (r *TokenRequest) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// ParseTokenRequest parses the wire form of a TokenRequest strictly: the
// result marshals back to exactly b. An unsupported type is ErrTokenType; a
// length that does not match the type is ErrSize.
func ParseTokenRequest(b []byte) (TokenRequest, error) {
	if len(b) < 2 {
		return TokenRequest{}, fmt.Errorf("%w: token request of %d bytes", ErrSize, len(b))
	}
	t := TokenType(binary.BigEndian.Uint16(b))
	if !t.Supported() {
		return TokenRequest{}, fmt.Errorf("%w: %v", ErrTokenType, t)
	}
	if want := 3 + t.blindedSize(); len(b) != want {
		return TokenRequest{}, fmt.Errorf("%w: token request of %d bytes for %v: want %d", ErrSize, len(b), t, want)
	}
	return TokenRequest{TokenType: t, TruncatedKeyID: b[2], BlindedMsg: b[3:len(b):len(b)]}, nil
}

// TokenResponse is an issuer's answer to a TokenRequest (RFC 9578 §5.2,
// §6.2). Its wire form depends on the request's type, which it does not
// carry:
//
//	struct { uint8_t evaluate_msg[Ne]; uint8_t evaluate_proof[Ns+Ns]; }  // 0x0001
//	struct { uint8_t blind_sig[Nk]; }                                     // 0x0002
type TokenResponse struct {
	// TokenType is the type of the request answered; it is not on the wire.
	TokenType TokenType
	// EvaluateMsg is the evaluated element (type 0x0001).
	EvaluateMsg []byte
	// EvaluateProof is the DLEQ proof, c ‖ s (type 0x0001).
	EvaluateProof []byte
	// BlindSig is the blind signature (type 0x0002).
	BlindSig []byte
}

// AppendBinary appends the wire form of r to b.
func (r *TokenResponse) AppendBinary(b []byte) ([]byte, error) {
	switch r.TokenType {
	case TypeVOPRF:
		if len(r.EvaluateMsg) != voprfNe || len(r.EvaluateProof) != 2*voprfNs || r.BlindSig != nil {
			return b, fmt.Errorf("%w: type 0x0001 response needs a %d-byte element and a %d-byte proof", ErrSize, voprfNe, 2*voprfNs)
		}
		b = append(b, r.EvaluateMsg...)
		return append(b, r.EvaluateProof...), nil
	case TypeBlindRSA:
		if len(r.BlindSig) != rsaNk || r.EvaluateMsg != nil || r.EvaluateProof != nil {
			return b, fmt.Errorf("%w: type 0x0002 response needs a %d-byte blind signature", ErrSize, rsaNk)
		}
		return append(b, r.BlindSig...), nil
	}
	return b, fmt.Errorf("%w: %v", ErrTokenType, r.TokenType)
}

// MarshalBinary returns the wire form of r.
func (r *TokenResponse) MarshalBinary() ([]byte, error) { return r.AppendBinary(nil) }

// ParseTokenResponse parses the wire form of a response to a request of
// type t strictly: the result marshals back to exactly b.
func ParseTokenResponse(t TokenType, b []byte) (TokenResponse, error) {
	if !t.Supported() {
		return TokenResponse{}, fmt.Errorf("%w: %v", ErrTokenType, t)
	}
	if len(b) != t.responseSize() {
		return TokenResponse{}, fmt.Errorf("%w: token response of %d bytes for %v: want %d", ErrSize, len(b), t, t.responseSize())
	}
	if t == TypeVOPRF {
		return TokenResponse{TokenType: t, EvaluateMsg: b[:voprfNe:voprfNe], EvaluateProof: b[voprfNe:len(b):len(b)]}, nil
	}
	return TokenResponse{TokenType: t, BlindSig: b[:len(b):len(b)]}, nil
}

// Token is a finalized token (RFC 9577 §2.2):
//
//	struct {
//	    uint16_t token_type;
//	    uint8_t nonce[32];
//	    uint8_t challenge_digest[32];
//	    uint8_t token_key_id[32];
//	    uint8_t authenticator[Nid];
//	} Token;
type Token struct {
	// TokenType is TypeVOPRF or TypeBlindRSA.
	TokenType TokenType
	// Nonce is the client's random nonce; with KeyID it names the token in
	// the double-spend ledger.
	Nonce [NonceSize]byte
	// ChallengeDigest is SHA-256 of the TokenChallenge the token answers.
	ChallengeDigest [DigestSize]byte
	// KeyID is the token_key_id of the issuer key.
	KeyID [KeyIDSize]byte
	// Authenticator is the VOPRF output (48 bytes, type 0x0001) or the RSA
	// signature (256 bytes, type 0x0002) over the authenticator input.
	Authenticator []byte
}

// authInputSize is the size of the token authenticator input.
const authInputSize = 2 + NonceSize + DigestSize + KeyIDSize

// AuthenticatorInput returns token_type ‖ nonce ‖ challenge_digest ‖
// token_key_id: the message the authenticator is computed over.
func (t *Token) AuthenticatorInput() []byte { return t.appendAuthInput(make([]byte, 0, authInputSize)) }

func (t *Token) appendAuthInput(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(t.TokenType))
	b = append(b, t.Nonce[:]...)
	b = append(b, t.ChallengeDigest[:]...)
	return append(b, t.KeyID[:]...)
}

// AppendBinary appends the wire form of t to b.
func (t *Token) AppendBinary(b []byte) ([]byte, error) {
	if !t.TokenType.Supported() {
		return b, fmt.Errorf("%w: %v", ErrTokenType, t.TokenType)
	}
	if len(t.Authenticator) != t.TokenType.authenticatorSize() {
		return b, fmt.Errorf("%w: authenticator of %d bytes for %v: want %d", ErrSize, len(t.Authenticator), t.TokenType, t.TokenType.authenticatorSize())
	}
	b = t.appendAuthInput(b)
	return append(b, t.Authenticator...), nil
}

// MarshalBinary returns the wire form of t.
func (t *Token) MarshalBinary() ([]byte, error) { return t.AppendBinary(nil) }

// ParseToken parses the wire form of a Token strictly: the result marshals
// back to exactly b. An unsupported type is ErrTokenType; a length that does
// not match the type is ErrSize.
func ParseToken(b []byte) (Token, error) {
	if len(b) < 2 {
		return Token{}, fmt.Errorf("%w: token of %d bytes", ErrSize, len(b))
	}
	var t Token
	t.TokenType = TokenType(binary.BigEndian.Uint16(b))
	if !t.TokenType.Supported() {
		return Token{}, fmt.Errorf("%w: %v", ErrTokenType, t.TokenType)
	}
	if want := authInputSize + t.TokenType.authenticatorSize(); len(b) != want {
		return Token{}, fmt.Errorf("%w: token of %d bytes for %v: want %d", ErrSize, len(b), t.TokenType, want)
	}
	copy(t.Nonce[:], b[2:])
	copy(t.ChallengeDigest[:], b[2+NonceSize:])
	copy(t.KeyID[:], b[2+NonceSize+DigestSize:])
	t.Authenticator = b[authInputSize:len(b):len(b)]
	return t, nil
}

// reader reads the length-prefixed fields of the TLS presentation language.
// A read past the end sets bad and returns zero values.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) u8() uint8 {
	if len(r.b) < 1 {
		r.bad = true
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 {
	if len(r.b) < 2 {
		r.bad = true
		r.b = nil
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) bytes(n int) []byte {
	if len(r.b) < n {
		r.bad = true
		r.b = nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// hexID returns the lowercase hex of a key id, for messages and logs.
func hexID(id [KeyIDSize]byte) string { return fmt.Sprintf("%x", id[:]) }

// formatType is the decimal number of a token type, as the directory and
// the config write it.
func formatType(t TokenType) string { return strconv.Itoa(int(t)) }
