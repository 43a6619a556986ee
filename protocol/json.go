package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// JSON framing (Substrat-compatible): see doc.go.

func unmarshalNumbers(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// IsJSONStart reports whether a connection whose first byte is c speaks the
// JSON framing: '{' or JSON whitespace.
func IsJSONStart(c byte) bool {
	return c == '{' || isJSONSpace(c)
}

// DecodeJSONRequest decodes the whole body of a JSON-framed connection (one
// JSON object, surrounding whitespace allowed). Errors are *Error with
// CodeInvalid. When the error is found after a valid id was read, the
// returned Request is non-nil and carries that ID, so the reply can echo it.
func DecodeJSONRequest(data []byte) (*Request, error) {
	body := bytes.TrimLeft(data, " \t\r\n")
	if len(body) == 0 {
		return nil, Errorf(CodeInvalid, "empty request: send one JSON object {\"id\":..,\"method\":..,\"params\":{..}} then half-close")
	}
	if body[0] != '{' {
		return nil, Errorf(CodeInvalid, "request must be a JSON object {\"id\":..,\"method\":..,\"params\":{..}}, got %s", jsonKind(body[0]))
	}
	var fields map[string]json.RawMessage
	if err := unmarshalNumbers(body, &fields); err != nil {
		return nil, Errorf(CodeInvalid, "malformed JSON: %v", err)
	}
	req := &Request{}
	if raw, ok := fields["id"]; ok {
		var id any
		if err := unmarshalNumbers(raw, &id); err != nil {
			return nil, Errorf(CodeInvalid, "malformed JSON in \"id\": %v", err)
		}
		if !isScalar(id) {
			return nil, Errorf(CodeInvalid, "\"id\" must be a string, number, boolean or null, got %s", typeName(id))
		}
		req.ID = id
	}
	raw, ok := fields["method"]
	if !ok || string(raw) == "null" {
		return req, Errorf(CodeInvalid, "request has no \"method\": name the method to call, e.g. \"agent.list\"")
	}
	if err := json.Unmarshal(raw, &req.Method); err != nil {
		return req, Errorf(CodeInvalid, "\"method\" must be a string, got %s", jsonKind(raw[0]))
	}
	if req.Method == "" {
		return req, Errorf(CodeInvalid, "\"method\" is empty: name the method to call, e.g. \"agent.list\"")
	}
	req.Params = Params{}
	if raw, ok := fields["params"]; ok && string(raw) != "null" {
		if raw[0] != '{' {
			return req, Errorf(CodeInvalid, "\"params\" must be an object, got %s", jsonKind(raw[0]))
		}
		var p map[string]any
		if err := json.Unmarshal(raw, &p); err != nil {
			return req, Errorf(CodeInvalid, "malformed JSON in \"params\": %v", err)
		}
		req.Params = p
	}
	return req, nil
}

func jsonKind(c byte) string {
	switch {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return fmt.Sprintf("invalid JSON starting with %q", c)
}

// EncodeJSONRequest returns the request as one JSON line (with trailing
// newline), as a Substrat client sends it.
func EncodeJSONRequest(req *Request) ([]byte, error) {
	params := req.Params
	if params == nil {
		params = Params{}
	}
	return marshalLine(struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
		Params Params `json:"params"`
	}{req.ID, req.Method, params})
}

// AppendJSONFrame appends f as one JSON line. Result and error frames carry
// "id" (null when ID is nil); chunk, event and done frames carry no id, as
// Substrat's do. A nil result is written as {}.
func AppendJSONFrame(dst []byte, f *Frame) ([]byte, error) {
	var v any
	switch f.Kind {
	case KindResult:
		res := f.Result
		if res == nil {
			res = struct{}{}
		}
		v = struct {
			ID     any `json:"id"`
			Result any `json:"result"`
		}{f.ID, res}
	case KindError:
		e := f.Error
		if e == nil {
			e = &Error{Code: CodeInternal, Message: "unknown error"}
		}
		v = struct {
			ID    any    `json:"id"`
			Error *Error `json:"error"`
		}{f.ID, e}
	case KindChunk:
		v = struct {
			Chunk string `json:"chunk"`
		}{f.Chunk}
	case KindEvent:
		ev := f.Event
		if ev == nil {
			ev = map[string]any{}
		}
		v = struct {
			Event map[string]any `json:"event"`
		}{ev}
	case KindDone:
		v = struct {
			Done bool `json:"done"`
		}{true}
	default:
		return dst, fmt.Errorf("encode frame: unknown frame kind %d", f.Kind)
	}
	line, err := marshalLine(v)
	if err != nil {
		return dst, err
	}
	if n := len(line) - 1; n > MaxFrame {
		return dst, fmt.Errorf("encode JSON frame of %d bytes: %w (%d bytes)", n, ErrFrameTooLarge, MaxFrame)
	}
	return append(dst, line...), nil
}

func marshalLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode appends '\n'
		return nil, fmt.Errorf("encode JSON frame: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeJSONFrame decodes one line written by the server in the JSON
// framing.
func DecodeJSONFrame(line []byte) (*Frame, error) {
	var fields map[string]json.RawMessage
	if err := unmarshalNumbers(line, &fields); err != nil {
		return nil, fmt.Errorf("malformed JSON frame from server: %w", err)
	}
	f := &Frame{}
	if raw, ok := fields["id"]; ok {
		if err := unmarshalNumbers(raw, &f.ID); err != nil {
			return nil, fmt.Errorf("malformed id in frame from server: %w", err)
		}
	}
	switch {
	case fields["error"] != nil:
		f.Kind = KindError
		var e Error
		if err := json.Unmarshal(fields["error"], &e); err != nil {
			return nil, fmt.Errorf("malformed error in frame from server: %w", err)
		}
		f.Error = &e
	case fields["result"] != nil:
		f.Kind = KindResult
		if err := json.Unmarshal(fields["result"], &f.Result); err != nil {
			return nil, fmt.Errorf("malformed result in frame from server: %w", err)
		}
	case fields["chunk"] != nil:
		f.Kind = KindChunk
		if err := json.Unmarshal(fields["chunk"], &f.Chunk); err != nil {
			return nil, fmt.Errorf("malformed chunk in frame from server: %w", err)
		}
	case fields["event"] != nil:
		f.Kind = KindEvent
		if err := json.Unmarshal(fields["event"], &f.Event); err != nil {
			return nil, fmt.Errorf("malformed event in frame from server: %w", err)
		}
	case fields["done"] != nil:
		f.Kind = KindDone
	default:
		return nil, fmt.Errorf("frame from server has none of result, error, chunk, event, done: %.200s", line)
	}
	return f, nil
}
