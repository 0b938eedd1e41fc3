package spent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/spentledger/spent"
	"github.com/spentledger/spent/inmem"
	"github.com/spentledger/spent/storetest"
)

// plainStore hides every method of the store but those of spent.Store, so
// that it is no spent.SeqLister.
type plainStore struct{ spent.Store }

// wrappedStore hides them too, but names the store it wraps, as a tracing
// wrapper does.
type wrappedStore struct{ spent.Store }

func (w wrappedStore) Unwrap() spent.Store { return w.Store }

func TestSeqRefusesBadRequests(t *testing.T) {
	f := mustOpen(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  spent.SeqRequest
		code string
	}{
		{"NodeZero", spent.SeqRequest{Last: 10}, spent.EInvalid},
		{"NothingAsked", spent.SeqRequest{Node: 1}, spent.EInvalid},
		{"LastAndAround", spent.SeqRequest{Node: 1, Last: 10, Around: 5}, spent.EInvalid},
		{"LastAndRange", spent.SeqRequest{Node: 1, Last: 10, From: 5}, spent.EInvalid},
		{"AroundAndRange", spent.SeqRequest{Node: 1, Around: 10, To: 50}, spent.EInvalid},
		{"LastWithLimit", spent.SeqRequest{Node: 1, Last: 10, Limit: 5}, spent.EInvalid},
		{"NegativeLast", spent.SeqRequest{Node: 1, Last: -1}, spent.EInvalid},
		{"NegativeLimit", spent.SeqRequest{Node: 1, Around: 5, Limit: -1}, spent.EInvalid},
		{"FromAfterTo", spent.SeqRequest{Node: 1, From: 10, To: 9}, spent.EInvalid},
		{"LastOverMax", spent.SeqRequest{Node: 1, Last: spent.MaxSeqList + 1}, spent.ETooLarge},
		{"LimitOverMax", spent.SeqRequest{Node: 1, From: 1, Limit: spent.MaxSeqList + 1}, spent.ETooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.ledger.Seq(ctx, tc.req)
			if got := spent.ErrorCode(err); got != tc.code {
				t.Fatalf("Seq(%+v): got code %q (%v), want %q", tc.req, got, err, tc.code)
			}
		})
	}
	t.Run("MaxIsAccepted", func(t *testing.T) {
		if _, err := f.ledger.Seq(ctx, spent.SeqRequest{Node: 1, Last: spent.MaxSeqList}); err != nil {
			t.Fatalf("Seq(last %d): got error %v, want none", spent.MaxSeqList, err)
		}
	})
}

func TestSeqFindsTheIndex(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		store spent.Store
		code  string
	}{
		{"Plain", plainStore{inmem.New()}, spent.ENoSeqIndex},
		{"Wrapped", wrappedStore{inmem.New()}, ""},
		{"WrappedPlain", wrappedStore{plainStore{inmem.New()}}, spent.ENoSeqIndex},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(storetest.NewClock(testEpoch))
			l, err := spent.NewLedger(ctx, tc.store, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Claim(ctx, spent.Claim{Namespace: nsEcho, Key: "k", Result: []byte("r")}); err != nil {
				t.Fatal(err)
			}
			a, err := l.Seq(ctx, spent.SeqRequest{Node: 1, Last: 10})
			if got := spent.ErrorCode(err); got != tc.code {
				t.Fatalf("Seq: got code %q (%v), want %q", got, err, tc.code)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.code == ""]; len(a.Records) != want {
				t.Fatalf("Seq: got %d records, want %d", len(a.Records), want)
			}
		})
	}
}

func TestSeqStoreErrorIsUnavailable(t *testing.T) {
	f := mustOpen(t)
	f.store.SetFaults(inmem.Faults{Before: func(op string) error {
		if op == "list_seq" {
			return fmt.Errorf("disk on fire")
		}
		return nil
	}})
	_, err := f.ledger.Seq(context.Background(), spent.SeqRequest{Node: 1, Last: 1})
	if got := spent.ErrorCode(err); got != spent.EUnavailable {
		t.Fatalf("Seq over a failing store: got code %q (%v), want %q", got, err, spent.EUnavailable)
	}
}

// ExampleLedger_Seq lists what node 1 wrote last, around a seq, and in a
// range: records without their result bytes, with the result's length.
func ExampleLedger_Seq() {
	l := exampleLedger()
	ctx := context.Background()
	for i := range 5 {
		if _, err := l.Claim(ctx, spent.Claim{Namespace: "payments", Key: fmt.Sprint("order-", i), Result: []byte(fmt.Sprint("receipt ", i))}); err != nil {
			fmt.Println(err)
			return
		}
	}
	show := func(req spent.SeqRequest) {
		a, err := l.Seq(ctx, req)
		if err != nil {
			fmt.Println(err)
			return
		}
		var line []string
		for _, r := range a.Records {
			line = append(line, fmt.Sprint(r.Seq, " ", r.State, " ", r.ResultLen, " bytes"))
		}
		fmt.Println(strings.Join(line, "; "))
	}
	show(spent.SeqRequest{Node: 1, Last: 2})
	show(spent.SeqRequest{Node: 1, Around: 3, Limit: 2})
	show(spent.SeqRequest{Node: 1, From: 4})
	_, err := l.Seq(ctx, spent.SeqRequest{Node: 1, From: 5, To: 4})
	fmt.Println(err)
	// Output:
	// 1:4 complete 9 bytes; 1:5 complete 9 bytes
	// 1:2 complete 9 bytes; 1:3 complete 9 bytes
	// 1:4 complete 9 bytes; 1:5 complete 9 bytes
	// spent: invalid: seq: from 5 is after to 4
}
