package spent

import (
	"unicode"
	"unicode/utf8"
)

// CheckPlace says what is wrong with a claim's place: it must be at most
// [MaxPlaceLen] bytes of UTF-8 without control characters (C0, DEL, C1),
// format characters (bidirectional marks, overrides and isolates,
// zero-width characters) or line and paragraph separators, since it is
// printed to operators (the CLI's lists, the page, the log) as it was
// given, where a newline would forge a row, an escape sequence would drive
// their terminal, and a bidirectional override or an invisible character
// would show another text than it holds. It returns an EInvalid error.
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
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			return Errorf(EInvalid, "place %s holds a control or format character (%U at byte %d): a place is printed to operators as given", QuoteInput(place), r, i)
		}
	}
	return nil
}
