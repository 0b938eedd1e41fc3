package spent

import (
	"strconv"
	"unicode/utf8"
)

// MaxQuote is the most bytes of an input that [QuoteInput] quotes.
const MaxQuote = 64

// QuoteInput returns s quoted as by strconv.Quote, for a message that names
// an input. An input longer than [MaxQuote] bytes is cut to its first
// MaxQuote bytes (at a character boundary) and followed by "…" and its full
// length, as in "aaaa"… (31457280 bytes), so that an error never echoes a
// large input back to its sender or into a log.
//
// Every message in the project that quotes client input goes through it.
func QuoteInput(s string) string {
	if len(s) <= MaxQuote {
		return strconv.Quote(s)
	}
	cut := MaxQuote
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
