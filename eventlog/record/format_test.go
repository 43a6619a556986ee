package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLineFormatMatchesSpec(t *testing.T) {
	ts := time.Date(2026, 11, 22, 10, 1, 10, 123456789, time.UTC)
	p, err := Prepare(Record{Event: "turn.start", Data: map[string]any{"run_id": "ab", "turn": 1}}, MaxLineBytes)
	if err != nil {
		t.Fatal(err)
	}
	got := string(AppendLine(nil, 12, ts, &p))
	body := `{"seq":12,"ts":"2026-11-22T10:01:10.123Z","event":"turn.start","data":{"run_id":"ab","turn":1}`
	sum := crc32.Checksum([]byte(body), crc32.MakeTable(crc32.Castagnoli))
	want := body + fmt.Sprintf(`,"crc":"%08x"}`, sum) + "\n"
	if got != want {
		t.Fatalf("line:\n got %q\nwant %q", got, want)
	}
	e, err := ParseLine([]byte(strings.TrimSuffix(got, "\n")))
	if err != nil {
		t.Fatalf("parse own line: %v", err)
	}
	if e.Seq != 12 || e.Event != "turn.start" || string(e.Data) != `{"run_id":"ab","turn":1}` ||
		!e.TS.Equal(ts.Truncate(time.Millisecond)) {
		t.Fatalf("parsed %+v", e)
	}
}

func TestLineNonUTCTimeIsWrittenInUTC(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.FixedZone("x", 3600))
	p, _ := Prepare(Record{Event: "e"}, MaxLineBytes)
	line := string(AppendLine(nil, 1, ts, &p))
	if !strings.Contains(line, `"ts":"2026-01-02T02:04:05.006Z"`) || !strings.Contains(line, `"data":{}`) {
		t.Fatalf("line %q", line)
	}
}

func TestPrepareRejectsInvalidRecords(t *testing.T) {
	cases := map[string]Record{
		"empty event":      {Event: ""},
		"non-UTF-8 event":  {Event: "bad\xff"},
		"array data":       {Event: "e", Data: []int{1}},
		"string data":      {Event: "e", Data: "x"},
		"null raw data":    {Event: "e", Data: json.RawMessage("null")},
		"invalid raw data": {Event: "e", Data: json.RawMessage("{")},
		"unmarshalable":    {Event: "e", Data: map[string]any{"f": math.Inf(1)}},
		"channel data":     {Event: "e", Data: make(chan int)},
	}
	for name, r := range cases {
		if _, err := Prepare(r, MaxLineBytes); !errors.Is(err, ErrInvalidRecord) {
			t.Errorf("%s: got %v, want ErrInvalidRecord", name, err)
		}
	}
}

func TestPrepareCompactsIndentedRawData(t *testing.T) {
	p, err := Prepare(Record{Event: "e", Data: json.RawMessage("{\n  \"a\": 1\n}")}, MaxLineBytes)
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Data) != `{"a":1}` {
		t.Fatalf("data %q", p.Data)
	}
}

func TestParseLineClassifiesDamage(t *testing.T) {
	p, _ := Prepare(Record{Event: "e", Data: map[string]int{"a": 1}}, MaxLineBytes)
	good := AppendLine(nil, 1, time.Unix(0, 0), &p)
	good = good[:len(good)-1]

	withCRC := func(body string) []byte {
		sum := crc32.Checksum([]byte(body), castagnoli)
		return []byte(body + fmt.Sprintf(`,"crc":"%08x"}`, sum))
	}
	torn := map[string][]byte{
		"empty":        nil,
		"zeros":        make([]byte, 80),
		"cut":          good[:len(good)-5],
		"flipped":      append([]byte{good[0]}, append([]byte("X"), good[2:]...)...),
		"uppercase":    []byte(strings.ToUpper(string(good))),
		"garbage":      []byte("\xff\xfe garbage ,\"crc\":\"00000000\"}"),
		"bad hex":      append(append([]byte{}, good[:len(good)-10]...), []byte(`zzzzzzzz"}`)...),
		"prefix only":  []byte(`{"seq":`),
		"no crc field": []byte(`{"seq":1,"ts":"2026-01-01T00:00:00.000Z","event":"e","data":{}}`),
	}
	for name, line := range torn {
		if _, err := ParseLine(line); !errors.Is(err, errBadCRC) {
			t.Errorf("%s: got %v, want errBadCRC", name, err)
		}
	}
	corrupt := map[string][]byte{
		"invalid UTF-8":   withCRC(`{"seq":1,"ts":"2026-01-01T00:00:00.000Z","event":"e\xff","data":{}`),
		"array data":      withCRC(`{"seq":1,"ts":"2026-01-01T00:00:00.000Z","event":"e","data":[]`),
		"missing data":    withCRC(`{"seq":1,"ts":"2026-01-01T00:00:00.000Z","event":"e"`),
		"seq zero":        withCRC(`{"seq":0,"ts":"2026-01-01T00:00:00.000Z","event":"e","data":{}`),
		"negative seq":    withCRC(`{"seq":-1,"ts":"2026-01-01T00:00:00.000Z","event":"e","data":{}`),
		"bad ts":          withCRC(`{"seq":1,"ts":"yesterday","event":"e","data":{}`),
		"empty event":     withCRC(`{"seq":1,"ts":"2026-01-01T00:00:00.000Z","event":"","data":{}`),
		"not JSON":        withCRC(`{"seq":1 nonsense`),
		"wrong first key": withCRC(`{"ts":"2026-01-01T00:00:00.000Z","seq":1,"event":"e","data":{}`),
	}
	for name, line := range corrupt {
		_, err := ParseLine(line)
		if err == nil || errors.Is(err, errBadCRC) {
			t.Errorf("%s: got %v, want a content error", name, err)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	p, _ := Prepare(Record{Event: "turn.start", Data: map[string]any{"x": "y"}}, MaxLineBytes)
	f.Add(AppendLine(nil, 3, time.Unix(1, 0), &p))
	f.Add([]byte(`{"seq":1,"ts":"2026-01-01T00:00:00.000Z","event":"e","data":{},"crc":"00000000"}`))
	f.Add([]byte{0, 0, 0, '\n'})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 0 && b[len(b)-1] == '\n' {
			b = b[:len(b)-1]
		}
		e, err := ParseLine(b)
		if err != nil {
			return
		}
		// Anything accepted has the basic shape and a matching crc.
		if e.Seq == 0 || e.Event == "" || len(e.Data) == 0 || e.Data[0] != '{' {
			t.Fatalf("accepted entry %+v from %q", e, b)
		}
		body := b[:len(b)-crcSuffixLen]
		want, _ := parseHex32(b[len(body)+len(crcPrefix) : len(b)-2])
		if crc32.Checksum(body, castagnoli) != want {
			t.Fatalf("accepted a line whose crc does not match: %q", b)
		}
	})
}

// TestParseHex32 holds the table parser to its definition: exactly 8
// lowercase hex digits, every other byte refused.
func TestParseHex32(t *testing.T) {
	ref := func(b []byte) (uint32, bool) {
		if len(b) != 8 {
			return 0, false
		}
		for _, c := range b {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return 0, false
			}
		}
		v, err := strconv.ParseUint(string(b), 16, 32)
		return uint32(v), err == nil
	}
	rng := rand.New(rand.NewPCG(1, 2))
	cases := [][]byte{[]byte("00000000"), []byte("ffffffff"), []byte("0123abcd"), []byte("0123ABCD"), []byte("0123abc"), []byte("0123abcde"), []byte("0123abc/"), []byte("0123abc:"), []byte("0123abc`"), []byte("0123abcg")}
	for i := 0; i < 20000; i++ {
		b := make([]byte, 8)
		for j := range b {
			if rng.IntN(4) == 0 {
				b[j] = byte(rng.IntN(256))
			} else {
				b[j] = "0123456789abcdef"[rng.IntN(16)]
			}
		}
		cases = append(cases, b)
	}
	for _, b := range cases {
		gv, gok := parseHex32(b)
		wv, wok := ref(b)
		if gok != wok || (gok && gv != wv) {
			t.Fatalf("parseHex32(%q) = %x, %v; want %x, %v", b, gv, gok, wv, wok)
		}
	}
}
