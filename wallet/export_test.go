package wallet_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/spentledger/spent/wallet"
)

// corruptJournal flips a bit of the input token's signature in the first
// journal entry's request (the last byte of the token, which sits just
// before the return and output count).
func corruptJournal(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f wallet.File
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	req := f.Journal[0].Request
	tokLen := int(req[1])<<8 | int(req[2])
	req[3+tokLen-1] ^= 1
	b, err = json.Marshal(&f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
