package jwtreplay_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"math/big"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/jwtreplay"
)

// The targets of this file send the NumericDate claims a client controls
// (exp, iat and nbf of an access token, iat of a DPoP proof) as arbitrary
// JSON numbers, in correctly signed tokens, and check the acceptance window
// Verify derives from them against the rules written on the options,
// computed exactly in big integers of nanoseconds: a token is accepted
// exactly when the rules accept it, never beyond MaxLifetime + Skew (or
// ProofAge + 2 × Skew) from now, and never at a time that wrapped.

// jsonNumber is the grammar of a JSON number.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// numericDate reads the JSON number text n as go-jose reads a NumericDate
// claim; ok is false when go-jose refuses it. What it reads must be the
// number, to the precision of a float64 and within a second.
func numericDate(t *testing.T, n string) (sec int64, ok bool) {
	t.Helper()
	var d jwt.NumericDate
	if err := json.Unmarshal([]byte(n), &d); err != nil {
		return 0, false
	}
	exact, _, err := big.ParseFloat(n, 10, 256, big.ToZero)
	if err != nil {
		t.Fatalf("%s: read as %d s, but it is beyond the exponents a float holds: %v", n, int64(d), err)
	}
	diff := new(big.Float).Sub(exact, new(big.Float).SetInt64(int64(d)))
	tolerance := new(big.Float).Mul(new(big.Float).Abs(exact), big.NewFloat(0x1p-52))
	if diff.Abs(diff).Cmp(tolerance.Add(tolerance, big.NewFloat(1))) >= 0 {
		t.Fatalf("%s: read as %d s", n, int64(d))
	}
	return int64(d), true
}

// ns returns sec seconds as a big integer of nanoseconds.
func ns(sec int64) *big.Int {
	return new(big.Int).Mul(big.NewInt(sec), big.NewInt(int64(time.Second)))
}

// instant returns t as a big integer of nanoseconds since 1970.
func instant(t time.Time) *big.Int {
	return new(big.Int).Add(ns(t.Unix()), big.NewInt(int64(t.Nanosecond())))
}

func add(a *big.Int, d time.Duration) *big.Int { return new(big.Int).Add(a, big.NewInt(int64(d))) }

// timeSeeds are the claim values both targets start from, relative to the
// clock's start: now, an hour either way, a day and a year ahead, and
// values that overflow a Duration, a time.Time or go-jose's bound.
func timeSeeds() []string {
	s := start.Unix()
	out := []string{""}
	for _, d := range []int64{0, 3600, -3600, 86400, 86401, 366 * 86400, -s} {
		out = append(out, strconv.FormatInt(s+d, 10))
	}
	return append(out, "1e10", "4611686018427387903", "4611686018427387904", "9223372036854775807",
		"-9223372036854775808", "1e400", "-0", strconv.FormatInt(s, 10)+".999999", "1.7723664e9")
}

// FuzzJTITimes verifies HS256 tokens whose exp, iat and nbf are fuzzed
// JSON numbers ("" leaves the claim out), under fuzzed Skew, MaxLifetime
// and lifetime mode, at a fuzzed clock.
func FuzzJTITimes(f *testing.F) {
	seeds := timeSeeds()
	for i, e := range seeds {
		f.Add(e, seeds[(i+3)%len(seeds)], seeds[(i+5)%len(seeds)], i%2 == 1, uint16(60), uint32(24*60), int64(0))
	}
	s := start.Unix()
	f.Add(strconv.FormatInt(s+3600, 10), strconv.FormatInt(s, 10), strconv.FormatInt(s, 10), false, uint16(60), uint32(24*60), int64(0))
	f.Add(strconv.FormatInt(s+3600, 10), strconv.FormatInt(s-60, 10), "", true, uint16(60), uint32(30), int64(0))
	f.Add(strconv.FormatInt(s+86400+60, 10), strconv.FormatInt(s, 10), "", false, uint16(60), uint32(24*60), int64(0))
	f.Add(strconv.FormatInt(s-60, 10), "", "", false, uint16(60), uint32(24*60), int64(1))
	f.Add(strconv.FormatInt(s+999999, 10), strconv.FormatInt(s-86400+1, 10), "", true, uint16(0), uint32(24*60), int64(-1))

	secret := bytes.Repeat([]byte("k"), 32)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		f.Fatal(err)
	}
	keys := jwtreplay.StaticKeys(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: secret, Algorithm: string(jose.HS256)}}})
	c := newClock(start)
	const namespace = "jwt-jti"
	// The namespace keeps records longer than any fuzzed MaxLifetime +
	// Skew, so that the ledger never hides what the JTI would accept.
	l, _ := newLedger(f, c, map[string]spent.Policy{namespace: {Mode: spent.ModeRefuse, Retention: 400 * 24 * time.Hour, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold}})
	var n atomic.Int64

	f.Fuzz(func(t *testing.T, exp, iat, nbf string, capMode bool, skewSec uint16, lifeMin uint32, offset int64) {
		o := jwtreplay.DefaultJTIOptions()
		o.Namespace, o.Issuers, o.Audience, o.Keys = namespace, []string{"https://issuer.example"}, []string{"api"}, keys
		o.Algorithms = []jose.SignatureAlgorithm{jose.HS256}
		o.Skew = time.Duration(skewSec%3600) * time.Second
		o.MaxLifetime = time.Duration(lifeMin%(366*24*60)) * time.Minute
		if capMode {
			o.Lifetime = jwtreplay.LifetimeCap
		}
		now := start.Add(time.Duration(offset % int64(24*time.Hour)))
		o.Now = func() time.Time { return now }
		c.Set(now)
		j, err := jwtreplay.NewJTI(l, o)
		if err != nil {
			return // MaxLifetime not longer than Skew
		}

		payload := `{"iss":"https://issuer.example","aud":"api","jti":"t` + strconv.FormatInt(n.Add(1), 10) + `"`
		var secs [3]int64
		var present, valid [3]bool
		for i, v := range []string{exp, iat, nbf} {
			if v == "" {
				continue
			}
			if !jsonNumber.MatchString(v) {
				return
			}
			payload += `,"` + [3]string{"exp", "iat", "nbf"}[i] + `":` + v
			present[i] = true
			secs[i], valid[i] = numericDate(t, v)
		}
		payload += "}"
		sig, err := signer.Sign([]byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		token, err := sig.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}

		got, err := j.Verify(context.Background(), token)

		// The rules of JTIOptions and JTI.Verify, in exact arithmetic.
		nowNS := instant(now)
		accept := present[0] && (!capMode || present[1])
		var until *big.Int
		for i := range present {
			accept = accept && (!present[i] || valid[i])
		}
		if accept {
			e := ns(secs[0])
			until = add(e, o.Skew)
			switch {
			case present[2] && ns(secs[2]).Cmp(add(nowNS, o.Skew)) > 0: // nbf after now + skew
				accept = false
			case present[1] && ns(secs[1]).Cmp(add(nowNS, o.Skew)) > 0: // iat after now + skew
				accept = false
			case e.Cmp(add(nowNS, -o.Skew)) < 0: // exp before now - skew
				accept = false
			case !capMode && new(big.Int).Sub(e, nowNS).Cmp(big.NewInt(int64(o.MaxLifetime))) > 0:
				accept = false
			}
			if capMode && present[1] {
				if limit := add(ns(secs[1]), o.MaxLifetime); limit.Cmp(until) < 0 {
					until = limit
				}
			}
			accept = accept && nowNS.Cmp(until) < 0
		}

		if err != nil {
			switch code := jwtreplay.ErrorCode(err); {
			case code == jwtreplay.CodeInternal || code == jwtreplay.CodeUnavailable:
				t.Fatalf("%s: %v", payload, err)
			case accept:
				t.Fatalf("%s at %v (skew %v, MaxLifetime %v, cap %v): refused (%v), but the rules accept it until %v",
					payload, now, o.Skew, o.MaxLifetime, capMode, err, time.Unix(0, until.Int64()).UTC())
			}
			return
		}
		if !accept {
			t.Fatalf("%s at %v (skew %v, MaxLifetime %v, cap %v): accepted until %v, but the rules refuse it",
				payload, now, o.Skew, o.MaxLifetime, capMode, got.AcceptedUntil)
		}
		gotUntil := instant(got.AcceptedUntil)
		if gotUntil.Cmp(until) != 0 {
			t.Fatalf("%s: accepted until %v, want %v", payload, got.AcceptedUntil, time.Unix(0, until.Int64()).UTC())
		}
		if gotUntil.Cmp(nowNS) <= 0 || gotUntil.Cmp(add(nowNS, o.Retention())) > 0 {
			t.Fatalf("%s: accepted until %v, outside (now, now + MaxLifetime + Skew]", payload, got.AcceptedUntil)
		}
		if e := got.Claims.Expiry; e == nil || int64(*e) != secs[0] || e.Time().Unix() != secs[0] {
			t.Fatalf("%s: exp read as %v", payload, e)
		}
		if _, err := j.Verify(context.Background(), token); jwtreplay.ErrorCode(err) != jwtreplay.CodeReplayed {
			t.Fatalf("%s: presented again: got %v, want replayed", payload, err)
		}
	})
}

// FuzzDPoPTime verifies EdDSA DPoP proofs whose iat is a fuzzed JSON
// number, under fuzzed ProofAge and Skew, at a fuzzed clock.
func FuzzDPoPTime(f *testing.F) {
	for i, s := range timeSeeds() {
		f.Add(s, uint16(5), uint16(60), int64(i)*int64(time.Second/3))
	}
	s := start.Unix()
	f.Add(strconv.FormatInt(s+5, 10), uint16(5), uint16(60), int64(0))
	f.Add(strconv.FormatInt(s+6, 10), uint16(5), uint16(60), int64(0))
	f.Add(strconv.FormatInt(s-65, 10), uint16(5), uint16(60), int64(0))
	f.Add(strconv.FormatInt(s-65, 10), uint16(5), uint16(60), int64(-1))

	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		f.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: priv},
		(&jose.SignerOptions{EmbedJWK: true}).WithType(jwtreplay.ProofType))
	if err != nil {
		f.Fatal(err)
	}
	c := newClock(start)
	const namespace = "dpop-jti"
	l, _ := newLedger(f, c, map[string]spent.Policy{namespace: {Mode: spent.ModeRefuse, Retention: 24 * time.Hour, Lease: 30 * time.Second, OnLeaseExpiry: spent.LeaseExpiryHold}})
	var n atomic.Int64

	f.Fuzz(func(t *testing.T, iat string, skewSec, ageSec uint16, offset int64) {
		if !jsonNumber.MatchString(iat) {
			return
		}
		o := jwtreplay.DefaultDPoPOptions()
		o.Namespace = namespace
		o.Skew = time.Duration(skewSec%600) * time.Second
		o.ProofAge = time.Duration(ageSec%3600) * time.Second
		if o.ProofAge == 0 {
			return // refused by Validate
		}
		now := start.Add(time.Duration(offset % int64(time.Hour)))
		o.Now = func() time.Time { return now }
		c.Set(now)
		d, err := jwtreplay.NewDPoP(l, o)
		if err != nil {
			t.Fatal(err)
		}
		payload := `{"jti":"p` + strconv.FormatInt(n.Add(1), 10) + `","htm":"POST","htu":"` + resource + `","iat":` + iat + `}`
		sig, err := signer.Sign([]byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		proof, err := sig.CompactSerialize()
		if err != nil {
			t.Fatal(err)
		}

		got, err := d.Verify(context.Background(), jwtreplay.ProofRequest{Proof: proof, Method: "POST", URI: resource})

		sec, valid := numericDate(t, iat)
		nowNS := instant(now)
		until := add(ns(sec), o.ProofAge+o.Skew)
		accept := valid && ns(sec).Cmp(add(nowNS, o.Skew)) <= 0 && nowNS.Cmp(until) < 0

		if err != nil {
			switch code := jwtreplay.ErrorCode(err); {
			case code == jwtreplay.CodeInternal || code == jwtreplay.CodeUnavailable:
				t.Fatalf("%s: %v", payload, err)
			case accept:
				t.Fatalf("%s at %v (skew %v, ProofAge %v): refused (%v), but the rules accept it", payload, now, o.Skew, o.ProofAge, err)
			}
			return
		}
		if !accept {
			t.Fatalf("%s at %v (skew %v, ProofAge %v): accepted until %v, but the rules refuse it", payload, now, o.Skew, o.ProofAge, got.AcceptedUntil)
		}
		gotUntil := instant(got.AcceptedUntil)
		if gotUntil.Cmp(until) != 0 || got.IssuedAt.Unix() != sec {
			t.Fatalf("%s: issued at %v, accepted until %v; want %d s and %v", payload, got.IssuedAt, got.AcceptedUntil, sec, time.Unix(0, until.Int64()).UTC())
		}
		if gotUntil.Cmp(nowNS) <= 0 || gotUntil.Cmp(add(nowNS, o.Retention())) > 0 {
			t.Fatalf("%s: accepted until %v, outside (now, now + ProofAge + 2 × Skew]", payload, got.AcceptedUntil)
		}
	})
}
