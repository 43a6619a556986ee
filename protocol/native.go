package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
)

// Native framing: a 4-byte big-endian payload length, then a msgpack map.
// See doc.go.

// ErrFrameTooLarge is returned (wrapped) for a native frame whose declared
// length exceeds the limit.
var ErrFrameTooLarge = errors.New("frame exceeds the size limit")

// HeaderSize is the size of a native frame's length prefix.
const HeaderSize = 4

// ReadNativeFrame reads one native frame from r and returns its payload. A
// declared length over max (MaxFrame when max <= 0) is an error wrapping
// ErrFrameTooLarge, returned before the payload is read; a length of zero is
// an *Error with CodeInvalid. A clean EOF before the header is io.EOF; EOF
// inside a frame is io.ErrUnexpectedEOF.
func ReadNativeFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [HeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	return readNativePayload(r, binary.BigEndian.Uint32(hdr[:]), max)
}

// ReadNativePayload reads the payload of a frame whose header has already
// been read and decoded as n. It applies the same checks as ReadNativeFrame.
func ReadNativePayload(r io.Reader, n uint32, max int) ([]byte, error) {
	return readNativePayload(r, n, max)
}

func readNativePayload(r io.Reader, n uint32, max int) ([]byte, error) {
	if max <= 0 {
		max = MaxFrame
	}
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("native frame of %d bytes: %w (%d bytes); split the request or send less data", n, ErrFrameTooLarge, max)
	}
	if n == 0 {
		return nil, Errorf(CodeInvalid, "empty native frame: a frame must hold a msgpack map")
	}
	// Grow the buffer as data arrives rather than trusting the declared
	// length: a peer cannot make the reader allocate 16 MiB by sending 4
	// bytes.
	buf := bytes.NewBuffer(make([]byte, 0, min(int(n), 64<<10)))
	if _, err := io.CopyN(buf, r, int64(n)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeMsgpackMap checks and decodes payload as one msgpack map with string
// keys. Integers become int64/uint64, floats float64, maps map[string]any.
func decodeMsgpackMap(payload []byte) (map[string]any, error) {
	if err := checkMsgpack(payload); err != nil {
		return nil, err
	}
	c := payload[0]
	if !(c >= 0x80 && c <= 0x8f) && c != 0xde && c != 0xdf {
		return nil, fmt.Errorf("frame payload must be a msgpack map, got type byte 0x%02x", c)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(payload))
	dec.UseLooseInterfaceDecoding(true)
	v, err := dec.DecodeInterfaceLoose()
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("frame payload must be a msgpack map, got %T", v)
	}
	return m, nil
}

// DecodeNativeRequest decodes the payload of a native request frame:
// {id, method, params} or a cancel frame {id, cancel:true}. Errors are
// *Error with CodeInvalid; when the error is found after a valid id was
// read, the returned Request is non-nil and carries that ID.
func DecodeNativeRequest(payload []byte) (*Request, error) {
	m, err := decodeMsgpackMap(payload)
	if err != nil {
		return nil, Errorf(CodeInvalid, "malformed msgpack request: %v", err)
	}
	req := &Request{}
	id := m["id"]
	if !isScalar(id) {
		return nil, Errorf(CodeInvalid, "\"id\" must be a string, number, boolean or null, got %s", typeName(id))
	}
	req.ID = id
	if c, ok := m["cancel"]; ok && c != nil {
		b, ok := c.(bool)
		if !ok {
			return req, Errorf(CodeInvalid, "\"cancel\" must be a boolean, got %s", typeName(c))
		}
		if b {
			req.Cancel = true
			req.Params = Params{}
			return req, nil
		}
	}
	mv, ok := m["method"]
	if !ok || mv == nil {
		return req, Errorf(CodeInvalid, "request has no \"method\": name the method to call, e.g. \"agent.list\"")
	}
	if req.Method, ok = mv.(string); !ok {
		return req, Errorf(CodeInvalid, "\"method\" must be a string, got %s", typeName(mv))
	}
	if req.Method == "" {
		return req, Errorf(CodeInvalid, "\"method\" is empty: name the method to call, e.g. \"agent.list\"")
	}
	req.Params = Params{}
	if pv, ok := m["params"]; ok && pv != nil {
		p, ok := pv.(map[string]any)
		if !ok {
			return req, Errorf(CodeInvalid, "\"params\" must be an object, got %s", typeName(pv))
		}
		req.Params = p
	}
	return req, nil
}

// newEncoder returns a msgpack encoder with warren's settings: compact ints
// and json struct tags as the fallback.
func newEncoder(buf *bytes.Buffer) *msgpack.Encoder {
	enc := msgpack.NewEncoder(buf)
	enc.UseCompactInts(true)
	enc.SetCustomStructTag("json")
	return enc
}

// finishFrame fills in the length prefix reserved at the start of buf.
func finishFrame(buf *bytes.Buffer) ([]byte, error) {
	b := buf.Bytes()
	n := len(b) - HeaderSize
	if n > MaxFrame {
		return nil, fmt.Errorf("encode native frame of %d bytes: %w (%d bytes)", n, ErrFrameTooLarge, MaxFrame)
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	return b, nil
}

// EncodeNativeRequest returns the complete native frame (length prefix
// included) for req. A Cancel request encodes as {id, cancel:true}.
func EncodeNativeRequest(req *Request) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(make([]byte, HeaderSize))
	enc := newEncoder(&buf)
	id, err := Normalize(req.ID)
	if err != nil {
		return nil, fmt.Errorf("encode request id: %w", err)
	}
	if req.Cancel {
		err = enc.Encode(map[string]any{"id": id, "cancel": true})
	} else {
		var params any = map[string]any{}
		if req.Params != nil {
			if params, err = Normalize(map[string]any(req.Params)); err != nil {
				return nil, fmt.Errorf("encode params of %s: %w", req.Method, err)
			}
		}
		err = enc.Encode(map[string]any{"id": id, "method": req.Method, "params": params})
	}
	if err != nil {
		return nil, fmt.Errorf("encode native request: %w", err)
	}
	return finishFrame(&buf)
}

// EncodeNativeFrame returns the complete native frame (length prefix
// included) for f. Result and event values are normalized first (see
// Normalize) so both framings carry the same keys.
func EncodeNativeFrame(f *Frame) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(make([]byte, HeaderSize))
	enc := newEncoder(&buf)
	id, err := Normalize(f.ID)
	if err != nil {
		return nil, fmt.Errorf("encode frame id: %w", err)
	}
	m := map[string]any{"id": id}
	switch f.Kind {
	case KindResult:
		res, err := Normalize(f.Result)
		if err != nil {
			return nil, fmt.Errorf("encode result: %w", err)
		}
		if res == nil {
			res = map[string]any{}
		}
		m["result"] = res
	case KindError:
		e := f.Error
		if e == nil {
			e = &Error{Code: CodeInternal, Message: "unknown error"}
		}
		m["error"] = map[string]any{"code": e.Code, "message": e.Message}
	case KindChunk:
		m["chunk"] = f.Chunk
	case KindEvent:
		ev, err := Normalize(f.Event)
		if err != nil {
			return nil, fmt.Errorf("encode event: %w", err)
		}
		if ev == nil {
			ev = map[string]any{}
		}
		m["event"] = ev
	case KindDone:
		m["done"] = true
	default:
		return nil, fmt.Errorf("encode frame: unknown frame kind %d", f.Kind)
	}
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode native frame: %w", err)
	}
	return finishFrame(&buf)
}

// DecodeNativeFrame decodes the payload of a native frame sent by the
// server.
func DecodeNativeFrame(payload []byte) (*Frame, error) {
	m, err := decodeMsgpackMap(payload)
	if err != nil {
		return nil, fmt.Errorf("malformed msgpack frame from server: %w", err)
	}
	f := &Frame{ID: m["id"]}
	if ev, ok := m["error"]; ok && ev != nil {
		em, ok := ev.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("frame from server: \"error\" is %s, not an object", typeName(ev))
		}
		code, ok := toInt(em["code"])
		if !ok {
			return nil, fmt.Errorf("frame from server: error code is %s, not an integer", typeName(em["code"]))
		}
		msg, _ := em["message"].(string)
		f.Kind, f.Error = KindError, &Error{Code: code, Message: msg}
		return f, nil
	}
	if res, ok := m["result"]; ok {
		f.Kind, f.Result = KindResult, res
		return f, nil
	}
	if cv, ok := m["chunk"]; ok {
		s, ok := cv.(string)
		if !ok {
			return nil, fmt.Errorf("frame from server: \"chunk\" is %s, not a string", typeName(cv))
		}
		f.Kind, f.Chunk = KindChunk, s
		return f, nil
	}
	if ev, ok := m["event"]; ok {
		em, ok := ev.(map[string]any)
		if !ok && ev != nil {
			return nil, fmt.Errorf("frame from server: \"event\" is %s, not an object", typeName(ev))
		}
		f.Kind, f.Event = KindEvent, em
		return f, nil
	}
	if d, ok := m["done"]; ok && d == true {
		f.Kind = KindDone
		return f, nil
	}
	return nil, errors.New("frame from server has none of result, error, chunk, event, done")
}
