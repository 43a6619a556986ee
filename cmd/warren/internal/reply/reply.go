// Package reply reads the daemon's replies as the client decodes them
// (msgpack maps: map[string]any, map[any]any, []byte, integers of any
// width): typed access to a field that is absent or of another type gives
// the zero value, and JSON writes a reply as the one line --json prints.
package reply

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/warren-dev/warren/protocol"
)

// JSON writes v as one line of JSON.
func JSON(w io.Writer, v any) error {
	b, err := json.Marshal(Plain(v))
	if err != nil {
		return fmt.Errorf("encode the result as JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// Plain converts values decoded from msgpack (map[any]any, []byte) into
// ones encoding/json accepts.
func Plain(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = Plain(x)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[fmt.Sprint(k)] = Plain(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = Plain(x)
		}
		return out
	case []byte:
		return string(t)
	}
	return v
}

// Bool is m[k] as a boolean (false when absent or not one).
func Bool(m map[string]any, k string) bool {
	b, _ := m[k].(bool)
	return b
}

// Str returns m[k] as a string ("" when absent or null).
func Str(m map[string]any, k string) string {
	switch v := m[k].(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}

// Num returns m[k] as an int64 (0 when absent or not a number).
func Num(m map[string]any, k string) int64 {
	switch v := m[k].(type) {
	case int:
		return int64(v)
	case int8:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	case uint:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint64:
		return int64(v)
	case float32:
		return int64(v)
	case float64:
		return int64(v)
	case json.Number:
		n, _ := v.Int64()
		return n
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// Obj returns m[k] as a map (nil when absent or not a map).
func Obj(m map[string]any, k string) map[string]any {
	if v, ok := Plain(m[k]).(map[string]any); ok {
		return v
	}
	return nil
}

// List returns m[k] as a list of maps (entries that are not maps skipped).
func List(m map[string]any, k string) []map[string]any {
	raw, _ := m[k].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, x := range raw {
		if mm, ok := Plain(x).(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// Strs returns m[k] as a list of strings (entries that are not strings
// skipped).
func Strs(m map[string]any, k string) []string {
	raw, _ := m[k].([]any)
	out := make([]string, 0, len(raw))
	for _, x := range raw {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Frame is a stream frame as --json prints it: {"event": ...} or
// {"chunk": ...}.
func Frame(fr protocol.Frame) map[string]any {
	if fr.Event != nil {
		return map[string]any{"event": fr.Event}
	}
	return map[string]any{"chunk": fr.Chunk}
}
