// Package jsonfast extracts single fields of small, well-known JSON objects
// without a full decode, for the hot path of streamed LLM responses (one
// event per token). Every function reports ok=false when the input is not
// exactly the simple shape it handles; callers then decode normally.
package jsonfast

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// StringAt reads the JSON string literal whose opening quote is at
// data[i]. It returns the decoded string and the index just past the
// closing quote. Escapes are decoded by encoding/json; invalid UTF-8 or
// control characters give ok=false.
func StringAt(data []byte, i int) (s string, end int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return "", 0, false
	}
	escaped := false
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '\\':
			escaped = true
			j++ // skip the escaped byte (\" in particular)
		case c == '"':
			lit := data[i : j+1]
			if escaped {
				if err := json.Unmarshal(lit, &s); err != nil {
					return "", 0, false
				}
				return s, j + 1, true
			}
			raw := lit[1 : len(lit)-1]
			if !utf8.Valid(raw) {
				return "", 0, false
			}
			return string(raw), j + 1, true
		case c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

// Once reports whether sep occurs exactly once in data, and where.
func Once(data, sep []byte) (int, bool) {
	i := bytes.Index(data, sep)
	if i < 0 || bytes.Contains(data[i+len(sep):], sep) {
		return -1, false
	}
	return i, true
}
