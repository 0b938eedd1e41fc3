package http

import (
	_ "embed"
	"net/http"

	"github.com/spentledger/spent"
)

// OpenAPIPath is where the server answers its OpenAPI document.
const OpenAPIPath = "/v1/openapi.json"

// OpenAPI is the OpenAPI 3.1 document of every endpoint `spent serve` can
// answer: the ledger API, health and metrics, the Privacy Pass issuer and
// redemption, and the e-cash issuer. The server answers it at OpenAPIPath;
// docs/http-api.md is the prose reference for the same contract.
//
//go:embed openapi.json
var OpenAPI []byte

// openAPI answers GET and HEAD of OpenAPIPath without asking for a token:
// the contract is public, like /healthz.
func (s *Server) openAPI(w http.ResponseWriter, x *exchange, r *http.Request) int {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header()["Allow"] = hdrGet
		return s.problem(w, x, spent.EInvalid, http.StatusMethodNotAllowed, "method "+spent.QuoteInput(r.Method)+" not allowed; use GET")
	}
	return s.write(w, http.StatusOK, hdrJSON, OpenAPI)
}
