package tools

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParse: any JSON object for any tool parses or fails with one of the
// documented errors; it never panics. The seeds run in every `go test`;
// `go test -fuzz FuzzParse ./tools` explores further.
func FuzzParse(f *testing.F) {
	for i, name := range specTools {
		raw, _ := json.Marshal(minimal[name])
		f.Add(uint8(i), string(raw))
	}
	f.Add(uint8(7), `{"reason":"r","timeout":1e400}`)
	f.Add(uint8(11), `{"agent_name":"w","transition":"->"}`)
	f.Add(uint8(3), `{"name":"w","instructions":"i","metadata":{"a":null}}`)
	f.Add(uint8(200), `{}`)
	f.Fuzz(func(t *testing.T, idx uint8, raw string) {
		name := "no_such_tool"
		if int(idx) < len(specTools) {
			name = specTools[idx]
		}
		var args map[string]any
		if json.Unmarshal([]byte(raw), &args) != nil {
			return
		}
		got, err := ParseOptions{MaxText: 64}.Parse(name, args)
		if err != nil {
			if got != nil {
				t.Fatalf("error %v with a result %v", err, got)
			}
			var pe *ParamError
			if !errors.Is(err, ErrUnknownTool) && !errors.As(err, &pe) {
				t.Fatalf("undocumented error %T: %v", err, err)
			}
			return
		}
		if c, ok := got.(Call); !ok || c.Tool() != name {
			t.Fatalf("Parse(%s) returned %T", name, got)
		}
	})
}

func BenchmarkParseSendMessage(b *testing.B) {
	args := map[string]any{"recipient": "worker", "text": "please run the tests and report"}
	for b.Loop() {
		if _, err := Parse(ToolSendMessage, args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseSpawnAgent(b *testing.B) {
	args := map[string]any{"name": "worker", "instructions": "do the work", "metadata": map[string]any{"role": "tester", "tier": "2"}}
	for b.Loop() {
		if _, err := Parse(ToolSpawnAgent, args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCatalogSchemas(b *testing.B) {
	for b.Loop() {
		for _, s := range Catalog() {
			_ = s.JSONSchema()
		}
	}
}
