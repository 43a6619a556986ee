package server

import (
	"context"
	"strings"
	"testing"

	"github.com/warren-dev/warren/protocol"
)

func TestJSONSubstratStyleRequest(t *testing.T) {
	ts := startServer(t, nil)
	lines := jsonExchange(t, ts.path, []byte(`{"id": "req-7", "method": "greet", "params": {"name": "bob", "times": 2}}`+"\n"))
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want exactly one: %v", len(lines), lines)
	}
	if lines[0]["id"] != "req-7" || lines[0]["result"].(map[string]any)["greeting"] != "hello bob x2" {
		t.Fatalf("reply %v", lines[0])
	}
	// The helper speaks the same framing.
	res, err := protocol.CallJSON(context.Background(), ts.path, "greet", map[string]any{"name": "al"})
	if err != nil || res["greeting"] != "hello al x1" {
		t.Fatalf("CallJSON = %v, %v", res, err)
	}
	// Numeric ids are echoed exactly, params may be absent, nil result is {}.
	lines = jsonExchange(t, ts.path, []byte(`{"id":12345678901234567890,"method":"nil"}`))
	if len(lines) != 1 || lines[0]["id"].(float64) != 12345678901234567890 || len(lines[0]["result"].(map[string]any)) != 0 {
		t.Fatalf("reply %v", lines)
	}
	// Leading whitespace selects JSON too.
	lines = jsonExchange(t, ts.path, []byte("\n\t {\"id\":1,\"method\":\"trivial\"}"))
	if len(lines) != 1 || lines[0]["result"].(map[string]any)["ok"] != true {
		t.Fatalf("reply %v", lines)
	}
}

func TestJSONErrors(t *testing.T) {
	ts := startServer(t, nil)
	cases := []struct {
		name, body string
		id         any
		code       int
		mention    string
	}{
		{"malformed", `{"id":1,"method":`, nil, 2, "malformed JSON"},
		{"not an object", " [1,2,3]\n", nil, 2, "must be a JSON object"},
		{"empty body", " \n", nil, 2, "empty request"},
		{"missing method", `{"id":"a","params":{}}`, "a", 2, `no "method"`},
		{"method not a string", `{"id":"a","method":3}`, "a", 2, `"method" must be a string`},
		{"params not an object", `{"id":"a","method":"echo","params":[1]}`, "a", 2, `"params" must be an object`},
		{"trailing garbage", `{"id":"a","method":"echo"} }`, nil, 2, "malformed JSON"},
		{"unknown method", `{"id":"a","method":"nope"}`, "a", 4, "unknown method: nope"},
		{"missing param", `{"id":"a","method":"greet","params":{}}`, "a", 2, `missing required param "name"`},
		{"wrong param type", `{"id":"a","method":"greet","params":{"name":5}}`, "a", 2, `param "name" must be a string, got a number`},
		{"fractional int", `{"id":"a","method":"greet","params":{"name":"x","times":1.5}}`, "a", 2, `param "times" must be an integer`},
		{"internal", `{"id":"a","method":"fail"}`, "a", 3, "disk on fire"},
		{"handler panic", `{"id":"a","method":"panic"}`, "a", 3, "panicked"},
		{"unencodable result", `{"id":"a","method":"badresult"}`, "a", 3, "cannot encode the reply"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantJSONError(t, jsonExchange(t, ts.path, []byte(c.body)), c.id, c.code, c.mention)
		})
	}
	if !strings.Contains(ts.logs.String(), "handler panicked") {
		t.Error("panic not logged")
	}
	// Still serving after all that.
	if _, err := protocol.CallJSON(context.Background(), ts.path, "trivial", nil); err != nil {
		t.Fatal(err)
	}
}

func TestJSONOversizedRequest(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxFrame = 1024 })
	body := `{"id":1,"method":"echo","params":{"x":"` + strings.Repeat("a", 2000) + `"}}`
	wantJSONError(t, jsonExchange(t, ts.path, []byte(body)), nil, 2, "1024-byte limit")
	// Exactly at the limit is fine.
	pad := 1024 - len(`{"id":1,"method":"echo","params":{"x":""}}`)
	body = `{"id":1,"method":"echo","params":{"x":"` + strings.Repeat("a", pad) + `"}}`
	if lines := jsonExchange(t, ts.path, []byte(body)); len(lines) != 1 || lines[0]["result"] == nil {
		t.Fatalf("request of exactly MaxFrame bytes: %v", lines)
	}
}

func TestJSONStreaming(t *testing.T) {
	ts := startServer(t, nil)
	lines := jsonExchange(t, ts.path, []byte(`{"id":"s","method":"stream","params":{"n":2}}`+"\n"))
	want := []string{`chunk=c0`, `chunk=c1`, `event`, `done`}
	if len(lines) != len(want) {
		t.Fatalf("got %v", lines)
	}
	for i, l := range lines[:2] {
		if _, hasID := l["id"]; hasID || l["chunk"] != want[i][6:] || len(l) != 1 {
			t.Errorf("line %d = %v, want %s with no id", i, l, want[i])
		}
	}
	if ev, _ := lines[2]["event"].(map[string]any); ev == nil || ev["seq"] != float64(2) || len(lines[2]) != 1 {
		t.Errorf("event line %v", lines[2])
	}
	if lines[3]["done"] != true || len(lines[3]) != 1 {
		t.Errorf("done line %v", lines[3])
	}

	// A stream error carries "id": null, after the frames already sent.
	lines = jsonExchange(t, ts.path, []byte(`{"id":"s","method":"streamfail"}`))
	if len(lines) != 2 || lines[0]["chunk"] != "partial" {
		t.Fatalf("got %v", lines)
	}
	wantJSONError(t, lines[1:], nil, 1, `agent "ghost" not found`)

	var chunks []string
	err := protocol.StreamJSON(context.Background(), ts.path, "stream", map[string]any{"n": 3}, func(f protocol.Frame) error {
		if f.Kind == protocol.KindChunk {
			chunks = append(chunks, f.Chunk)
		}
		return nil
	})
	if err != nil || strings.Join(chunks, ",") != "c0,c1,c2" {
		t.Fatalf("StreamJSON: %v %v", chunks, err)
	}

	// A non-streaming method cannot emit chunks.
	res, err := protocol.CallJSON(context.Background(), ts.path, "chunkplain", nil)
	if err != nil || !strings.Contains(res["err"].(string), "not a streaming method") {
		t.Fatalf("chunk from a plain method: %v %v", res, err)
	}
}
