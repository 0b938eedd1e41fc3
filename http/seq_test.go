package http_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/spentledger/spent"
	sphttp "github.com/spentledger/spent/http"
	"github.com/spentledger/spent/inmem"
)

// plainStore hides every method of its store but those of spent.Store, so
// that it keeps no index by seq.
type plainStore struct{ spent.Store }

// seqEnv serves a ledger whose node 1 has claimed n keys of "raw" (which
// keeps raw keys) with results "result i", and returns their seqs.
func seqEnv(t *testing.T, n int) (*env, []spent.Seq) {
	t.Helper()
	e := MustServe(t, authConfig())
	var seqs []spent.Seq
	for i := range n {
		a, err := e.ledger.Claim(context.Background(), spent.Claim{Namespace: "raw", Key: fmt.Sprint("key ", i), Result: []byte(fmt.Sprint("result ", i))})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, a.Record.Seq)
	}
	return e, seqs
}

func TestSeqEndpoint(t *testing.T) {
	e, seqs := seqEnv(t, 12)
	t.Run("LastThreeAsJSON", func(t *testing.T) {
		m := wantOK(t, e.post(t, "/v1/seq", tokAdmin, `{"node":1,"last":3}`))
		recs := m["records"].([]any)
		if len(recs) != 3 || fmt.Sprint(m["node"]) != "1" {
			t.Fatalf("got node %v and %d records, want node 1 and 3", m["node"], len(recs))
		}
		for i, r := range recs {
			rec := r.(map[string]any)
			if got, want := rec["seq"], seqs[9+i].String(); got != want {
				t.Fatalf("record %d: got seq %v, want %s", i, got, want)
			}
			if _, ok := rec["result"]; ok {
				t.Fatalf("record %d: got a result member, want none: %v", i, rec)
			}
			if _, ok := rec["key"]; ok {
				t.Fatalf("record %d: got the raw key, want none: %v", i, rec)
			}
			if got, want := fmt.Sprint(rec["result_len"]), fmt.Sprint(len(fmt.Sprint("result ", 9+i))); got != want {
				t.Fatalf("record %d: got result_len %s, want %s", i, got, want)
			}
		}
	})
	t.Run("ClientAround", func(t *testing.T) {
		c := sphttp.NewClient(e.url, sphttp.ClientConfig{Token: tokAdmin})
		a, err := c.Seq(context.Background(), spent.SeqRequest{Node: 1, Around: seqs[5].Counter, Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		if a.Node != 1 || len(a.Records) != 4 {
			t.Fatalf("got node %d and %d records, want node 1 and 4", a.Node, len(a.Records))
		}
		for i, r := range a.Records {
			want := seqs[3+i]
			if r.Seq != want || r.Namespace != "raw" || r.RawKey != "" || r.Result != nil || r.ResultLen != len("result 3") {
				t.Fatalf("record %d: got %s %q raw %q, %d result bytes, length %d; want %s \"raw\", no raw key, no result, length %d",
					i, r.Seq, r.Namespace, r.RawKey, len(r.Result), r.ResultLen, want, len("result 3"))
			}
		}
	})
	t.Run("ClientRange", func(t *testing.T) {
		c := sphttp.NewClient(e.url, sphttp.ClientConfig{Token: tokAdmin})
		a, err := c.Seq(context.Background(), spent.SeqRequest{Node: 1, From: seqs[2].Counter, To: seqs[4].Counter})
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Records) != 3 || a.Records[0].Seq != seqs[2] || a.Records[2].Seq != seqs[4] {
			t.Fatalf("got %d records, want %s to %s", len(a.Records), seqs[2], seqs[4])
		}
	})
	for _, tc := range []struct {
		name, token, body string
		status            int
		code              string
	}{
		{"NoToken", "", `{"node":1,"last":3}`, http.StatusUnauthorized, spent.EUnauthorized},
		{"ClaimScope", tokClaim, `{"node":1,"last":3}`, http.StatusForbidden, spent.EForbidden},
		{"AdminOfOneNamespace", tokEchoAdmin, `{"node":1,"last":3}`, http.StatusForbidden, spent.EForbidden},
		{"UnknownMember", tokAdmin, `{"node":1,"last":3,"colour":"red"}`, http.StatusBadRequest, spent.EInvalid},
		{"NodeZero", tokAdmin, `{"node":0,"last":3}`, http.StatusBadRequest, spent.EInvalid},
		{"NodeTooBig", tokAdmin, `{"node":4294967296,"last":3}`, http.StatusBadRequest, spent.EInvalid},
		{"NegativeLast", tokAdmin, `{"node":1,"last":-3}`, http.StatusBadRequest, spent.EInvalid},
		{"FractionalAround", tokAdmin, `{"node":1,"around":2.5}`, http.StatusBadRequest, spent.EInvalid},
		{"LastAndAround", tokAdmin, `{"node":1,"last":3,"around":5}`, http.StatusBadRequest, spent.EInvalid},
		{"FromAfterTo", tokAdmin, `{"node":1,"from":9,"to":3}`, http.StatusBadRequest, spent.EInvalid},
		{"LastOverMax", tokAdmin, `{"node":1,"last":10001}`, http.StatusBadRequest, spent.EInvalid},
		{"Nothing", tokAdmin, `{"node":1}`, http.StatusBadRequest, spent.EInvalid},
		{"NotAnObject", tokAdmin, `[1]`, http.StatusBadRequest, spent.EInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantProblem(t, e.post(t, "/v1/seq", tc.token, tc.body), tc.status, tc.code)
		})
	}
	t.Run("Metrics", func(t *testing.T) {
		m := scrape(t, e.url)
		wantSample(t, m, `spent_http_requests_total{code="200",route="/v1/seq"}`, 3) // one raw, two by the client
		wantSample(t, m, `spent_http_requests_total{code="403",route="/v1/seq"}`, 2)
	})
}

func TestSeqEndpointWithoutIndex(t *testing.T) {
	e := MustServeStore(t, authConfig(), plainStore{inmem.New()})
	wantProblem(t, e.post(t, "/v1/seq", tokAdmin, `{"node":1,"last":3}`), http.StatusNotImplemented, spent.ENoSeqIndex)
	c := sphttp.NewClient(e.url, sphttp.ClientConfig{Token: tokAdmin})
	_, err := c.Seq(context.Background(), spent.SeqRequest{Node: 1, Last: 3})
	if got := spent.ErrorCode(err); got != spent.ENoSeqIndex {
		t.Fatalf("client: got code %q (%v), want %q", got, err, spent.ENoSeqIndex)
	}
}
