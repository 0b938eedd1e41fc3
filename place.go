package spent

import (
	"unicode"
	"unicode/utf8"
)

// CheckPlace says what is wrong with a claim's place: it must be at most
// [MaxPlaceLen] bytes of UTF-8 without control characters (C0, DEL, C1),
// since it is printed to operators (the CLI's lists, the page, the log) as
// it was given, where a newline would forge a row, an escape sequence
// would drive their terminal, and a bidirectional override would show
// another text than it holds. It returns an EInvalid error.
func CheckPlace(place string) error {
	if len(place) > MaxPlaceLen {
		return Errorf(EInvalid, "place of %d bytes: at most %d", len(place), MaxPlaceLen)
	}
	for i, r := range place {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(place[i:]); n <= 1 {
				return Errorf(EInvalid, "place %s is not UTF-8 (byte %d)", QuoteInput(place), i)
			}
		}
		if unicode.IsControl(r) || isBidiControl(r) {
			return Errorf(EInvalid, "place %s holds a control character (%U at byte %d): a place is printed to operators as given", QuoteInput(place), r, i)
		}
	}
	return nil
}

// isBidiControl reports whether r is one of Unicode's explicit
// bidirectional formatting characters (embeddings, overrides, isolates).
func isBidiControl(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}
