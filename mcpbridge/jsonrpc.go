package mcpbridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// JSON-RPC 2.0 error codes, and the bridge's own (doc.go).
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
	// CodeRefused: the daemon refused the tool call (data.warren_code).
	CodeRefused = -32000
	// CodeUnreachable: the daemon cannot be reached, the connection broke,
	// or the bridge has no credential.
	CodeUnreachable = -32001
)

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

func errorf(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// message is one incoming JSON-RPC message. ID is nil when the key is
// absent (a notification), "null" when it is null.
type message struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// errLineTooLong is returned by readLine for a line over the limit; the
// line has been consumed and its first bytes are in the returned prefix.
var errLineTooLong = errors.New("line too long")

// prefixKeep is how much of an over-long line is kept to find its id.
const prefixKeep = 4096

// readLine reads one line (without its newline) of at most max bytes. A
// longer line is consumed to its end and errLineTooLong returned with its
// first prefixKeep bytes and its length. A last line without a newline is
// returned; io.EOF comes after it.
func readLine(r *bufio.Reader, max int) (line []byte, n int, err error) {
	var buf []byte
	over := false
	for {
		frag, ferr := r.ReadSlice('\n')
		n += len(frag)
		switch {
		case over:
		case len(buf)+len(frag) > max+1: // +1: the newline
			over = true
			keep := min(prefixKeep-len(buf), len(frag))
			if keep > 0 {
				buf = append(buf, frag[:keep]...)
			}
		default:
			buf = append(buf, frag...)
		}
		if ferr == bufio.ErrBufferFull {
			continue
		}
		if ferr != nil && (ferr != io.EOF || n == 0) {
			return nil, n, ferr
		}
		if over {
			return buf, n, errLineTooLong
		}
		return bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r")), n, nil
	}
}

// idFromPrefix finds the top-level "id" of a JSON object whose text is cut
// short, when the id comes before the cut (clients write it before the
// params). It returns nil when it cannot.
func idFromPrefix(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key == "id" {
			if validID(v) {
				return v
			}
			return nil
		}
	}
	return nil
}

// validID: a JSON-RPC request id is a string or a number (MCP: never
// null); a number must be within float64's range.
func validID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return false
	}
	switch c := id[0]; {
	case c == '"':
		var s string
		return json.Unmarshal(id, &s) == nil
	case c == '-' || (c >= '0' && c <= '9'):
		var n json.Number
		if json.Unmarshal(id, &n) != nil {
			return false
		}
		_, err := strconv.ParseFloat(string(n), 64) // in range: clients can read it back
		return err == nil
	}
	return false
}

// writer writes whole messages, one per line, under a lock.
type writer struct {
	mu  sync.Mutex
	w   io.Writer
	err error // the first write error; later writes are dropped
}

func (w *writer) send(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encoding a reply: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if _, err := w.w.Write(buf.Bytes()); err != nil {
		w.err = fmt.Errorf("writing to stdout: %w", err)
	}
	return w.err
}

// errServeEnded refuses writes once Serve has returned.
var errServeEnded = errors.New("mcpbridge: Serve has returned")

// close refuses further writes and returns the first write error, if any.
func (w *writer) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	if err == nil {
		w.err = errServeEnded
	}
	return err
}

// broken reports whether a write to the output has failed.
func (w *writer) broken() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil
}

// nullID is the id of an error reply to a message whose id is unknown.
var nullID = json.RawMessage("null")

func (w *writer) result(id json.RawMessage, result any) error {
	return w.send(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, result})
}

func (w *writer) error(id json.RawMessage, e *rpcError) error {
	if id == nil {
		id = nullID
	}
	return w.send(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *rpcError       `json:"error"`
	}{"2.0", id, e})
}
