package record

import (
	"bytes"
	"encoding/json"
	"time"
)

// The positional parser of the writer's own line layout, the path every
// line of every log takes at recovery. It accepts a subset of what the
// general parser (encoding/json, time.Parse) accepts and gives the same
// entry for it; anything else it reports false for, and parseLineMode
// falls back to the general parser. FuzzWriterLayout checks both claims.

// lineMode says what parseLineMode keeps of a line.
type lineMode struct {
	// check keeps nothing: the entry's Data is the caller's buffer and
	// its Event is empty (for Verify).
	check bool
	// borrow makes Data alias the line instead of a copy (valid until the
	// scanner reads on).
	borrow bool
	// names interns event names (nil: each is a new string).
	names *nameTable
	// ts remembers the last second parsed (nil: none).
	ts *tsCache
}

// tsCache is the last timestamp's second, as text and as a time: a log's
// consecutive lines are mostly written in the same second, and
// time.Date is a good part of a line's framing.
type tsCache struct {
	sec  [19]byte // "2006-01-02T15:04:05"
	t    time.Time
	have bool
}

// parse is parseTS, through the cache (nil c: parseTS).
func (c *tsCache) parse(b []byte) (time.Time, bool) {
	if c == nil {
		return parseTS(b)
	}
	if c.have && tsShape(b) && string(b[:19]) == string(c.sec[:]) {
		milli, ok := decimal(b[20:23])
		if !ok {
			return time.Time{}, false
		}
		return c.t.Add(time.Duration(milli) * time.Millisecond), true
	}
	t, ok := parseTS(b)
	if ok {
		copy(c.sec[:], b[:19])
		c.t, c.have = t.Truncate(time.Second), true
	}
	return t, ok
}

// nameTable interns event names: a log holds a few dozen distinct ones,
// and a string per line is most of what the framing allocates.
type nameTable struct {
	m map[string]string
	// slots holds names by a hash of their length, middle and last
	// bytes (which gives the schema's common events a slot each), looked
	// at before the map: most lines find their name with one comparison.
	slots [32]string
}

// maxNames bounds a nameTable; names past it are not interned.
const maxNames = 256

func (t *nameTable) intern(b []byte) string {
	slot := &t.slots[(len(b)*11+int(b[len(b)-1])+4*int(b[len(b)/2]))&31]
	if *slot == string(b) {
		return *slot
	}
	if s, ok := t.m[string(b)]; ok {
		*slot = s
		return s
	}
	s := string(b)
	if len(t.m) < maxNames {
		if t.m == nil {
			t.m = make(map[string]string, 32)
		}
		t.m[s] = s
		*slot = s
	}
	return s
}

// parseWriterLayout decodes, by position, a line body (without the crc
// suffix) in exactly the layout this package writes:
//
//	{"seq":N,"ts":"2006-01-02T15:04:05.000Z","event":"name","data":{...}
//
// with an event name free of escapes and control characters. It reports
// false for anything else, and the caller falls back to a full JSON
// decode. The data object is not re-validated here (the CRC matched and
// readers decode it); a non-object data is refused.
func parseWriterLayout(body []byte, m lineMode) (Entry, bool) {
	seq, rest, ok := parseSeq(body[len(linePrefix):])
	if !ok {
		return Entry{}, false
	}
	const tsKey = `,"ts":"`
	if !bytes.HasPrefix(rest, []byte(tsKey)) || len(rest) < len(tsKey)+len(tsLayout)+1 {
		return Entry{}, false
	}
	rest = rest[len(tsKey):]
	ts, ok := m.ts.parse(rest[:len(tsLayout)])
	if !ok {
		return Entry{}, false
	}
	rest = rest[len(tsLayout):]
	const evKey = `","event":"`
	if !bytes.HasPrefix(rest, []byte(evKey)) {
		return Entry{}, false
	}
	rest = rest[len(evKey):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 {
		return Entry{}, false
	}
	evb := rest[:end]
	for _, c := range evb {
		// encoding/json refuses control characters in a string and
		// decodes escapes: both are for the general parser.
		if c < 0x20 || c == '\\' {
			return Entry{}, false
		}
	}
	rest = rest[end:]
	const dataKey = `","data":`
	if !bytes.HasPrefix(rest, []byte(dataKey)) {
		return Entry{}, false
	}
	data := rest[len(dataKey):]
	if len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' {
		return Entry{}, false
	}
	if m.check {
		return Entry{Seq: seq, TS: ts, Data: data}, true
	}
	var ev string
	if m.names != nil {
		ev = m.names.intern(evb)
	} else {
		ev = string(evb)
	}
	if !m.borrow {
		// A copy: line is the scanner's buffer, which the next read reuses.
		data = append(json.RawMessage(nil), data...)
	}
	return Entry{Seq: seq, TS: ts, Event: ev, Data: data}, true
}

// parseSeq reads the sequence number at the start of b as the writer
// writes it (1 to 19 digits, no leading zero, not 0) and returns it with
// the rest of b; false for anything else.
func parseSeq(b []byte) (seq uint64, rest []byte, ok bool) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if i > 18 {
			return 0, nil, false
		}
		seq = seq*10 + uint64(b[i]-'0')
		i++
	}
	if i == 0 || seq == 0 || b[0] == '0' {
		return 0, nil, false
	}
	return seq, b[i:], true
}

// parseTS parses a timestamp in tsLayout ("2006-01-02T15:04:05.000Z") as
// time.Parse(tsLayout, ...) would, without its generality: false for
// anything time.Parse refuses (an out-of-range field) and for anything
// else it would accept but that the writer never writes.
func parseTS(b []byte) (time.Time, bool) {
	if !tsShape(b) {
		return time.Time{}, false
	}
	year, ok1 := decimal(b[0:4])
	month, ok2 := decimal(b[5:7])
	day, ok3 := decimal(b[8:10])
	hour, ok4 := decimal(b[11:13])
	minute, ok5 := decimal(b[14:16])
	sec, ok6 := decimal(b[17:19])
	milli, ok7 := decimal(b[20:23])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || !validDateTime(year, month, day, hour, minute, sec) {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, milli*1e6, time.UTC), true
}

// tsShape reports whether b has tsLayout's length and separators.
func tsShape(b []byte) bool {
	return len(b) == len(tsLayout) && b[4] == '-' && b[7] == '-' && b[10] == 'T' &&
		b[13] == ':' && b[16] == ':' && b[19] == '.' && b[23] == 'Z'
}

// decimal is the value of b, all ASCII digits; false otherwise.
func decimal(b []byte) (int, bool) {
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// validDateTime reports whether the fields are in range, as time.Parse
// checks them (the year's range is that of four digits).
func validDateTime(year, month, day, hour, minute, sec int) bool {
	return month >= 1 && month <= 12 && day >= 1 && day <= daysIn(month, year) && hour <= 23 && minute <= 59 && sec <= 59
}

// daysIn is the number of days of month in year (proleptic Gregorian).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
