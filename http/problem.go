package http

import (
	"net/http"

	"github.com/spentledger/spent"
)

// ProblemType is the prefix of the "type" member of every problem document;
// the code follows it. It points at the error table in docs/http-api.md.
const ProblemType = "https://github.com/spentledger/spent/blob/main/docs/http-api.md#code-"

// codes is the one table that maps each error code to its HTTP status and
// a short title. The client reads the code back from the problem document,
// so both directions agree by construction.
var codes = map[string]struct {
	status int
	title  string
}{
	spent.EInvalid:          {http.StatusBadRequest, "Invalid request"},
	spent.EUnknownNamespace: {http.StatusBadRequest, "Unknown namespace"},
	spent.EKeyTooLong:       {http.StatusBadRequest, "Key too long"},
	spent.EExpiryTooLong:    {http.StatusBadRequest, "Expiry too far away"},
	spent.EUnauthorized:     {http.StatusUnauthorized, "Unauthorized"},
	spent.EForbidden:        {http.StatusForbidden, "Forbidden"},
	spent.ENotFound:         {http.StatusNotFound, "Not found"},
	spent.ENotPending:       {http.StatusConflict, "Record is not pending"},
	spent.ESeqMismatch:      {http.StatusConflict, "Seq mismatch"},
	spent.ELeaseExpired:     {http.StatusConflict, "Lease expired"},
	spent.ETooLarge:         {http.StatusRequestEntityTooLarge, "Too large"},
	spent.EUnavailable:      {http.StatusServiceUnavailable, "Unavailable"},
	spent.EHostNotAllowed:   {http.StatusMisdirectedRequest, "Host not allowed"},
	spent.ENoSeqIndex:       {http.StatusNotImplemented, "No index by seq"},
	spent.EInternal:         {http.StatusInternalServerError, "Internal error"},
}

// StatusOf returns the HTTP status the server answers an error code with:
// 500 for a code it does not know.
func StatusOf(code string) int {
	if c, ok := codes[code]; ok {
		return c.status
	}
	return http.StatusInternalServerError
}

// codeOfStatus guesses a code for a response that carries no problem
// document of ours (a proxy's error page, say). Only statuses that cannot be
// misread are mapped to their code; a bare 404 or 409 from something else is
// not evidence about a record, so it becomes EInvalid (the request went to
// the wrong place), and every 5xx, 408 and 429 becomes EUnavailable
// (retryable).
func codeOfStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return spent.EUnauthorized
	case status == http.StatusForbidden:
		return spent.EForbidden
	case status == http.StatusRequestEntityTooLarge:
		return spent.ETooLarge
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return spent.EUnavailable
	}
	return spent.EInvalid
}

// titleOf returns the title of code's problem documents.
func titleOf(code string) string {
	if c, ok := codes[code]; ok {
		return c.title
	}
	return "Error"
}
