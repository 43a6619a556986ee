package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"time"
	"unicode/utf8"
)

// Entry is one decoded log line.
type Entry struct {
	Seq   uint64
	TS    time.Time
	Event string
	Data  json.RawMessage
	// Off is the byte offset of the line in the log file when the reader
	// or writer knows it: set by eventlog's Append, readers and Open's
	// Replay of the log's lines and of the records it replays from the pending file. It
	// is a hint: readers of one entry check the seq they find there.
	Off int64
}

// Record is one entry to append: an event name and its data, which must
// marshal to a JSON object (nil means {}).
type Record struct {
	Event string
	Data  any
}

const (
	tsLayout  = "2006-01-02T15:04:05.000Z"
	crcPrefix = `,"crc":"`
	// crcSuffixLen is len(`,"crc":"`) + 8 hex digits + len(`"}`).
	crcSuffixLen = len(crcPrefix) + 8 + 2
	linePrefix   = `{"seq":`
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Prepared is a record validated and marshalled by Prepare, so that the
// committer only formats lines (AppendLine). Its fields are read-only.
type Prepared struct {
	// Event is the record's event name and Data its data, compact JSON.
	Event string
	Data  json.RawMessage
	evJS  []byte
}

// Prepare checks r as an appended record must be (ErrInvalidRecord: an
// empty or non-UTF-8 event name, data that does not marshal to a JSON
// object, a line that would be over limit bytes) and marshals it.
func Prepare(r Record, limit int) (Prepared, error) {
	if r.Event == "" {
		return Prepared{}, fmt.Errorf("%w: event name is empty", ErrInvalidRecord)
	}
	if !utf8.ValidString(r.Event) {
		return Prepared{}, fmt.Errorf("%w: event name %q is not valid UTF-8", ErrInvalidRecord, r.Event)
	}
	evJS, err := json.Marshal(r.Event)
	if err != nil {
		return Prepared{}, fmt.Errorf("%w: event name %q: %w", ErrInvalidRecord, r.Event, err)
	}
	var data []byte
	if r.Data == nil {
		data = []byte("{}")
	} else {
		data, err = json.Marshal(r.Data)
		if err != nil {
			return Prepared{}, fmt.Errorf("%w: data of event %q does not marshal to JSON: %w", ErrInvalidRecord, r.Event, err)
		}
		if len(data) == 0 || data[0] != '{' {
			return Prepared{}, fmt.Errorf("%w: data of event %q must be a JSON object, got %.40s", ErrInvalidRecord, r.Event, data)
		}
		if bytes.IndexByte(data, '\n') >= 0 {
			var c bytes.Buffer
			if err := json.Compact(&c, data); err != nil {
				return Prepared{}, fmt.Errorf("%w: data of event %q: %w", ErrInvalidRecord, r.Event, err)
			}
			data = c.Bytes()
		}
	}
	// seq (20 digits) + ts (24) + fixed punctuation stays under 128 bytes.
	if n := len(evJS) + len(data) + 128; n > limit {
		return Prepared{}, fmt.Errorf("%w: event %q is about %d bytes, over the %d-byte line limit; store large payloads elsewhere and log a reference", ErrInvalidRecord, r.Event, n, limit)
	}
	return Prepared{Event: r.Event, Data: data, evJS: evJS}, nil
}

// AppendLine appends one complete line (with its CRC and newline) to dst.
func AppendLine(dst []byte, seq uint64, ts time.Time, p *Prepared) []byte {
	start := len(dst)
	dst = append(dst, linePrefix...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, `,"ts":"`...)
	dst = ts.UTC().AppendFormat(dst, tsLayout)
	dst = append(dst, `","event":`...)
	dst = append(dst, p.evJS...)
	dst = append(dst, `,"data":`...)
	dst = append(dst, p.Data...)
	sum := crc32.Checksum(dst[start:], castagnoli)
	dst = append(dst, crcPrefix...)
	dst = appendHex32(dst, sum)
	return append(dst, '"', '}', '\n')
}

func appendHex32(dst []byte, v uint32) []byte {
	const hex = "0123456789abcdef"
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hex[(v>>uint(shift))&0xf])
	}
	return dst
}

func parseHex32(b []byte) (uint32, bool) {
	if len(b) != 8 {
		return 0, false
	}
	// By table, without a branch per digit (recovery reads one per line).
	var v uint32
	var bad byte
	for _, c := range b {
		x := hexDigit[c]
		bad |= x
		v = v<<4 | uint32(x&0x0f)
	}
	return v, bad&0xf0 == 0
}

// hexDigit is the value of each lowercase hex digit; 0xff for any other
// byte.
var hexDigit = func() (t [256]byte) {
	for c := range t {
		switch {
		case c >= '0' && c <= '9':
			t[c] = byte(c - '0')
		case c >= 'a' && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		default:
			t[c] = 0xff
		}
	}
	return t
}()

// errBadCRC marks a line that fails the framing or CRC check: a torn-tail
// candidate. Any other parse error is for a line whose CRC matched, which
// can only be corruption.
var errBadCRC = errors.New("missing or mismatched crc")

// lineFields is the JSON shape of a line. Unknown fields are ignored.
type lineFields struct {
	Seq   *uint64         `json:"seq"`
	TS    *string         `json:"ts"`
	Event *string         `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// ParseLine decodes one line without its trailing newline. It returns
// errBadCRC (possibly wrapped) when the CRC framing does not check out, and
// another error when the CRC matches but the content is invalid.
func ParseLine(line []byte) (Entry, error) { return parseLineMode(line, lineMode{}) }

// parseLineMode is ParseLine; m says what a line in the writer's layout
// keeps (see lineMode). A line in another layout is always decoded in full.
func parseLineMode(line []byte, m lineMode) (Entry, error) {
	n := len(line)
	if n < len(linePrefix)+crcSuffixLen+2 {
		return Entry{}, fmt.Errorf("%w: line too short (%d bytes)", errBadCRC, n)
	}
	body := line[:n-crcSuffixLen]
	tail := line[n-crcSuffixLen:]
	if string(tail[:len(crcPrefix)]) != crcPrefix || tail[len(tail)-2] != '"' || tail[len(tail)-1] != '}' {
		return Entry{}, fmt.Errorf("%w: line does not end in ,\"crc\":\"xxxxxxxx\"}", errBadCRC)
	}
	want, ok := parseHex32(tail[len(crcPrefix) : len(crcPrefix)+8])
	if !ok {
		return Entry{}, fmt.Errorf("%w: crc is not 8 lowercase hex digits", errBadCRC)
	}
	if got := crc32.Checksum(body, castagnoli); got != want {
		return Entry{}, fmt.Errorf("%w: crc is %08x, line content hashes to %08x", errBadCRC, want, got)
	}
	// From here on the CRC matched: any problem is corruption, not a tear.
	if !utf8.Valid(line) {
		return Entry{}, errors.New("line has a valid crc but is not valid UTF-8")
	}
	if !bytes.HasPrefix(body, []byte(linePrefix)) {
		return Entry{}, errors.New(`line has a valid crc but does not start with {"seq":`)
	}
	if e, ok := parseWriterLayout(body, m); ok {
		return e, nil
	}
	return parseLineJSON(line)
}

// parseLineJSON decodes a line whose CRC matched with encoding/json: the
// general parser, for any layout.
func parseLineJSON(line []byte) (Entry, error) {
	var f lineFields
	if err := json.Unmarshal(line, &f); err != nil {
		return Entry{}, fmt.Errorf("line has a valid crc but is not a JSON object: %w", err)
	}
	if f.Seq == nil || f.TS == nil || f.Event == nil || f.Data == nil {
		return Entry{}, errors.New("line has a valid crc but lacks one of seq, ts, event, data")
	}
	if *f.Seq == 0 {
		return Entry{}, errors.New("line has a valid crc but seq 0 (seqs start at 1)")
	}
	if *f.Event == "" {
		return Entry{}, errors.New("line has a valid crc but an empty event name")
	}
	if f.Data[0] != '{' {
		return Entry{}, errors.New("line has a valid crc but its data is not a JSON object")
	}
	ts, err := time.Parse(time.RFC3339Nano, *f.TS)
	if err != nil {
		return Entry{}, fmt.Errorf("line has a valid crc but a bad ts: %w", err)
	}
	return Entry{Seq: *f.Seq, TS: ts.UTC(), Event: *f.Event, Data: f.Data}, nil
}
