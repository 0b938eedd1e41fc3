package privacypass_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/privacypass"
)

// seedVectors adds every value of field in the vector files to the corpus.
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
// parses has a max-age of -1 (absent) or a 31-bit number of seconds, a Raw
// that is exactly its TokenChallenge's wire form, and writes back to a
// value that parses to the same challenge and writes back to itself.
func FuzzWWWAuthenticate(f *testing.F) {
	for _, name := range issuanceFiles {
		for _, v := range hexVectors(f, name) {
			c := privacypass.Challenge{Raw: unhex(f, v["token_challenge"]), TokenKey: unhex(f, v["pkS"]), MaxAge: 60}
			f.Add(c.String())
			f.Add(`Basic realm="x", ` + c.String() + `, Bearer`)
			c.MaxAge = 1<<31 - 1
			f.Add(c.String())
			f.Add(strings.Replace(c.String(), "2147483647", "2147483648", 1))
			f.Add(strings.Replace(c.String(), "2147483647", "-1", 1))
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		chs, err := privacypass.ParseChallenges(http.Header{"Www-Authenticate": {s}})
		if err != nil {
			return
		}
		for _, c := range chs {
			if c.MaxAge < -1 || c.MaxAge > 1<<31-1 {
				t.Fatalf("%q: max-age %d: want -1 (absent) or 0 to 2^31-1 seconds", s, c.MaxAge)
			}
			if raw, err := c.TokenChallenge.MarshalBinary(); err != nil || !bytes.Equal(raw, c.Raw) {
				t.Fatalf("%q: challenge %x re-marshals to %x, %v", s, c.Raw, raw, err)
			}
			out := c.String()
			again, err := privacypass.ParseChallenges(http.Header{"Www-Authenticate": {out}})
			if err != nil || len(again) != 1 || !bytes.Equal(again[0].Raw, c.Raw) ||
				!bytes.Equal(again[0].TokenKey, c.TokenKey) || again[0].MaxAge != c.MaxAge {
				t.Fatalf("%q: challenge %q does not parse back: %v", s, out, err)
			}
			if out2 := again[0].String(); out2 != out {
				t.Fatalf("%q: written as %q, then as %q", s, out, out2)
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
		for i, k := range d.TokenKeys {
			if k.NotBefore.IsZero() {
				continue
			}
			// A not-before is a whole second from 1970 that Check can
			// count in nanoseconds without wrapping.
			sec := k.NotBefore.Unix()
			if sec < 0 || sec > math.MaxInt64/int64(time.Second) || k.NotBefore.UnixNano() != sec*int64(time.Second) ||
				k.NotBefore.Location() != time.UTC {
				t.Fatalf("%s: token-keys[%d]: not-before %v (%d s, %d ns)", b, i, k.NotBefore, sec, k.NotBefore.UnixNano())
			}
		}
		_ = d.Check(0)
		_ = d.Check(24 * time.Hour)
	})
}

// FuzzConfigDurations reads the four durations of the [privacypass]
// configuration as Go duration strings, and checks that each is read as
// time.ParseDuration reads it, and that a configuration Validate accepts
// has a key schedule within its documented bounds, a namespace retention
// that covers a key's whole acceptance window without wrapping, and
// challenges whose max-age (whole seconds of challenge_ttl, as Origin
// writes it) the package's own header parser reads back.
func FuzzConfigDurations(f *testing.F) {
	for _, s := range [][4]string{
		{"24h", "6h", "5m", "10m"},
		{"24h", "6h", "5m", "2562047h47m16.854775807s"},
		{"1m", "0s", "30s", "1ns"},
		{"8784h", "35136h", "4392h", "596523h14m7s"},
		{"8784h0m0.000000001s", "-1ns", "4392h0m0.000000001s", "0s"},
		{"2562047h47m16.854775807s", "2562047h47m16.854775807s", "-2562047h47m16.854775808s", "2562047h47m16.854775807s"},
		{"9223372036854775808ns", "1e3s", ".5h", "+10m"},
		{"", "24", "1h\x00", "10 m"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	keys := [4]string{"epoch", "grace", "skew", "challenge_ttl"}
	base := func() map[string]any {
		return map[string]any{"issuer_name": "issuer.example", "attester_tokens": []any{"0123456789abcdef"}}
	}
	f.Fuzz(func(t *testing.T, epoch, grace, skew, ttl string) {
		vals := [4]string{epoch, grace, skew, ttl}
		all := base()
		parsed := true
		for i, k := range keys {
			m := base()
			m[k], all[k] = vals[i], vals[i]
			var c privacypass.Config
			err := c.UnmarshalTOML(m)
			want, werr := time.ParseDuration(vals[i])
			parsed = parsed && werr == nil
			got := [4]time.Duration{c.Epoch, c.Grace, c.Skew, c.ChallengeTTL}[i]
			if (err == nil) != (werr == nil) || err == nil && got != want {
				t.Fatalf("%s = %q: read as %v, %v; time.ParseDuration reads %v, %v", k, vals[i], got, err, want, werr)
			}
		}
		var c privacypass.Config
		if err := c.UnmarshalTOML(all); (err == nil) != parsed {
			t.Fatalf("%q: got %v", vals, err)
		}
		if !parsed || c.Validate() != nil {
			return
		}
		switch {
		case c.Epoch < time.Minute || c.Epoch > 366*24*time.Hour:
			t.Fatalf("%q: epoch %v accepted: want 1m to 366 days", vals, c.Epoch)
		case c.Grace < 0 || c.Grace > 4*c.Epoch:
			t.Fatalf("%q: grace %v accepted: want 0 to 4 epochs", vals, c.Grace)
		case c.Skew < 0 || c.Skew > c.Epoch/2:
			t.Fatalf("%q: skew %v accepted: want 0 to half an epoch", vals, c.Skew)
		case c.ChallengeTTL <= 0:
			t.Fatalf("%q: challenge_ttl %v accepted: want it positive", vals, c.ChallengeTTL)
		}
		p := privacypass.NamespacePolicy(c.Epoch, c.Grace, c.Skew)
		if p.Retention != c.Epoch+c.Grace+c.Skew || p.Retention < c.Epoch+c.Grace || p.Validate() != nil {
			t.Fatalf("%q: namespace policy %+v: want a valid retention of epoch + grace + skew", vals, p)
		}
		ch := privacypass.Challenge{TokenChallenge: privacypass.TokenChallenge{TokenType: privacypass.TypeBlindRSA, IssuerName: c.IssuerName},
			MaxAge: int(c.ChallengeTTL / time.Second)}
		again, err := privacypass.ParseChallenges(http.Header{"Www-Authenticate": {ch.String()}})
		if err != nil || len(again) != 1 || again[0].MaxAge != ch.MaxAge {
			t.Fatalf("%q: challenge_ttl %v accepted, but its challenge %q does not parse back: %v", vals, c.ChallengeTTL, ch.String(), err)
		}
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
