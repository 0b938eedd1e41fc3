package ecash

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/spentledger/spent/privacypass"
)

// Wire formats. Every request is a strict binary message: a parser accepts
// exactly the bytes its marshaller writes, so the SHA-256 of the body (the
// request's canonical digest) names one request.
//
//	Output        = uint64 denomination ‖ token_key_id[32] ‖ blinded_msg[256]
//	SpendRequest  = 0x01 ‖ uint16 len ‖ token ‖ uint64 return ‖ uint16 n ‖ Output × n
//	IssueRequest  = 0x02 ‖ uint16 len ‖ challenge ‖ uint64 solution ‖ uint16 n ‖ Output × n
//	Response      = 0x81 ‖ uint64 value ‖ uint64 charge ‖ uint16 n ‖ blind_sig[256] × n
//	Challenge     = id[16] ‖ int64 expires (Unix s) ‖ uint8 difficulty ‖ mac[16]
//
// Integers are big-endian.
const (
	// BlindedSize is the size of a blinded message and a blind signature
	// (RSA-2048).
	BlindedSize = 256
	// OutputSize is the size of one Output.
	OutputSize = 8 + privacypass.KeyIDSize + BlindedSize
	// MaxOutputs is the most outputs one request may ask for.
	MaxOutputs = 64
	// ChallengeIDSize is the size of a challenge id.
	ChallengeIDSize = 16
	// ChallengeSize is the size of a challenge's wire form.
	ChallengeSize = ChallengeIDSize + 8 + 1 + 16
)

const (
	tagSpend    = 0x01
	tagIssue    = 0x02
	tagResponse = 0x81
)

// ErrMalformed is wrapped by every parse error: the bytes are not a message
// of the expected format.
var ErrMalformed = errors.New("ecash: malformed")

// Output asks for one token of a denomination: a blinded message to be signed
// with the key ID names, which must be that denomination's current key.
type Output struct {
	Denomination uint64
	KeyID        [privacypass.KeyIDSize]byte
	Blinded      []byte
}

// Spend is a parsed spend request.
type Spend struct {
	// Token is the input token's wire form (privacypass.Token, type 0x0002).
	Token []byte
	// Return is the value the client asks back as change: the sum of the
	// outputs' denominations.
	Return uint64
	// Outputs are the change tokens asked for; none when the whole value
	// is paid.
	Outputs []Output
}

// Issue is a parsed issuance request.
type Issue struct {
	// Challenge is the challenge's wire form, as the issuer handed it out.
	Challenge []byte
	// Solution is the proof-of-work nonce.
	Solution uint64
	// Outputs are the tokens asked for.
	Outputs []Output
}

// Response is the issuer's answer to a spend or an issuance: the stored
// bytes a replay returns.
type Response struct {
	// Value is the input's value (spend) or the value issued (issuance).
	Value uint64
	// Charge is what the issuer kept: Value minus the outputs' sum.
	Charge uint64
	// BlindSigs are the blind signatures, one per output, in order.
	BlindSigs [][]byte
}

// Digest returns the canonical digest of a request: SHA-256 of its exact
// bytes.
func Digest(body []byte) []byte {
	d := sha256.Sum256(body)
	return d[:]
}

func appendOutputs(b []byte, outs []Output) ([]byte, error) {
	if len(outs) > MaxOutputs {
		return nil, fmt.Errorf("%w: %d outputs: at most %d", ErrMalformed, len(outs), MaxOutputs)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(outs)))
	for _, o := range outs {
		if len(o.Blinded) != BlindedSize {
			return nil, fmt.Errorf("%w: blinded message of %d bytes", ErrMalformed, len(o.Blinded))
		}
		b = binary.BigEndian.AppendUint64(b, o.Denomination)
		b = append(b, o.KeyID[:]...)
		b = append(b, o.Blinded...)
	}
	return b, nil
}

// MarshalBinary returns the wire form of s.
func (s *Spend) MarshalBinary() ([]byte, error) {
	if len(s.Token) == 0 || len(s.Token) > 0xffff {
		return nil, fmt.Errorf("%w: token of %d bytes", ErrMalformed, len(s.Token))
	}
	b := []byte{tagSpend}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s.Token)))
	b = append(b, s.Token...)
	b = binary.BigEndian.AppendUint64(b, s.Return)
	return appendOutputs(b, s.Outputs)
}

// MarshalBinary returns the wire form of r.
func (r *Issue) MarshalBinary() ([]byte, error) {
	if len(r.Challenge) != ChallengeSize {
		return nil, fmt.Errorf("%w: challenge of %d bytes", ErrMalformed, len(r.Challenge))
	}
	b := []byte{tagIssue}
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Challenge)))
	b = append(b, r.Challenge...)
	b = binary.BigEndian.AppendUint64(b, r.Solution)
	return appendOutputs(b, r.Outputs)
}

// MarshalBinary returns the wire form of r.
func (r *Response) MarshalBinary() ([]byte, error) {
	b := []byte{tagResponse}
	b = binary.BigEndian.AppendUint64(b, r.Value)
	b = binary.BigEndian.AppendUint64(b, r.Charge)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.BlindSigs)))
	for _, s := range r.BlindSigs {
		if len(s) != BlindedSize {
			return nil, fmt.Errorf("%w: blind signature of %d bytes", ErrMalformed, len(s))
		}
		b = append(b, s...)
	}
	return b, nil
}

// reader consumes a message strictly.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = fmt.Errorf("%w: truncated", ErrMalformed)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() int {
	if b := r.take(2); b != nil {
		return int(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	return r.err
}

func (r *reader) outputs() []Output {
	n := r.u16()
	if r.err == nil && n > MaxOutputs {
		r.err = fmt.Errorf("%w: %d outputs: at most %d", ErrMalformed, n, MaxOutputs)
	}
	if r.err != nil {
		return nil
	}
	outs := make([]Output, n)
	for i := range outs {
		outs[i].Denomination = r.u64()
		copy(outs[i].KeyID[:], r.take(privacypass.KeyIDSize))
		outs[i].Blinded = r.take(BlindedSize)
	}
	return outs
}

// ParseSpend parses a spend request strictly: the result marshals back to
// exactly b.
func ParseSpend(b []byte) (Spend, error) {
	r := reader{b: b}
	var s Spend
	if r.u8() != tagSpend && r.err == nil {
		return s, fmt.Errorf("%w: not a spend request", ErrMalformed)
	}
	s.Token = r.take(r.u16())
	if r.err == nil && len(s.Token) == 0 {
		r.err = fmt.Errorf("%w: empty token", ErrMalformed)
	}
	s.Return = r.u64()
	s.Outputs = r.outputs()
	return s, r.end()
}

// ParseIssue parses an issuance request strictly: the result marshals back to
// exactly b.
func ParseIssue(b []byte) (Issue, error) {
	r := reader{b: b}
	var s Issue
	if r.u8() != tagIssue && r.err == nil {
		return s, fmt.Errorf("%w: not an issuance request", ErrMalformed)
	}
	n := r.u16()
	if r.err == nil && n != ChallengeSize {
		r.err = fmt.Errorf("%w: challenge of %d bytes", ErrMalformed, n)
	}
	s.Challenge = r.take(n)
	s.Solution = r.u64()
	s.Outputs = r.outputs()
	return s, r.end()
}

// ParseResponse parses a response strictly: the result marshals back to
// exactly b.
func ParseResponse(b []byte) (Response, error) {
	r := reader{b: b}
	var s Response
	if r.u8() != tagResponse && r.err == nil {
		return s, fmt.Errorf("%w: not a response", ErrMalformed)
	}
	s.Value = r.u64()
	s.Charge = r.u64()
	n := r.u16()
	if r.err == nil && n > MaxOutputs {
		r.err = fmt.Errorf("%w: %d signatures", ErrMalformed, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		s.BlindSigs = append(s.BlindSigs, r.take(BlindedSize))
	}
	return s, r.end()
}
