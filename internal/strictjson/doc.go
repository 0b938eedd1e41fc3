// Package strictjson reads JSON by the one set of rules every HTTP surface
// of spent (http, idempotency, privacypass, ecash) and every file they keep
// (journals, key files, wallets) follows, and writes JSON strings and times
// exactly.
//
// In the common case, decode a document into a struct with
//
//	err := strictjson.Unmarshal(data, &v)
//
// or, for a peer's answer that may carry members added after this code was
// written,
//
//	err := strictjson.Rules{SkipUnknown: true}.Unmarshal(data, &v)
//
// The HTTP server and client, which decode on the hot path without
// reflection, read members one by one with a [Decoder] and [Decoder.Members].
//
// # Guarantees
//
// A document is refused, rather than repaired, when:
//
//   - a member's name differs only in case from a field's name
//     (encoding/json alone would match it), even where unknown members
//     are skipped;
//   - an object has the same member twice;
//   - a string holds invalid UTF-8 or a \u escape of a lone surrogate;
//   - a member is unknown, unless Rules.SkipUnknown is set;
//   - anything but white space follows the value;
//   - it is longer than its limit (Rules.MaxSize, DefaultMaxSize by default)
//     or nested deeper than 64 levels.
//
// So two different documents can never be read as one, and a file or an
// answer is read exactly as it was written.
//
// # Caveats
//
//   - Unmarshal checks the rules on its own walk of the document and then
//     hands it to encoding/json, which converts the values; a value of the
//     wrong JSON type is reported by encoding/json.
//   - Unmarshal follows encoding/json's field names (tags, embedded structs,
//     "-"), except that invalid tag names are not recognised as such.
//   - null is accepted for every member and means the member is absent.
//   - A reader built on Decoder matches names exactly by construction: a
//     name that differs in case is unknown to it, refused by Members and
//     skipped where the reader skips unknown members. Unmarshal refuses it
//     always, because encoding/json would match it.
//   - Size limits of Decoder readers are the caller's (the HTTP server's
//     MaxBody, the client's read limit).
package strictjson
