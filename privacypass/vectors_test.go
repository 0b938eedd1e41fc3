package privacypass_test

import (
	"bytes"
	"crypto/rsa"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"

	circl "github.com/cloudflare/circl/blindsign/blindrsa"

	"github.com/spentledger/spent/privacypass"
)

// TestRFC9577TokenStructure checks the TokenChallenge encoding and the
// token authenticator input against RFC 9577's vectors.
func TestRFC9577TokenStructure(t *testing.T) {
	for i, v := range hexVectors(t, "rfc9577-token-structure.json") {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			typ := privacypass.TokenType(binary.BigEndian.Uint16(unhex(t, v["token_type"])))
			c := privacypass.TokenChallenge{
				TokenType:         typ,
				IssuerName:        string(unhex(t, v["issuer_name"])),
				RedemptionContext: unhex(t, v["redemption_context"]),
				OriginInfo:        string(unhex(t, v["origin_info"])),
			}
			raw, err := c.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			back, err := privacypass.ParseTokenChallenge(raw)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := back.MarshalBinary()
			if !bytes.Equal(again, raw) {
				t.Fatalf("challenge round trip: got %x, want %x", again, raw)
			}
			tok := privacypass.Token{TokenType: typ, ChallengeDigest: privacypass.ChallengeDigest(raw)}
			copy(tok.Nonce[:], unhex(t, v["nonce"]))
			copy(tok.KeyID[:], unhex(t, v["token_key_id"]))
			if got, want := tok.AuthenticatorInput(), unhex(t, v["token_authenticator_input"]); !bytes.Equal(got, want) {
				t.Fatalf("token_authenticator_input:\ngot  %x\nwant %x", got, want)
			}
		})
	}
}

// roundTrip checks that parse(b) marshals back to exactly b.
func roundTrip[T any](t *testing.T, what string, b []byte, parse func([]byte) (T, error), marshal func(*T) ([]byte, error)) T {
	t.Helper()
	v, err := parse(b)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	again, err := marshal(&v)
	if err != nil {
		t.Fatalf("%s: marshal: %v", what, err)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("%s round trip:\ngot  %x\nwant %x", what, again, b)
	}
	return v
}

func pkcs8(t *testing.T, pemHex string) []byte {
	t.Helper()
	blk, _ := pem.Decode(unhex(t, pemHex))
	if blk == nil || blk.Type != "PRIVATE KEY" {
		t.Fatal("skS is not a PEM PKCS #8 private key")
	}
	return blk.Bytes
}

// TestRFC9578Type2 replays RFC 9578 A.2 (Blind RSA): the client's request
// from its nonce, salt and blind, the issuer's response, the finalized
// token, its verification, and the exact round trip of every message.
func TestRFC9578Type2(t *testing.T) {
	for i, v := range hexVectors(t, "rfc9578-type2-issuance.json") {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			pkS := unhex(t, v["pkS"])
			pk, err := privacypass.ParsePublicKey(pkS)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := privacypass.MarshalPublicKey(pk); !bytes.Equal(again, pkS) {
				t.Fatalf("pkS round trip: got %x", again)
			}
			challenge := unhex(t, v["token_challenge"])
			roundTrip(t, "token_challenge", challenge, privacypass.ParseTokenChallenge, (*privacypass.TokenChallenge).MarshalBinary)

			// The client reads the nonce, then the salt, then r (as wide
			// as the modulus) from its random source.
			r := new(big.Int).SetBytes(unhex(t, v["blind"])).FillBytes(make([]byte, 256))
			rnd := bytes.NewReader(bytes.Join([][]byte{unhex(t, v["nonce"]), unhex(t, v["salt"]), r}, nil))
			p, err := privacypass.NewPendingToken(challenge, privacypass.TypeBlindRSA, pkS, rnd)
			if err != nil {
				t.Fatal(err)
			}
			req, err := p.Request.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, v["token_request"]); !bytes.Equal(req, want) {
				t.Fatalf("token_request:\ngot  %x\nwant %x", req, want)
			}
			roundTrip(t, "token_request", req, privacypass.ParseTokenRequest, (*privacypass.TokenRequest).MarshalBinary)

			resp, tokenKey, err := privacypass.IssueWithSecret(privacypass.TypeBlindRSA, pkcs8(t, v["skS"]), req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tokenKey, pkS) {
				t.Fatalf("token-key of skS: got %x, want pkS", tokenKey)
			}
			if want := unhex(t, v["token_response"]); !bytes.Equal(resp, want) {
				t.Fatalf("token_response:\ngot  %x\nwant %x", resp, want)
			}
			roundTrip(t, "token_response", resp, func(b []byte) (privacypass.TokenResponse, error) {
				return privacypass.ParseTokenResponse(privacypass.TypeBlindRSA, b)
			}, (*privacypass.TokenResponse).MarshalBinary)

			tok, err := p.Finalize(resp)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := tok.MarshalBinary()
			want := unhex(t, v["token"])
			if !bytes.Equal(got, want) {
				t.Fatalf("token:\ngot  %x\nwant %x", got, want)
			}
			roundTrip(t, "token", want, privacypass.ParseToken, (*privacypass.Token).MarshalBinary)
			if ok, err := privacypass.VerifyWithSecret(privacypass.TypeBlindRSA, pkcs8(t, v["skS"]), want); err != nil || !ok {
				t.Fatalf("token does not verify: %v", err)
			}
			bad := bytes.Clone(want)
			bad[len(bad)-1] ^= 1
			if ok, _ := privacypass.VerifyWithSecret(privacypass.TypeBlindRSA, pkcs8(t, v["skS"]), bad); ok {
				t.Fatal("a token with a flipped bit verifies")
			}
			if id := privacypass.KeyID(pkS); req[2] != privacypass.TruncatedKeyID(id) || !bytes.Equal(want[66:98], id[:]) {
				t.Fatalf("key id: request has %d, token has %x; want %x", req[2], want[66:98], id)
			}
		})
	}
}

// TestRFC9578Type1 replays RFC 9578 A.1 (VOPRF P-384). The DLEQ proof is
// randomized, so the issuer's fresh response matches the vector in its
// evaluated element and finalizes to the same token; the vector's own
// response finalizes to the vector's token.
func TestRFC9578Type1(t *testing.T) {
	for i, v := range hexVectors(t, "rfc9578-type1-issuance.json") {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			pkS, skS := unhex(t, v["pkS"]), unhex(t, v["skS"])
			challenge := unhex(t, v["token_challenge"])
			roundTrip(t, "token_challenge", challenge, privacypass.ParseTokenChallenge, (*privacypass.TokenChallenge).MarshalBinary)
			var nonce [privacypass.NonceSize]byte
			copy(nonce[:], unhex(t, v["nonce"]))

			newPending := func() *privacypass.PendingToken {
				p, err := privacypass.NewPendingVOPRFWithBlind(challenge, pkS, nonce, unhex(t, v["blind"]))
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := newPending()
			req, err := p.Request.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, v["token_request"]); !bytes.Equal(req, want) {
				t.Fatalf("token_request:\ngot  %x\nwant %x", req, want)
			}
			roundTrip(t, "token_request", req, privacypass.ParseTokenRequest, (*privacypass.TokenRequest).MarshalBinary)

			resp, tokenKey, err := privacypass.IssueWithSecret(privacypass.TypeVOPRF, skS, req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tokenKey, pkS) {
				t.Fatalf("public key of skS: got %x, want %x", tokenKey, pkS)
			}
			vresp := unhex(t, v["token_response"])
			if !bytes.Equal(resp[:49], vresp[:49]) {
				t.Fatalf("evaluated element:\ngot  %x\nwant %x", resp[:49], vresp[:49])
			}
			parse1 := func(b []byte) (privacypass.TokenResponse, error) {
				return privacypass.ParseTokenResponse(privacypass.TypeVOPRF, b)
			}
			roundTrip(t, "token_response", vresp, parse1, (*privacypass.TokenResponse).MarshalBinary)
			want := unhex(t, v["token"])
			for name, r := range map[string][]byte{"vector response": vresp, "fresh response": resp} {
				tok, err := newPending().Finalize(r)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got, _ := tok.MarshalBinary(); !bytes.Equal(got, want) {
					t.Fatalf("%s: token:\ngot  %x\nwant %x", name, got, want)
				}
			}
			roundTrip(t, "token", want, privacypass.ParseToken, (*privacypass.Token).MarshalBinary)
			if ok, err := privacypass.VerifyWithSecret(privacypass.TypeVOPRF, skS, want); err != nil || !ok {
				t.Fatalf("token does not verify: %v", err)
			}
			bad := bytes.Clone(want)
			bad[len(bad)-1] ^= 1
			if ok, _ := privacypass.VerifyWithSecret(privacypass.TypeVOPRF, skS, bad); ok {
				t.Fatal("a token with a flipped bit verifies")
			}
			// A proof that does not match is refused by the client.
			badProof := bytes.Clone(vresp)
			badProof[len(badProof)-1] ^= 1
			if _, err := newPending().Finalize(badProof); err == nil {
				t.Fatal("Finalize accepted a response with a corrupt proof")
			}
		})
	}
}

// TestRFC9474 replays RFC 9474's four vectors through the client that type
// 0x0002 uses (circl's blindrsa with the vector's randomness) and the
// issuer's signer (package blindsign, through a type 0x0002 key where the
// variant allows).
func TestRFC9474(t *testing.T) {
	var vs []map[string]string
	// The one copy of the file is package blindsign's.
	loadJSON(t, "../blindsign/testdata/rfc9474.json", &vs)
	if len(vs) != 4 {
		t.Fatalf("rfc9474.json: %d vectors, want 4", len(vs))
	}
	num := func(s string) *big.Int {
		n, ok := new(big.Int).SetString(strings.TrimPrefix(s, "0x"), 16)
		if !ok {
			t.Fatalf("bad integer %q", s)
		}
		return n
	}
	variants := map[string]circl.Variant{
		"RSABSSA-SHA384-PSS-Randomized":        circl.SHA384PSSRandomized,
		"RSABSSA-SHA384-PSSZERO-Randomized":    circl.SHA384PSSZeroRandomized,
		"RSABSSA-SHA384-PSS-Deterministic":     circl.SHA384PSSDeterministic,
		"RSABSSA-SHA384-PSSZERO-Deterministic": circl.SHA384PSSZeroDeterministic,
	}
	for _, v := range vs {
		t.Run(v["name"], func(t *testing.T) {
			variant, ok := variants[v["name"]]
			if !ok {
				t.Fatalf("unknown variant %q", v["name"])
			}
			n := num(v["n"])
			sk := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: n, E: int(num(v["e"]).Int64())}, D: num(v["d"]),
				Primes: []*big.Int{num(v["p"]), num(v["q"])}}
			sk.Precompute()
			c, err := circl.NewClient(variant, &sk.PublicKey)
			if err != nil {
				t.Fatal(err)
			}
			r := new(big.Int).ModInverse(num(v["inv"]), n).FillBytes(make([]byte, (n.BitLen()+7)/8))
			rnd := bytes.NewReader(bytes.Join([][]byte{unhex(t, v["msg_prefix"]), unhex(t, v["salt"]), r}, nil))
			input, err := c.Prepare(rnd, unhex(t, v["msg"]))
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, v["input_msg"]); !bytes.Equal(input, want) {
				t.Fatalf("input_msg: got %x, want %x", input, want)
			}
			blinded, state, err := c.Blind(rnd, input)
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, v["blinded_msg"]); !bytes.Equal(blinded, want) {
				t.Fatalf("blinded_msg:\ngot  %x\nwant %x", blinded, want)
			}
			blindSig, err := privacypass.BlindSignForTest(sk, blinded)
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, v["blind_sig"]); !bytes.Equal(blindSig, want) {
				t.Fatalf("blind_sig:\ngot  %x\nwant %x", blindSig, want)
			}
			sig, err := c.Finalize(state, blindSig)
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, v["sig"]); !bytes.Equal(sig, want) {
				t.Fatalf("sig:\ngot  %x\nwant %x", sig, want)
			}
		})
	}
}
