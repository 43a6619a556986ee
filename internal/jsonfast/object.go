package jsonfast

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A validating reader of the top-level members of a JSON object, for
// decoders of hot, well-known event data (recovery folds millions). It
// checks the whole grammar as it goes, values it skips included, so that
// a decoder built on it refuses what encoding/json refuses; it refuses
// (Valid reports false) a few valid but unusual inputs too (escaped keys,
// nesting deeper than maxDepth), for which the caller decodes with
// encoding/json.

// maxDepth bounds nesting; deeper (valid) input is left to encoding/json.
const maxDepth = 512

// Members iterates over the members of a JSON object.
type Members struct {
	data []byte
	i    int
	bad  bool
	end  bool
	// plain says the last value is a string without escapes.
	plain bool
}

// Object starts reading the object data (leading and trailing whitespace
// allowed, as encoding/json allows it).
func Object(data []byte) Members {
	m := Members{data: data}
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		m.bad = true
		return m
	}
	m.i = skipWS(data, i+1)
	if m.i < len(data) && data[m.i] == '}' {
		m.finish(m.i + 1)
	}
	return m
}

func (m *Members) finish(i int) {
	m.end = true
	if skipWS(m.data, i) != len(m.data) {
		m.bad = true
	}
}

// Next returns the next member: its key as written (Next refuses keys with
// escapes or invalid UTF-8, which encoding/json would rewrite) and the raw bytes of its value, checked. ok is false at the end
// of the object or at the first error (see Valid).
func (m *Members) Next() (key, val []byte, ok bool) {
	if m.bad || m.end {
		return nil, nil, false
	}
	d, i := m.data, m.i
	if i >= len(d) || d[i] != '"' {
		m.bad = true
		return nil, nil, false
	}
	kEnd, escaped := stringEnd(d, i)
	if kEnd < 0 || escaped {
		m.bad = true
		return nil, nil, false
	}
	key = d[i+1 : kEnd-1]
	if !validKey(key) {
		m.bad = true // encoding/json would substitute U+FFFD
		return nil, nil, false
	}
	i = skipWS(d, kEnd)
	if i >= len(d) || d[i] != ':' {
		m.bad = true
		return nil, nil, false
	}
	i = skipWS(d, i+1)
	var vEnd int
	if i < len(d) && d[i] == '"' {
		var escaped bool
		vEnd, escaped = stringEnd(d, i)
		m.plain = !escaped
	} else {
		vEnd, m.plain = valueEnd(d, i, 0), false
	}
	if vEnd < 0 {
		m.bad = true
		return nil, nil, false
	}
	val = d[i:vEnd]
	i = skipWS(d, vEnd)
	switch {
	case i < len(d) && d[i] == ',':
		m.i = skipWS(d, i+1)
	case i < len(d) && d[i] == '}':
		m.finish(i + 1)
	default:
		m.bad = true
		return nil, nil, false
	}
	return key, val, true
}

// Valid reports, once Next has returned false, whether the object was
// well formed to its end.
func (m *Members) Valid() bool { return m.end && !m.bad }

// PlainValue returns the content of the value Next last returned, without
// its quotes, when it is a string without escapes and valid UTF-8 (what
// Plain returns, without scanning it again); ok is false otherwise.
func (m *Members) PlainValue(val []byte) ([]byte, bool) {
	if !m.plain || len(val) < 2 {
		return nil, false
	}
	inner := val[1 : len(val)-1]
	if !validKey(inner) {
		return nil, false
	}
	return inner, true
}

// Elements iterates over the elements of a JSON array.
type Elements struct {
	data []byte
	i    int
	bad  bool
	end  bool
}

// Array starts reading the array data.
func Array(data []byte) Elements {
	e := Elements{data: data}
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '[' {
		e.bad = true
		return e
	}
	e.i = skipWS(data, i+1)
	if e.i < len(data) && data[e.i] == ']' {
		e.finish(e.i + 1)
	}
	return e
}

func (e *Elements) finish(i int) {
	e.end = true
	if skipWS(e.data, i) != len(e.data) {
		e.bad = true
	}
}

// Next returns the raw bytes of the next element, checked.
func (e *Elements) Next() (val []byte, ok bool) {
	if e.bad || e.end {
		return nil, false
	}
	d := e.data
	vEnd := valueEnd(d, e.i, 0)
	if vEnd < 0 {
		e.bad = true
		return nil, false
	}
	val = d[e.i:vEnd]
	i := skipWS(d, vEnd)
	switch {
	case i < len(d) && d[i] == ',':
		e.i = skipWS(d, i+1)
	case i < len(d) && d[i] == ']':
		e.finish(i + 1)
	default:
		e.bad = true
		return nil, false
	}
	return val, true
}

// Valid reports, once Next has returned false, whether the array was well
// formed to its end.
func (e *Elements) Valid() bool { return e.end && !e.bad }

func skipWS(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// noCtl8 reports whether none of 8 bytes is a control character.
func noCtl8(w uint64) bool { return (w-lsb*0x20)&^w&msb == 0 }

// noCtl reports whether b has no control character (below 0x20).
func noCtl(b []byte) bool {
	for len(b) >= 8 {
		if !noCtl8(binary.LittleEndian.Uint64(b)) {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return false
		}
	}
	return true
}

// plainByte says which bytes a string scan passes over: all but the
// quote, the backslash and control characters. (A table, read only.)
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// stringEnd returns the index just past the string whose quote is at d[i]
// and whether it has escapes, or -1 when it is not a valid JSON string
// (a control character, a bad escape, no closing quote). UTF-8 is not
// checked here (see String).
func stringEnd(d []byte, i int) (int, bool) {
	escaped := false
	j := i + 1
	for {
		// Eight bytes at a time while none is special, then byte by byte
		// to the special one.
		for j+8 <= len(d) && !special8(binary.LittleEndian.Uint64(d[j:])) {
			j += 8
		}
		for j < len(d) && plainByte[d[j]] {
			j++
		}
		if j >= len(d) {
			return -1, false
		}
		switch c := d[j]; {
		case c == '"':
			return j + 1, escaped
		case c == '\\':
			n := escapeLen(d[j:])
			if n == 0 {
				return -1, false
			}
			escaped = true
			j += n
		default:
			return -1, false
		}
	}
}

// special8 reports whether one of 8 bytes ends a string's plain run: a
// quote, a backslash or a control character (each test is exact for "one
// of the bytes"; a borrow only ever marks bytes above a true one).
func special8(w uint64) bool {
	q := w ^ (lsb * '"')
	b := w ^ (lsb * '\\')
	return ((w-lsb*0x20)&^w|(q-lsb)&^q|(b-lsb)&^b)&msb != 0
}

// escapeLen is the length of the valid escape at the start of b, or 0.
func escapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if _, ok := hex4(b[2:]); ok {
			return 6
		}
	}
	return 0
}

// validKey reports whether a key is valid UTF-8 (ASCII, usually).
func validKey(k []byte) bool {
	for _, c := range k {
		if c >= 0x80 {
			return utf8.Valid(k)
		}
	}
	return true
}

// valueEnd returns the index just past the JSON value at d[i], checked,
// or -1.
func valueEnd(d []byte, i, depth int) int {
	if i >= len(d) {
		return -1
	}
	switch c := d[i]; c {
	case '"':
		e, _ := stringEnd(d, i)
		return e
	case '{':
		return objectEnd(d, i, depth)
	case '[':
		return arrayEnd(d, i, depth)
	case 't':
		return literal(d, i, "true")
	case 'f':
		return literal(d, i, "false")
	case 'n':
		return literal(d, i, "null")
	}
	return numberEnd(d, i)
}

// objectEnd returns the index just past the object at d[i] (a '{'),
// checked, or -1.
func objectEnd(d []byte, i, depth int) int {
	if depth >= maxDepth {
		return -1
	}
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return -1
		}
		if i, _ = stringEnd(d, i); i < 0 {
			return -1
		}
		i = skipWS(d, i)
		if i >= len(d) || d[i] != ':' {
			return -1
		}
		if i = valueEnd(d, skipWS(d, i+1), depth+1); i < 0 {
			return -1
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return -1
		}
		if d[i] == '}' {
			return i + 1
		}
		if d[i] != ',' {
			return -1
		}
		i = skipWS(d, i+1)
	}
}

// arrayEnd returns the index just past the array at d[i] (a '['),
// checked, or -1.
func arrayEnd(d []byte, i, depth int) int {
	if depth >= maxDepth {
		return -1
	}
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1
	}
	for {
		if i = valueEnd(d, i, depth+1); i < 0 {
			return -1
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return -1
		}
		if d[i] == ']' {
			return i + 1
		}
		if d[i] != ',' {
			return -1
		}
		i = skipWS(d, i+1)
	}
}

func literal(d []byte, i int, lit string) int {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// numberEnd returns the index just past the number at d[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func numberEnd(d []byte, i int) int {
	digits := func(i int) int {
		j := i
		for j < len(d) && d[j] >= '0' && d[j] <= '9' {
			j++
		}
		return j
	}
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(i + 1)
	default:
		return -1
	}
	if i < len(d) && d[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func hex4(b []byte) (rune, bool) {
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

// Plain returns the content of a JSON string value (a checked value from
// Members or Elements) without its quotes, when it has no escapes and is
// valid UTF-8: the bytes encoding/json would decode it to, without a copy.
// ok is false otherwise (decode it with String).
func Plain(val []byte) ([]byte, bool) {
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return nil, false
	}
	inner := val[1 : len(val)-1]
	if bytes.IndexByte(inner, '"') >= 0 || bytes.IndexByte(inner, '\\') >= 0 || !noCtl(inner) {
		return nil, false
	}
	if !utf8.Valid(inner) {
		return nil, false // encoding/json would substitute U+FFFD
	}
	return inner, true
}

// String decodes a JSON string value exactly as encoding/json decodes it
// into a Go string; ok is false for anything else (a value that is not a
// well-formed string, invalid UTF-8, which encoding/json replaces).
func String(val []byte) (string, bool) {
	if p, ok := Plain(val); ok {
		return string(p), true
	}
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return "", false
	}
	in := val[1 : len(val)-1]
	if !utf8.Valid(in) {
		return "", false
	}
	var out strings.Builder
	out.Grow(len(in))
	for len(in) > 0 {
		// The run up to the next escape is copied as it is.
		run := in
		if k := bytes.IndexByte(in, '\\'); k >= 0 {
			run = in[:k]
		}
		if bytes.IndexByte(run, '"') >= 0 || !noCtl(run) {
			return "", false
		}
		out.Write(run)
		in = in[len(run):]
		if len(in) == 0 {
			break
		}
		if len(in) < 2 {
			return "", false
		}
		n := 2
		switch in[1] {
		case '"', '\\', '/':
			out.WriteByte(in[1])
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			var r rune
			if r, n = unicodeEscape(in); n == 0 {
				return "", false
			}
			out.WriteRune(r)
		default:
			return "", false
		}
		in = in[n:]
	}
	return out.String(), true
}

// unicodeEscape decodes \uXXXX (and a following low surrogate) at the start
// of in as encoding/json does, returning the rune and the bytes used (0
// when malformed).
func unicodeEscape(in []byte) (rune, int) {
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

// Int decodes a JSON number value into an int as encoding/json does; ok
// is false for anything encoding/json would refuse (a fraction, an
// exponent, out of range) and for anything that is not a number.
func Int(val []byte) (int, bool) {
	if len(val) == 0 || numberEnd(val, 0) != len(val) {
		return 0, false
	}
	n, err := strconv.Atoi(string(val))
	return n, err == nil
}
