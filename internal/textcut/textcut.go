// Package textcut shortens text for messages, notices and error texts
// without cutting a UTF-8 sequence in two: a cut string stays valid UTF-8
// (SYSTEM's notices, tool errors and log fields carry it to clients that
// reject invalid text), and is marked as cut.
package textcut

import (
	"strings"
	"unicode/utf8"
)

// Prefix is the longest prefix of s of at most n bytes that does not end
// inside a UTF-8 sequence (an invalid byte counts as one rune).
func Prefix(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	i := n
	// Back up over continuation bytes to the start of the rune that
	// straddles the cut, at most utf8.UTFMax-1 bytes.
	for j := 0; j < utf8.UTFMax-1 && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	if !utf8.RuneStart(s[i]) {
		// Not a rune's continuation after all (invalid bytes): cut at n.
		return s[:n]
	}
	if r, size := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && size <= 1 {
		// s[i] is an invalid byte, which stands alone: keep it.
		return s[:n]
	}
	return s[:i]
}

// Cut is s when it is at most n bytes long; otherwise its Prefix of n
// bytes followed by mark ("...", "…", or a note of the length).
func Cut(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + mark
}

// Line is s on one line (runs of white space made one space) and at most n
// runes long, its end replaced by "…" when it was cut.
func Line(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(0, n-1)]) + "…"
}
