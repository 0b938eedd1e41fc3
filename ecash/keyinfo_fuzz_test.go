package ecash_test

import (
	"encoding/hex"
	"encoding/json"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spentledger/spent/ecash"
	"github.com/spentledger/spent/internal/strictjson"
)

// rfcTokenKey returns the RSASSA-PSS public key of RFC 9578 appendix A.2,
// read from package privacypass's test vectors: a valid token key that the
// committed corpus can name.
func rfcTokenKey(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("../privacypass/testdata/rfc9578-type2-issuance.json")
	if err != nil {
		tb.Fatal(err)
	}
	var vs []map[string]string
	if err := json.Unmarshal(b, &vs); err != nil || len(vs) == 0 {
		tb.Fatalf("vectors: %v", err)
	}
	k, err := hex.DecodeString(vs[0]["pkS"])
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// FuzzKeyList reads arbitrary key lists as the Client reads the issuer's
// answer, at a fuzzed clock, and checks the times a client derives from the
// integers and times in it:
//   - a key that parses has a grace of exactly grace_seconds seconds, never
//     negative and never wrapped, so that its tokens are accepted until
//     no earlier than its end;
//   - Current picks, per denomination, the key with the latest not-before
//     among those whose epoch holds now.
func FuzzKeyList(f *testing.F) {
	tk := strictjson.AppendString(nil, strictjson.B64.EncodeToString(rfcTokenKey(f)))
	doc := func(keys ...string) []byte {
		return []byte(`{"issuer":"ecash.example","token_challenge":"AAIAAA==","price":1,"issue_value":8,"keys":[` + strings.Join(keys, ",") + `]}`)
	}
	key := func(denom uint64, nb, end string, grace string) string {
		return `{"denomination":` + strconv.FormatUint(denom, 10) + `,"token_key":` + string(tk) +
			`,"not_before":"` + nb + `","end":"` + end + `","grace_seconds":` + grace + `}`
	}
	const (
		t0 = "2026-11-30T00:00:00Z"
		t1 = "2026-12-01T00:00:00Z"
		t2 = "2026-12-02T00:00:00Z"
	)
	for _, g := range []string{"21600", "0", "-1", "9223372036", "9223372037", "9223372036854775807", "-9223372036854775808", "1e3", "21600.0"} {
		f.Add(doc(key(1, t0, t1, g)), int64(0))
	}
	f.Add(doc(key(1, t0, t1, "21600"), key(1, t1, t2, "21600"), key(2, t0, t1, "0")), int64(12*time.Hour))
	f.Add(doc(key(1, t0, t1, "21600"), key(1, t1, t2, "21600")), int64(36*time.Hour))
	f.Add(doc(key(4, t1, t0, "60"), key(0, t0, t1, "60")), int64(0))
	f.Add(doc(key(8, "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z", "9223372036")), int64(0))
	f.Add(doc(), int64(0))

	rules := strictjson.Rules{SkipUnknown: true}
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte, offset int64) {
		var l ecash.KeyList
		if rules.Unmarshal(b, &l) != nil {
			return
		}
		now := base.Add(time.Duration(offset % int64(1000*time.Hour)))
		for i := range l.Keys {
			ki := &l.Keys[i]
			k, err := ki.Key()
			if err != nil {
				continue
			}
			want := new(big.Int).Mul(big.NewInt(ki.GraceSeconds), big.NewInt(int64(time.Second)))
			if k.Grace < 0 || want.Cmp(big.NewInt(int64(k.Grace))) != 0 {
				t.Fatalf("keys[%d]: grace_seconds %d read as a grace of %v (%d ns)", i, ki.GraceSeconds, k.Grace, int64(k.Grace))
			}
			if k.AcceptUntil().Before(k.End) {
				t.Fatalf("keys[%d]: tokens accepted until %v, before the key's end %v", i, k.AcceptUntil(), k.End)
			}
		}
		cur, err := l.Current(now)
		if err != nil {
			return
		}
		for d, k := range cur {
			if k.Denomination != d || k.NotBefore.After(now) || !now.Before(k.End) {
				t.Fatalf("at %v: current key of %d is %d, %v to %v", now, d, k.Denomination, k.NotBefore, k.End)
			}
			for _, ki := range l.Keys {
				if ki.Denomination == d && !ki.NotBefore.After(now) && now.Before(ki.End) && ki.NotBefore.After(k.NotBefore) {
					t.Fatalf("at %v: current key of %d starts %v, but one starting %v holds now too", now, d, k.NotBefore, ki.NotBefore)
				}
			}
		}
	})
}
