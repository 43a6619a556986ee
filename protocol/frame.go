package protocol

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// MaxFrame is the largest request or frame accepted, in bytes: the body of a
// JSON request or the payload of a native frame (SPEC 8.1).
const MaxFrame = 16 << 20

// Request is one decoded request.
type Request struct {
	// ID is echoed in every frame answering the request. JSON ids decode as
	// string, json.Number, bool or nil; native ids as string, int64, uint64,
	// float64, bool or nil.
	ID any
	// Method is the method name, never empty in a decoded request (unless
	// Cancel is set).
	Method string
	// Params is never nil in a decoded request.
	Params Params
	// Cancel marks a native cancel frame {id, cancel:true}: it asks the
	// server to cancel the in-flight request with this id. It has no method
	// and gets no reply of its own.
	Cancel bool
}

// EventTurnDelta names the event frame that carries response text as a
// model streams it (agent.stream with deltas). It is never logged; every
// other event frame of agent.stream and agent.send is a log entry's or
// named after one (schema).
const EventTurnDelta = "turn.delta"

// FrameKind says what a frame sent by the server carries.
type FrameKind int

// Frame kinds.
const (
	KindResult FrameKind = iota + 1 // {id, result}
	KindError                       // {id, error:{code, message}}
	KindChunk                       // {id, chunk}
	KindEvent                       // {id, event}
	KindDone                        // {id, done:true}
)

// String names the kind as its wire key.
func (k FrameKind) String() string {
	switch k {
	case KindResult:
		return "result"
	case KindError:
		return "error"
	case KindChunk:
		return "chunk"
	case KindEvent:
		return "event"
	case KindDone:
		return "done"
	}
	return "kind_" + strconv.Itoa(int(k))
}

// Frame is one frame sent by the server: a result or error answering a
// request, or a chunk, event or done frame of a streaming method.
type Frame struct {
	Kind   FrameKind
	ID     any
	Result any            // KindResult
	Error  *Error         // KindError
	Chunk  string         // KindChunk
	Event  map[string]any // KindEvent
}

// Normalize converts v to the JSON data model used on both framings:
// nil, bool, string, int64, uint64, float64, []any and map[string]any.
// Common Go types are converted directly; anything else (structs,
// json.RawMessage, typed maps and slices) goes through encoding/json, so
// both framings see the same keys (json tags) and values.
func Normalize(v any) (any, error) {
	return normalize(v, 0)
}

// maxNormalizeDepth keeps encoded values within what the native decoder
// accepts (maxMsgpackDepth, counting the frame's own map).
const maxNormalizeDepth = maxMsgpackDepth - 8

func normalize(v any, depth int) (any, error) {
	if depth > maxNormalizeDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxNormalizeDepth)
	}
	if s, ok := normalizeScalar(v); ok {
		return s, nil
	}
	switch x := v.(type) {
	case json.Number:
		return numberValue(x)
	case map[string]any:
		return normalizeMap(x, depth)
	case Params:
		return normalizeMap(x, depth)
	case []any:
		return normalizeSlice(x, depth)
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = e
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, nil
	case *Error:
		if x == nil {
			return nil, nil
		}
		return map[string]any{"code": int64(x.Code), "message": x.Message}, nil
	}
	return normalizeViaJSON(v, depth)
}

// normalizeScalar converts Go's fixed-size numbers to int64, uint64 or
// float64 and passes the data model's own scalars through; ok is false for
// anything else.
func normalizeScalar(v any) (out any, ok bool) {
	switch x := v.(type) {
	case nil, bool, string, int64, uint64, float64:
		return x, true
	case int:
		return int64(x), true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint:
		return uint64(x), true
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case float32:
		return float64(x), true
	}
	return nil, false
}

// normalizeMap normalizes each value of m, one level deeper.
func normalizeMap(m map[string]any, depth int) (any, error) {
	out := make(map[string]any, len(m))
	for k, e := range m {
		n, err := normalize(e, depth+1)
		if err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, nil
}

// normalizeSlice normalizes each element of s, one level deeper.
func normalizeSlice(s []any, depth int) (any, error) {
	out := make([]any, len(s))
	for i, e := range s {
		n, err := normalize(e, depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// normalizeViaJSON converts any other value (structs, json.RawMessage,
// typed maps and slices) by a round trip through encoding/json, so both
// framings see the same keys (json tags) and values.
func normalizeViaJSON(v any, depth int) (any, error) {
	var raw []byte
	if rm, ok := v.(json.RawMessage); ok {
		raw = rm
	} else {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode %T as JSON: %w", v, err)
		}
		raw = b
	}
	var out any
	if err := unmarshalNumbers(raw, &out); err != nil {
		return nil, fmt.Errorf("decode %T as JSON: %w", v, err)
	}
	return normalize(out, depth+1)
}

// numberValue converts a JSON number to int64, uint64 or float64.
func numberValue(n json.Number) (any, error) {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("number %q out of range", s)
	}
	return f, nil
}

// isScalar reports whether v may be used as a request id.
func isScalar(v any) bool {
	switch v.(type) {
	case nil, bool, string, json.Number, float64, float32,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	}
	return false
}
