package privacypass

import (
	"crypto/rsa"
	"fmt"
	"math/big"
	"time"

	"github.com/cloudflare/circl/group"
	"github.com/cloudflare/circl/oprf"

	"github.com/spentledger/spent/privacypass/blindsign"
)

// VerificationKey is what an origin needs to check the tokens of one issuer
// key, and the window in which it accepts them.
type VerificationKey struct {
	// TokenType is the key's token type.
	TokenType TokenType
	// ID is the key's token_key_id.
	ID [KeyIDSize]byte
	// TokenKey is the encoded public key, as in the directory.
	TokenKey []byte
	// NotBefore is the start of the key's epoch.
	NotBefore time.Time
	// End is the end of the key's epoch: no token is issued under it after
	// End (plus the clock skew allowance).
	End time.Time
	// Grace is how long after End its tokens are still accepted.
	Grace time.Duration

	rsaPub *rsa.PublicKey         // type 0x0002
	pss    *pssVerifier           // type 0x0002, the same key prepared
	voprf  *oprf.VerifiableServer // type 0x0001: the secret key, held by issuer and origins
}

// AcceptUntil is the key's last acceptance instant, End + Grace: its tokens
// are accepted strictly before it and refused from it on, and the ledger
// entry of a token spent under the key expires exactly then.
func (k *VerificationKey) AcceptUntil() time.Time { return k.End.Add(k.Grace) }

// Verify reports whether tok's authenticator is valid under k. It checks
// the cryptography only: the caller checks the type, the key id, the time
// window and the challenge.
func (k *VerificationKey) Verify(tok *Token) bool {
	if tok.TokenType != k.TokenType || tok.KeyID != k.ID {
		return false
	}
	var in [authInputSize]byte
	input := tok.appendAuthInput(in[:0])
	switch k.TokenType {
	case TypeBlindRSA:
		if k.pss == nil {
			return false
		}
		return k.pss.verify(input, tok.Authenticator)
	case TypeVOPRF:
		if k.voprf == nil {
			return false
		}
		return k.voprf.VerifyFinalize(input, tok.Authenticator)
	}
	return false
}

// issuerKey is a VerificationKey with its secret: what the issuer signs
// with.
type issuerKey struct {
	VerificationKey
	epoch  int64  // epoch index: NotBefore = epoch × epoch length
	secret []byte // PKCS #8 DER (0x0002) or the serialized scalar (0x0001), as stored

	signer *blindsign.Signer // type 0x0002
}

// newRSAKey builds the issuer key of type 0x0002 from a private key.
func newRSAKey(sk *rsa.PrivateKey) (*issuerKey, error) {
	tokenKey, err := MarshalPublicKey(&sk.PublicKey)
	if err != nil {
		return nil, err
	}
	signer, err := blindsign.New(sk)
	if err != nil {
		return nil, err
	}
	pss, err := newPSSVerifier(&sk.PublicKey)
	if err != nil {
		return nil, err
	}
	k := &issuerKey{signer: signer}
	k.pss = pss
	k.TokenType = TypeBlindRSA
	k.TokenKey = tokenKey
	k.ID = KeyID(tokenKey)
	k.rsaPub = &sk.PublicKey
	return k, nil
}

// newVOPRFKey builds the issuer key of type 0x0001 from a private key.
func newVOPRFKey(sk *oprf.PrivateKey) (*issuerKey, error) {
	tokenKey, err := sk.Public().MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("privacypass: voprf public key: %w", err)
	}
	srv := oprf.NewVerifiableServer(oprf.SuiteP384, sk)
	k := &issuerKey{}
	k.TokenType = TypeVOPRF
	k.TokenKey = tokenKey
	k.ID = KeyID(tokenKey)
	k.voprf = &srv
	return k, nil
}

// prepared is a token request that passed the checks an issuer makes before
// it counts the request against a quota.
type prepared struct {
	key     *issuerKey
	blinded []byte        // type 0x0002
	element group.Element // type 0x0001
}

// prepare checks the blinded message of req against k: below the modulus
// for type 0x0002, a valid compressed point for type 0x0001. A failure is
// ErrMalformed.
func (k *issuerKey) prepare(req *TokenRequest) (prepared, error) {
	p := prepared{key: k}
	switch k.TokenType {
	case TypeBlindRSA:
		if k.rsaPub.N.Cmp(new(big.Int).SetBytes(req.BlindedMsg)) <= 0 {
			return p, fmt.Errorf("%w: blinded message is not less than the modulus", ErrMalformed)
		}
		p.blinded = req.BlindedMsg
	case TypeVOPRF:
		e, err := parseElement(req.BlindedMsg)
		if err != nil {
			return p, err
		}
		p.element = e
	default:
		return p, fmt.Errorf("%w: %v", ErrTokenType, k.TokenType)
	}
	return p, nil
}

// issue computes the token response of a prepared request.
func (p *prepared) issue() (TokenResponse, error) {
	k := p.key
	switch k.TokenType {
	case TypeBlindRSA:
		sig, err := k.signer.BlindSign(p.blinded)
		if err != nil {
			return TokenResponse{}, fmt.Errorf("privacypass: blind sign: %w", err)
		}
		return TokenResponse{TokenType: TypeBlindRSA, BlindSig: sig}, nil
	case TypeVOPRF:
		ev, err := k.voprf.Evaluate(&oprf.EvaluationRequest{Elements: []oprf.Blinded{p.element}})
		if err != nil {
			return TokenResponse{}, fmt.Errorf("privacypass: voprf evaluate: %w", err)
		}
		if len(ev.Elements) != 1 || ev.Proof == nil {
			return TokenResponse{}, fmt.Errorf("privacypass: voprf evaluate: %d elements", len(ev.Elements))
		}
		el, err := ev.Elements[0].MarshalBinaryCompress()
		if err != nil {
			return TokenResponse{}, fmt.Errorf("privacypass: voprf element: %w", err)
		}
		proof, err := ev.Proof.MarshalBinary()
		if err != nil {
			return TokenResponse{}, fmt.Errorf("privacypass: voprf proof: %w", err)
		}
		return TokenResponse{TokenType: TypeVOPRF, EvaluateMsg: el, EvaluateProof: proof}, nil
	}
	return TokenResponse{}, fmt.Errorf("%w: %v", ErrTokenType, k.TokenType)
}

// parseElement parses a compressed P-384 point strictly (49 bytes, prefix
// 2 or 3, on the curve, not the identity).
func parseElement(b []byte) (group.Element, error) {
	if len(b) != voprfNe || b[0] != 2 && b[0] != 3 {
		return nil, fmt.Errorf("%w: want a %d-byte compressed P-384 point", ErrMalformed, voprfNe)
	}
	e := group.P384.NewElement()
	if err := e.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%w: P-384 point: %w", ErrMalformed, err)
	}
	if e.IsIdentity() {
		return nil, fmt.Errorf("%w: P-384 point is the identity", ErrMalformed)
	}
	return e, nil
}
