package privacypass_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/spentledger/spent/privacypass"
)

// vectorField adds every value of field in the vector files to the corpus.
func seedVectors(f *testing.F, field string, files ...string) {
	f.Helper()
	for _, name := range files {
		for _, v := range hexVectors(f, name) {
			if s, ok := v[field]; ok {
				f.Add(unhex(f, s))
			}
		}
	}
}

var issuanceFiles = []string{"rfc9578-type1-issuance.json", "rfc9578-type2-issuance.json"}

func FuzzTokenChallenge(f *testing.F) {
	seedVectors(f, "token_challenge", issuanceFiles...)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := privacypass.ParseTokenChallenge(b)
		if err != nil {
			return
		}
		again, err := c.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("round trip of %x: got %x, %v", b, again, err)
		}
	})
}

func FuzzTokenRequest(f *testing.F) {
	seedVectors(f, "token_request", issuanceFiles...)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := privacypass.ParseTokenRequest(b)
		if err != nil {
			return
		}
		again, err := r.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("round trip of %x: got %x, %v", b, again, err)
		}
	})
}

// FuzzTokenResponse takes the token type in the first two bytes.
func FuzzTokenResponse(f *testing.F) {
	for i, name := range issuanceFiles {
		for _, v := range hexVectors(f, name) {
			f.Add(append([]byte{0, byte(i + 1)}, unhex(f, v["token_response"])...))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2 {
			return
		}
		typ := privacypass.TokenType(binary.BigEndian.Uint16(b))
		r, err := privacypass.ParseTokenResponse(typ, b[2:])
		if err != nil {
			return
		}
		again, err := r.MarshalBinary()
		if err != nil || !bytes.Equal(again, b[2:]) {
			t.Fatalf("round trip of %x: got %x, %v", b[2:], again, err)
		}
	})
}

func FuzzToken(f *testing.F) {
	seedVectors(f, "token", issuanceFiles...)
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := privacypass.ParseToken(b)
		if err != nil {
			return
		}
		again, err := tok.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("round trip of %x: got %x, %v", b, again, err)
		}
	})
}

func FuzzPublicKey(f *testing.F) {
	seedVectors(f, "pkS", "rfc9578-type2-issuance.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		pk, err := privacypass.ParsePublicKey(b)
		if err != nil {
			return
		}
		again, err := privacypass.MarshalPublicKey(pk)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("round trip of %x: got %x, %v", b, again, err)
		}
	})
}

// FuzzWWWAuthenticate parses header values; a PrivateToken challenge that
// parses must write back to a value that parses to the same challenge.
func FuzzWWWAuthenticate(f *testing.F) {
	for _, name := range issuanceFiles {
		for _, v := range hexVectors(f, name) {
			c := privacypass.Challenge{Raw: unhex(f, v["token_challenge"]), TokenKey: unhex(f, v["pkS"]), MaxAge: 60}
			f.Add(c.String())
			f.Add(`Basic realm="x", ` + c.String() + `, Bearer`)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		chs, err := privacypass.ParseChallenges(http.Header{"Www-Authenticate": {s}})
		if err != nil {
			return
		}
		for _, c := range chs {
			again, err := privacypass.ParseChallenges(http.Header{"Www-Authenticate": {c.String()}})
			if err != nil || len(again) != 1 || !bytes.Equal(again[0].Raw, c.Raw) ||
				!bytes.Equal(again[0].TokenKey, c.TokenKey) || again[0].MaxAge != c.MaxAge {
				t.Fatalf("%q: challenge %q does not parse back: %v", s, c.String(), err)
			}
		}
	})
}

func FuzzAuthorization(f *testing.F) {
	for _, name := range issuanceFiles {
		for _, v := range hexVectors(f, name) {
			f.Add(privacypass.AuthorizationValue(unhex(f, v["token"])))
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, ok, err := privacypass.ParseAuthorization(http.Header{"Authorization": {s}})
		if err != nil || !ok {
			return
		}
		again, ok, err := privacypass.ParseAuthorization(http.Header{"Authorization": {privacypass.AuthorizationValue(tok)}})
		if err != nil || !ok || !bytes.Equal(again, tok) {
			t.Fatalf("%q: token %x does not parse back: %v", s, tok, err)
		}
	})
}

// FuzzDirectory parses directories; one that parses writes back to JSON
// that parses to the same directory.
func FuzzDirectory(f *testing.F) {
	for _, name := range issuanceFiles {
		for _, v := range hexVectors(f, name) {
			d := privacypass.Directory{IssuerRequestURI: "/token-request", TokenKeys: []privacypass.DirectoryKey{
				{TokenType: privacypass.TokenType(unhex(f, v["token_request"])[1]), TokenKey: unhex(f, v["pkS"])}}}
			b, _ := d.MarshalJSON()
			f.Add(b)
		}
	}
	f.Add([]byte(`{"issuer-request-uri":"https://i.example/r","token-keys":[{"token-type":2,"token-key":"AAAA","not-before":1},{"token-type":9,"token-key":"","x":[]}],"y":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := privacypass.ParseDirectory(b)
		if err != nil {
			return
		}
		out, err := d.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		d2, err := privacypass.ParseDirectory(out)
		if err != nil {
			t.Fatalf("%s does not parse back: %v", out, err)
		}
		out2, _ := d2.MarshalJSON()
		if !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
		_ = d.Check(0)
	})
}

// FuzzKeyFileHeader parses key-file headers: one that parses re-encodes to
// exactly the bytes it was read from. Seeded with the header of a real key
// file.
func FuzzKeyFileHeader(f *testing.F) {
	dir := f.TempDir()
	cfg := keyringConfig(dir, &clock{t: t0}, keyGen())
	cfg.TokenTypes = []privacypass.TokenType{privacypass.TypeVOPRF}
	k, err := privacypass.OpenKeyring(context.Background(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	k.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*.key"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, rest, err := privacypass.ParseKeyFileHeader(b)
		if err != nil {
			return
		}
		if !bytes.Equal(append(h, rest...), b) {
			t.Fatalf("header of %x re-encodes to %x", b, h)
		}
	})
}
