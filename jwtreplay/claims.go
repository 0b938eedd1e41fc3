package jwtreplay

import josejson "github.com/go-jose/go-jose/v4/json"

// decodeJSON decodes the JSON object data (a claims set, a header) into v as
// go-jose decodes a JOSE header, with go-jose's fork of encoding/json:
//
//   - Member names match the json names of v's fields exactly: claim names
//     and header parameter names are case-sensitive (RFC 7519 section 4,
//     RFC 7515 section 4), so "JTI" or "Exp" is no jti or exp but an
//     unknown member, ignored. encoding/json would match them regardless
//     of case, and would read a token's id from "JTI".
//   - An object that names a member twice is refused. RFC 7519 section 4
//     lets a parser either refuse it or take the last; refusing leaves no
//     room for the caller's own parser (of Token.Payload, say) to read
//     another jti than the one claimed in the ledger.
func decodeJSON(data []byte, v any) error {
	return josejson.Unmarshal(data, v)
}
