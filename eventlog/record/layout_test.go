package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// The positional fast path must decode exactly what encoding/json decodes,
// for every line the writer produces.
func TestWriterLayoutMatchesJSONDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	events := []string{"turn.start", "message.enqueued", "x", "a.b-c_d"}
	for i := 0; i < 2000; i++ {
		data := map[string]any{"k": r.Int64(), "s": fmt.Sprintf("v\"%d\\\n\u00e9", r.IntN(1000)), "n": map[string]any{"x": []any{1, "two"}}}
		p, err := Prepare(Record{Event: events[r.IntN(len(events))], Data: data}, MaxLineBytes)
		if err != nil {
			t.Fatal(err)
		}
		ts := time.UnixMilli(r.Int64N(4e12)).UTC()
		line := AppendLine(nil, uint64(r.Int64N(1e15)+1), ts, &p)
		line = bytes.TrimSuffix(line, []byte("\n"))
		fast, ok := parseWriterLayout(line[:len(line)-crcSuffixLen], lineMode{})
		if !ok {
			t.Fatalf("the fast path refused a line the writer produced: %s", line)
		}
		var f lineFields
		if err := json.Unmarshal(line, &f); err != nil {
			t.Fatal(err)
		}
		slowTS, _ := time.Parse(time.RFC3339Nano, *f.TS)
		slow := Entry{Seq: *f.Seq, TS: slowTS.UTC(), Event: *f.Event, Data: f.Data}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast %+v != json %+v for %s", fast, slow, line)
		}
	}
}

func TestWriterLayoutRefusesOtherShapes(t *testing.T) {
	for _, body := range []string{
		`{"seq":01,"ts":"2026-01-01T00:00:00.000Z","event":"e","data":{}`,
		`{"seq":1,"ts":"2026-01-01T00:00:00Z","event":"e","data":{}`,
		`{"seq":1,"ts":"2026-01-01T00:00:00.000Z","event":"e\"x","data":{}`,
		`{"seq":1,"ts":"2026-01-01T00:00:00.000Z","event":"e","data":[1]`,
		`{"seq":1,"ts":"2026-01-01T00:00:00.000Z","data":{},"event":"e"`,
		`{"seq":0,"ts":"2026-01-01T00:00:00.000Z","event":"e","data":{}`,
	} {
		if e, ok := parseWriterLayout([]byte(body), lineMode{}); ok {
			t.Errorf("fast path accepted %s as %+v; it must fall back to the full decode", body, e)
		}
	}
}
