package projection

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small reader of top-level JSON members, for the events recovery folds
// by the million. Log data was written by encoding/json and is covered by a
// CRC, so it is well formed; the reader still refuses anything it does not
// understand (it returns false), and callers then fall back to
// encoding/json, which reports malformed data properly. It skips values by
// their brackets and quotes instead of validating and decoding them, which
// is what makes recovery fast.

// objectMembers calls f with each top-level member's key (raw, unescaped
// only if it has no escapes, which our keys never do) and the raw bytes of
// its value. It reports whether data was a well-formed object as far as the
// scan could tell.
func objectMembers(data []byte, f func(key string, val []byte)) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		kEnd := stringEnd(data, i)
		if kEnd < 0 {
			return false
		}
		key := data[i+1 : kEnd-1]
		for _, c := range key {
			if c == '\\' {
				return false
			}
		}
		i = skipSpace(data, kEnd)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		vEnd := valueEnd(data, i)
		if vEnd < 0 {
			return false
		}
		f(string(key), data[i:vEnd])
		i = skipSpace(data, vEnd)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// arrayElements calls f with the raw bytes of each element of a JSON array.
func arrayElements(data []byte, f func(val []byte)) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return true
	}
	for {
		vEnd := valueEnd(data, i)
		if vEnd < 0 {
			return false
		}
		f(data[i:vEnd])
		i = skipSpace(data, vEnd)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return true
		default:
			return false
		}
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the string starting at data[i]
// (a quote), or -1.
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd returns the index just past the value starting at data[i], or -1.
func valueEnd(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				e := stringEnd(data, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if j == i {
				return -1
			}
			return j
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// jsonString decodes a raw JSON string value.
func jsonString(val []byte) (string, bool) {
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return "", false
	}
	inner := val[1 : len(val)-1]
	if !utf8.Valid(inner) {
		return "", false // encoding/json would substitute U+FFFD: let it
	}
	for i, c := range inner {
		if c < 0x20 || c == '"' {
			return "", false
		}
		if c == '\\' {
			return unescape(inner, i)
		}
	}
	return string(inner), true
}

// unescape decodes the body of a JSON string whose first escape is at i.
func unescape(in []byte, i int) (string, bool) {
	out := make([]byte, 0, len(in))
	out = append(out, in[:i]...)
	for i < len(in) {
		c := in[i]
		if c != '\\' {
			if c < 0x20 || c == '"' {
				return "", false
			}
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(in) {
			return "", false
		}
		switch in[i+1] {
		case '"', '\\', '/':
			out = append(out, in[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n := unicodeEscape(in[i:])
			if n == 0 {
				return "", false
			}
			out = utf8.AppendRune(out, r)
			i += n
			continue
		default:
			return "", false
		}
		i += 2
	}
	return string(out), true
}

// unicodeEscape decodes \uXXXX (and a following low surrogate) at the start
// of in, returning the rune and the bytes used (0 when malformed).
func unicodeEscape(in []byte) (rune, int) {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 4 {
			return 0, false
		}
		var r rune
		for _, c := range b[:4] {
			switch {
			case c >= '0' && c <= '9':
				r = r<<4 | rune(c-'0')
			case c >= 'a' && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case c >= 'A' && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	r, ok := hex4(in[2:])
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r) {
		if len(in) >= 12 && in[6] == '\\' && in[7] == 'u' {
			if r2, ok2 := hex4(in[8:]); ok2 {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return d, 12
				}
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}

// jsonInt decodes a raw JSON integer value.
func jsonInt(val []byte) (int, bool) {
	n, err := strconv.Atoi(string(val))
	return n, err == nil
}

// jsonStrings decodes a raw JSON array of strings (null is an empty list).
func jsonStrings(val []byte) ([]string, bool) {
	if string(val) == "null" {
		return nil, true
	}
	var out []string
	okAll := true
	if !arrayElements(val, func(v []byte) {
		s, ok := jsonString(v)
		if !ok {
			okAll = false
		}
		out = append(out, s)
	}) {
		return nil, false
	}
	return out, okAll
}
