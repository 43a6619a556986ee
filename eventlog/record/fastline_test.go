package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"
)

// withCRC completes a line body (without the crc suffix) as the writer
// would, without the newline.
func withCRC(body []byte) []byte {
	line := append([]byte(nil), body...)
	line = append(line, crcPrefix...)
	line = appendHex32(line, crc32.Checksum(body, castagnoli))
	return append(line, '"', '}')
}

// FuzzWriterLayout checks the positional parser against the general one
// (encoding/json and time.Parse) on arbitrary line bodies with a valid
// CRC: whatever it accepts, the general parser accepts as the same entry,
// in every mode (copied, borrowed, interned). Its one documented leniency
// is data: it takes the bytes between "data": and the crc suffix as given
// when they are braced, and leaves their validation to the readers that
// decode them (the CRC covers them); there the general parser may refuse
// what it accepted, but only when the data is not valid JSON.
func FuzzWriterLayout(f *testing.F) {
	for i, ev := range []string{"turn.start", "message.enqueued", "x"} {
		p, err := Prepare(Record{Event: ev, Data: map[string]any{"run_id": "ab", "n": i, "s": "é\"\n"}}, MaxLineBytes)
		if err != nil {
			f.Fatal(err)
		}
		line := AppendLine(nil, uint64(i+1), time.Date(2026, 2, 28, 23, 59, 59, 999e6, time.UTC), &p)
		f.Add(line[:len(line)-1-crcSuffixLen])
	}
	f.Add([]byte(`{"seq":7,"ts":"2024-02-29T00:00:00.000Z","event":"e\u0001","data":{}`))
	f.Add([]byte(`{"seq":7,"ts":"2023-02-29T00:00:00.000Z","event":"e","data":{}`))
	f.Add([]byte(`{"seq":7,"ts":"2023-12-31T24:00:00.000Z","event":"e","data":{}`))
	f.Add([]byte(`{"seq":7,"ts":"2023-12-31T23:00:60.000Z","event":"e","data":{"a":[}`))
	f.Add([]byte("{\"seq\":7,\"ts\":\"2023-12-31T23:00:00.000Z\",\"event\":\"e\x01\",\"data\":{}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !bytes.HasPrefix(body, []byte(linePrefix)) || !utf8.Valid(body) {
			return // refused before either parser runs (parseLineMode)
		}
		line := withCRC(body)
		general, gerr := parseLineJSON(line)
		var names nameTable
		var ts tsCache // the second use of it finds the line's own second
		for _, m := range []lineMode{{}, {borrow: true}, {names: &names}, {borrow: true, names: &names}, {ts: &ts}, {ts: &ts}} {
			fast, ok := parseWriterLayout(body, m)
			if !ok {
				continue
			}
			if gerr != nil {
				if json.Valid(fast.Data) {
					t.Fatalf("mode %+v: the positional parser accepted %q as %+v; the general one refuses it: %v", m, body, fast, gerr)
				}
				continue
			}
			if !reflect.DeepEqual(fast, general) {
				t.Fatalf("mode %+v: positional %+v != general %+v for %q", m, fast, general, body)
			}
			full, err := parseLineMode(line, m)
			if err != nil || !reflect.DeepEqual(full, general) {
				t.Fatalf("mode %+v: parseLineMode gives %+v, %v; want %+v", m, full, err, general)
			}
		}
	})
}

// FuzzParseTS checks the timestamp parser against time.Parse: what it
// accepts, time.Parse accepts (in the writer's layout and as RFC 3339) as
// the same time.
func FuzzParseTS(f *testing.F) {
	for _, s := range []string{"2026-01-02T03:04:05.006Z", "2024-02-29T23:59:59.999Z", "2023-02-29T00:00:00.000Z",
		"0000-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z", "2026-13-01T00:00:00.000Z", "2026-01-01T00:00:60.000Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fast, ok := parseTS([]byte(s))
		want, err := time.Parse(tsLayout, s)
		if !ok {
			if err == nil && want.Format(tsLayout) == s {
				// A timestamp as the writer makes it: the fast parser
				// must take it (or recovery pays the slow path for it).
				t.Fatalf("parseTS refused %q, which time.Parse reads as %v", s, want)
			}
			return
		}
		if err != nil {
			t.Fatalf("parseTS accepted %q as %v; time.Parse refuses it: %v", s, fast, err)
		}
		rfc, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("parseTS accepted %q; time.Parse(RFC3339Nano) refuses it: %v", s, err)
		}
		if fast != want.UTC() || fast != rfc.UTC() {
			t.Fatalf("parseTS(%q) = %v; time.Parse gives %v and %v", s, fast, want, rfc)
		}
	})
}

// Every timestamp the writer can produce is taken by the fast parser.
func TestParseTSTakesEveryWriterTimestamp(t *testing.T) {
	for ms := int64(-62135596800000); ms < 253402300800000; ms += 86_399_999_937 {
		ts := time.UnixMilli(ms).UTC()
		s := ts.Format(tsLayout)
		got, ok := parseTS([]byte(s))
		if !ok || got != ts {
			t.Fatalf("parseTS(%q) = %v, %v; want %v", s, got, ok, ts)
		}
	}
}

// TestTimestampCacheIsParseTS: a timestamp found through the cache of the
// last second is the time parseTS gives, the same value to the last
// field, for every millisecond of a cached second, across a second's
// and a year's end, and a malformed one is refused either way.
func TestTimestampCacheIsParseTS(t *testing.T) {
	var c tsCache
	for _, sec := range []string{"2026-01-01T00:00:00", "2026-12-31T23:59:59", "2024-02-29T12:30:45", "2026-12-31T23:59:59"} {
		for ms := 0; ms < 1000; ms += 37 {
			b := []byte(fmt.Sprintf("%s.%03dZ", sec, ms))
			got, gok := c.parse(b)
			want, wok := parseTS(b)
			if gok != wok || got != want {
				t.Fatalf("%s through the cache: %v (%v), parseTS %v (%v)", b, got, gok, want, wok)
			}
		}
		for _, bad := range []string{sec + ".0a0Z", sec + ".000z", sec + "-000Z", sec + ".00Z"} {
			if _, ok := c.parse([]byte(bad)); ok {
				t.Fatalf("%s accepted through the cache", bad)
			}
		}
	}
}
