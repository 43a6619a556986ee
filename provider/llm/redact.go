package llm

import (
	"context"
	"errors"
	"strings"
	"unsafe"

	"github.com/warren-dev/warren/internal/sse"
	"github.com/warren-dev/warren/provider"
)

// The key redactor (SPEC 7, "Keys"; issue 31 D1). A server may echo the
// key it received anywhere: in the reason phrase of its status line, a
// header (a redirect's Location), an HTML page, an error object's type or
// code, an error event, streamed text or a tool call's arguments. So
// everything a request exchange produces (the error, the step's text and
// calls, the streamed deltas) leaves post through one redactor that knows
// the key (redactor.step, redactor.error, redactor.stream), and nothing
// the server sent reaches an error text, a log field, an event or a result
// any other way.
//
// The rule: every run of text that stands for a substring of the key at
// least minRedact (8) bytes long is replaced by keyMark. Every substring,
// not only the whole key or its prefixes: a snippet bound cuts a key
// anywhere (a 200-byte snippet left its first 23 characters), so a prefix
// or a suffix remains, and a field of fixed width can keep a middle. Eight
// characters of a random key are about 48 bits a search no longer has to
// find, and no honest text needs eight consecutive characters of the key,
// while a shorter bound would eat ordinary words. A key shorter than 8
// bytes is redacted only whole, and one shorter than 4 bytes not at all
// (it would take any word with it, and such a key is no secret anyway).
//
// "Stands for" covers the forms an echo takes on its way here: the raw
// bytes; JSON string escapes (\u0073, \x73, \/) at any escaping depth up
// to maxBackslashes (an error message quoted inside another JSON string
// gives \\u0073); percent-encoding, upper or lower case, encoded again up
// to three times (%2573) (a URL in a Location header); and HTML numeric
// character references (&#115; &#x73;) (an error page). Escapes are
// decoded for the key's ASCII characters; API keys are ASCII.
//
// Not base64: nothing in this package encodes or decodes base64, and the
// key goes out as itself (Authorization: Bearer KEY, x-api-key: KEY), so an
// echo of what was sent never shows it base64-encoded. A server that
// deliberately encodes the key (base64, reversed, one character per line)
// defeats any redactor, and it holds the key already; what the redactor
// stops is the key reaching this daemon's disk and output through an echo.

// minRedact is the shortest run of the key that is redacted.
const minRedact = 8

// keyMark replaces a redacted run.
const keyMark = "[key]"

// maxBackslashes is the deepest JSON escaping recognised (a backslash run
// longer than this is taken literally).
const maxBackslashes = 8

// maxPercent is how many times a percent-encoding may be encoded again.
const maxPercent = 3

// maxUnit bounds the text one decoded character can take (a \u escape
// behind maxBackslashes backslashes; &#0000115; and %25252573 are
// shorter).
const maxUnit = maxBackslashes + 5

// redactor redacts one key. The zero value and a redactor of a short key
// redact nothing.
type redactor struct {
	key string
	// w is the window: min(len(key), minRedact); 0 when inactive.
	w int
	// grams holds every w-byte window of the key, packed little-endian.
	grams map[uint64]struct{}
	// pairs marks the byte pairs that occur in the key, a quick filter.
	pairs []uint64
}

// newRedactor returns the redactor of key.
func newRedactor(key string) *redactor {
	r := &redactor{key: key}
	if len(key) < 4 {
		return r
	}
	r.w = min(len(key), minRedact)
	r.grams = make(map[uint64]struct{}, len(key)-r.w+1)
	for i := 0; i+r.w <= len(key); i++ {
		r.grams[pack(key[i:i+r.w])] = struct{}{}
	}
	r.pairs = make([]uint64, 65536/64)
	for i := 0; i+1 < len(key); i++ {
		p := uint(key[i])<<8 | uint(key[i+1])
		r.pairs[p/64] |= 1 << (p % 64)
	}
	return r
}

func pack(s string) uint64 {
	var v uint64
	for i := 0; i < len(s); i++ {
		v |= uint64(s[i]) << (8 * i)
	}
	return v
}

func (r *redactor) active() bool { return r != nil && r.w > 0 }

func (r *redactor) pair(a, b byte) bool {
	p := uint(a)<<8 | uint(b)
	return r.pairs[p/64]&(1<<(p%64)) != 0
}

// String returns s with every run standing for a substring of the key of
// minRedact bytes or more replaced by keyMark.
func (r *redactor) String(s string) string {
	if !r.active() || len(s) == 0 {
		return s
	}
	marks := r.marks(s, 0)
	if len(marks) == 0 {
		return s
	}
	return apply(s, marks, len(s), false)
}

// span is a redacted range [from, to) of a text.
type span struct{ from, to int }

// marks returns the merged ranges of s to redact, in order; [0, forced)
// is redacted whatever it holds (a stream's carried text that was part of
// a match).
func (r *redactor) marks(s string, forced int) []span {
	var out []span
	add := func(from, to int) {
		if n := len(out); n > 0 && from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, to)
			return
		}
		out = append(out, span{from, to})
	}
	if forced > 0 {
		add(0, forced)
	}
	w := r.w
	// Raw windows: the key's bytes as they are.
	for i := 0; i+w <= len(s); i++ {
		if w >= 2 && !r.pair(s[i], s[i+1]) {
			continue
		}
		if _, ok := r.grams[pack(s[i:i+w])]; ok {
			add(i, i+w)
		}
	}
	if strings.IndexAny(s, `\%&`) < 0 {
		return out
	}
	// Decoded windows: those holding an escape (a window whose first w
	// bytes hold none is a raw window, checked above).
	var buf [minRedact]byte
	var found []span
	esc := nextEscape(s, 0)
	for i := 0; i < len(s) && esc >= 0; i++ {
		if esc < i {
			if esc = nextEscape(s, i); esc < 0 {
				break
			}
		}
		if esc-i >= w {
			i = esc - w // the loop's i++ makes it the first window holding esc
			continue
		}
		end, n, _ := r.decode(s, i, buf[:w], true)
		if n < w {
			continue
		}
		if _, ok := r.grams[pack(string(buf[:w]))]; ok {
			found = append(found, span{i, end})
		}
	}
	if len(found) == 0 {
		return out
	}
	// Merge the two lists, each ordered by start.
	raw := out
	out = nil
	for len(raw) > 0 || len(found) > 0 {
		if len(found) == 0 || len(raw) > 0 && raw[0].from <= found[0].from {
			add(raw[0].from, raw[0].to)
			raw = raw[1:]
		} else {
			add(found[0].from, found[0].to)
			found = found[1:]
		}
	}
	return out
}

func nextEscape(s string, from int) int {
	if from >= len(s) {
		return -1
	}
	i := strings.IndexAny(s[from:], `\%&`)
	if i < 0 {
		return -1
	}
	return from + i
}

// decode decodes up to len(out) characters of s from i into out, as long
// as what it decoded is a substring of the key (nothing else can be part
// of a run of it): it returns the end of the text read, the number of
// bytes decoded, and open: the text ended before len(out) characters,
// inside an escape or not (a stream's next delta may complete them). final
// says s ends there for good: an escape cut by its end is read as far as
// it goes (&#45 is '-'). A character that is not ASCII once decoded ends
// the decoding (n stays short, open false).
func (r *redactor) decode(s string, i int, out []byte, final bool) (end, n int, open bool) {
	for n < len(out) {
		if i >= len(s) {
			return i, n, true
		}
		c, size, ok, partial := unit(s, i)
		if partial {
			if !final {
				return i, n, true
			}
			c, size, ok = unitAtEnd(s, i)
		}
		if !ok {
			return i, n, false
		}
		out[n] = c
		n++
		i += size
		if !strings.Contains(r.key, unsafeString(out[:n])) {
			return i, n, false
		}
	}
	return i, n, false
}

// unsafeString views b as a string without copying (b is not changed
// while the string is used).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// unitAtEnd decodes the character at s[i] when the text ends inside what
// may be an escape: a character reference without its end is read (&#45),
// a percent-encoded percent sign is one (%25), anything else stands for
// itself.
func unitAtEnd(s string, i int) (c byte, size int, ok bool) {
	rest := s[i:]
	switch {
	case strings.HasPrefix(rest, "&#x") || strings.HasPrefix(rest, "&#X"):
		if v, hok := hexValue(rest[3:]); hok && len(rest) > 3 {
			return byte(v), len(rest), v < 0x80
		}
	case strings.HasPrefix(rest, "&#") && len(rest) > 2:
		v := 0
		for j := 2; j < len(rest); j++ {
			d, dok := digit(rest[j], false)
			if !dok {
				return s[i], 1, true
			}
			v = v*10 + d
		}
		return byte(v), len(rest), v < 0x80
	case rest[0] == '%' && len(rest) >= 3:
		// %25 (or %2525...) and nothing after it.
		if v, hok := hexValue(rest[1:3]); hok && v == '%' {
			return '%', 3, true
		}
	}
	return s[i], 1, true
}

// unit decodes the character at s[i]: its byte, the length of its text,
// ok false when it is not ASCII, partial when s ends inside what may be an
// escape.
func unit(s string, i int) (c byte, size int, ok, partial bool) {
	switch s[i] {
	case '\\':
		return unitBackslash(s, i)
	case '%':
		return unitPercent(s, i)
	case '&':
		return unitEntity(s, i)
	}
	return s[i], 1, true, false
}

// unitBackslash decodes a JSON escape (\uXXXX, \xXX, \/, \", \') behind
// up to maxBackslashes backslashes; any other backslash is itself.
func unitBackslash(s string, i int) (c byte, size int, ok, partial bool) {
	j := i
	for j < len(s) && s[j] == '\\' && j-i < maxBackslashes {
		j++
	}
	if j >= len(s) {
		return 0, 0, false, true
	}
	digits := 0
	switch s[j] {
	case 'u', 'U':
		digits = 4
	case 'x':
		digits = 2
	case '/', '"', '\'':
		return s[j], j + 1 - i, true, false
	default:
		return '\\', 1, true, false
	}
	if j+1+digits > len(s) {
		if allHex(s[j+1:]) {
			return 0, 0, false, true
		}
		return '\\', 1, true, false
	}
	v, hok := hexValue(s[j+1 : j+1+digits])
	if !hok {
		return '\\', 1, true, false
	}
	return byte(v), j + 1 + digits - i, v < 0x80, false
}

// unitPercent decodes %XX, encoded again up to maxPercent times
// (%2573); any other '%' is itself.
func unitPercent(s string, i int) (c byte, size int, ok, partial bool) {
	j := i + 1
	for level := 0; ; level++ {
		if j+2 > len(s) {
			if allHex(s[j:]) {
				return 0, 0, false, true
			}
			return '%', 1, true, false
		}
		v, hok := hexValue(s[j : j+2])
		if !hok {
			return '%', 1, true, false
		}
		j += 2
		again := v == '%' && level < maxPercent
		switch {
		case again && j < len(s) && isHex(s[j]):
			continue
		case again && j == len(s):
			return 0, 0, false, true
		}
		return byte(v), j - i, v < 0x80, false
	}
}

// unitEntity decodes an HTML numeric character reference, &#NNN; or
// &#xHH; (the ';' may be missing); any other '&' is itself.
func unitEntity(s string, i int) (c byte, size int, ok, partial bool) {
	j := i + 1
	if j >= len(s) {
		return 0, 0, false, true
	}
	if s[j] != '#' {
		return '&', 1, true, false
	}
	j++
	hex := j < len(s) && (s[j] == 'x' || s[j] == 'X')
	if hex {
		j++
	}
	start := j
	v := 0
	for j < len(s) && j-start < 7 {
		d, dok := digit(s[j], hex)
		if !dok {
			break
		}
		v = v*base(hex) + d
		j++
	}
	switch {
	case j == len(s):
		return 0, 0, false, true
	case j == start:
		return '&', 1, true, false
	case s[j] == ';':
		j++
	}
	return byte(v), j - i, v < 0x80, false
}

func base(hex bool) int {
	if hex {
		return 16
	}
	return 10
}

func digit(c byte, hex bool) (int, bool) {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0'), true
	case hex && c >= 'a' && c <= 'f':
		return int(c-'a') + 10, true
	case hex && c >= 'A' && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

func isHex(c byte) bool { _, ok := digit(c, true); return ok }

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

func hexValue(s string) (int, bool) {
	v := 0
	for i := 0; i < len(s); i++ {
		d, ok := digit(s[i], true)
		if !ok {
			return 0, false
		}
		v = v*16 + d
	}
	return v, true
}

// apply returns s[:upto] with the marked ranges replaced by keyMark
// (clipped at upto); skipFirst leaves out the mark of a range starting at
// 0 (a stream whose last output was already a mark).
func apply(s string, marks []span, upto int, skipFirst bool) string {
	if len(marks) == 0 || marks[0].from >= upto {
		return s[:upto]
	}
	var b strings.Builder
	b.Grow(upto)
	at := 0
	for _, m := range marks {
		if m.from >= upto {
			break
		}
		b.WriteString(s[at:m.from])
		if !(skipFirst && m.from == 0) {
			b.WriteString(keyMark)
		}
		at = min(m.to, upto)
	}
	if at < upto {
		b.WriteString(s[at:upto])
	}
	return b.String()
}

// step redacts a step's text and its calls (ids, names, arguments).
func (r *redactor) step(st Step) Step {
	if !r.active() {
		return st
	}
	st.Text = r.String(st.Text)
	st.StopReason = r.String(st.StopReason)
	for i := range st.Calls {
		c := &st.Calls[i]
		c.ID, c.Name, c.Args = r.String(c.ID), r.String(c.Name), r.String(c.Args)
	}
	return st
}

// sentinels are the errors callers test with errors.Is; a redacted error
// keeps those its original wrapped (their texts are fixed, never the
// server's).
var sentinels = []error{
	ErrStreamCut, ErrMalformed, ErrNoKey, ErrContextLength, ErrIdle, ErrTooLarge, ErrTooManySteps,
	ErrResponseTooLong, ErrTurnTooLarge, errRedirect, sse.ErrLineTooLong,
	context.Canceled, context.DeadlineExceeded, provider.ErrRunSuspended, provider.ErrCannotRestore,
}

// redactedError is an error whose text was redacted; it wraps only the
// sentinels (and the classification) of the original, so no unwrapping
// reaches a text the server wrote.
type redactedError struct {
	text string
	wrap []error
}

func (e *redactedError) Error() string   { return e.text }
func (e *redactedError) Unwrap() []error { return e.wrap }

// error returns err with its text redacted: a provider.Error keeps its
// class and Retry-After, and the sentinels it wrapped stay testable.
func (r *redactor) error(err error) error {
	if err == nil || !r.active() {
		return err
	}
	if pe, ok := err.(*provider.Error); ok {
		return &provider.Error{Transient: pe.Transient, RetryAfter: pe.RetryAfter, Err: r.error(pe.Err)}
	}
	out := &redactedError{text: r.String(err.Error())}
	var pe *provider.Error
	if errors.As(err, &pe) {
		out.wrap = append(out.wrap, &provider.Error{Transient: pe.Transient, RetryAfter: pe.RetryAfter,
			Err: &redactedError{text: r.String(pe.Err.Error())}})
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			out.wrap = append(out.wrap, s)
		}
	}
	return out
}

// stream redacts streamed text on its way to a client: a delta's tail
// that may be the start of a key run is held back until the next delta
// (or flush) shows whether it is, so a key sent a few characters per
// delta is redacted too.
type stream struct {
	r     *redactor
	out   func(string)
	carry string
	// forced is how much of carry a match already covered.
	forced int
	// marked: the last text given to out ended with a mark.
	marked bool
}

func (r *redactor) stream(out func(string)) *stream {
	return &stream{r: r, out: out}
}

// Write takes one delta.
func (st *stream) Write(t string) {
	if !st.r.active() {
		st.out(t)
		return
	}
	buf := t
	if st.carry != "" {
		buf = st.carry + t
	}
	marks := st.r.marks(buf, st.forced)
	h := st.hold(buf)
	st.emit(buf, marks, h)
}

// Flush gives out what is held back (the stream ended).
func (st *stream) Flush() {
	if !st.r.active() || st.carry == "" {
		return
	}
	buf := st.carry
	st.emit(buf, st.r.marks(buf, st.forced), len(buf))
}

func (st *stream) emit(buf string, marks []span, h int) {
	if h == 0 {
		// Nothing can go out yet: all of it waits, with what a match
		// already covers.
		st.carry, st.forced = buf, 0
		if len(marks) > 0 && marks[0].from == 0 {
			st.forced = marks[0].to
		}
		return
	}
	text := apply(buf, marks, h, st.marked)
	endsMarked, forced := false, 0
	for _, m := range marks {
		if m.from < h && m.to >= h {
			endsMarked, forced = true, m.to-h
		}
	}
	st.carry, st.forced, st.marked = buf[h:], forced, endsMarked
	if text != "" {
		st.out(text)
	}
}

// hold returns where the text that must wait for the next delta begins:
// the first position from which the rest of buf stands for fewer than w
// characters that are all a substring of the key, or ends inside an
// escape.
func (st *stream) hold(buf string) int {
	r := st.r
	from := max(0, len(buf)-r.w*maxUnit)
	if strings.IndexAny(buf[from:], `\%&`) < 0 {
		// No escape: only the last w-1 bytes can begin an open run.
		for p := max(0, len(buf)-r.w+1); p < len(buf); p++ {
			if strings.Contains(r.key, buf[p:]) {
				return p
			}
		}
		return len(buf)
	}
	var dec [minRedact]byte
	for p := from; p < len(buf); p++ {
		if len(buf)-p < r.w && strings.Contains(r.key, buf[p:]) {
			return p
		}
		if _, _, open := r.decode(buf, p, dec[:r.w], false); open {
			return p // what it decoded is a substring of the key
		}
	}
	return len(buf)
}
