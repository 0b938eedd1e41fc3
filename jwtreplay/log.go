package jwtreplay

import (
	"log/slog"
	"net/http"
)

// logFailure logs the refusals an operator must know of: ledger failures
// and misconfigurations. Refusals of the client's own tokens are not logged.
func logFailure(log *slog.Logger, r *http.Request, err error) {
	switch ErrorCode(err) {
	case CodeUnavailable:
		log.Warn("jwtreplay: ledger unavailable; request refused", "method", r.Method, "path", r.URL.Path, "err", err)
	case CodeInternal:
		log.Error("jwtreplay: request refused on a misconfiguration", "method", r.Method, "path", r.URL.Path, "err", err)
	}
}
