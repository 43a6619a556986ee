package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/internal/textcut"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/warren-dev/warren/agentproc"
)

// JSON-RPC error codes warren sends.
const (
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
)

// message is any JSON-RPC 2.0 message: a request (id and method), a
// notification (method, no id), or a response (id, result or error).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC error object an agent answered with.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// maxRPCMessage bounds the agent's error message an error text quotes.
const maxRPCMessage = 4 << 10

func (e *RPCError) Error() string {
	s := fmt.Sprintf("JSON-RPC error %d: %s", e.Code, clip(e.Message, maxRPCMessage))
	if len(e.Data) > 0 && string(e.Data) != "null" {
		d := string(e.Data)
		if len(d) > 500 {
			d = d[:500] + "..."
		}
		s += " (" + d + ")"
	}
	return s
}

// conn is the JSON-RPC connection to one agent: a reader goroutine that
// answers the requests warren refuses, routes responses to their callers
// and hands everything else to handle; writes are serialised.
type conn struct {
	in      *os.File // the agent's stdin (our write end)
	out     *bufio.Reader
	maxLine int
	// handle receives the agent's notifications and the requests warren
	// serves (session/request_permission); it runs on the reader goroutine
	// and must not block.
	handle func(m *message)

	wmu sync.Mutex

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *message
	// abandoned are requests whose caller stopped waiting; their late
	// answers are dropped.
	abandoned map[int64]bool
	dead      chan struct{} // closed when the connection is gone
	err       error         // why
}

// ErrProtocol is wrapped by the error of a connection the agent broke: a
// line that is not JSON-RPC, a response to no request, a line over the
// limit.
var ErrProtocol = errors.New("the agent broke the Agent Client Protocol")

func newConn(in *os.File, out *bufio.Reader, maxLine int, handle func(*message)) *conn {
	c := &conn{in: in, out: out, maxLine: maxLine, handle: handle, pending: map[int64]chan *message{}, abandoned: map[int64]bool{}, dead: make(chan struct{})}
	return c
}

// startReading starts the reader goroutine (once handle is set).
func (c *conn) startReading() { go c.readLoop(c.out) }

// fail ends the connection with err (the first one wins).
func (c *conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.dead:
		return
	default:
	}
	c.err = err
	close(c.dead)
}

// Err is why the connection ended (nil while it is up).
func (c *conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *conn) readLoop(r *bufio.Reader) {
	for {
		line, err := agentproc.ReadLine(r, c.maxLine)
		if err != nil {
			if errors.Is(err, agentproc.ErrLineTooLong) {
				c.fail(fmt.Errorf("%w: it wrote a line longer than %d bytes", ErrProtocol, c.maxLine))
				return
			}
			c.fail(fmt.Errorf("%w: %v", ErrAgentExited, err))
			return
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
			c.fail(fmt.Errorf("%w: it wrote a line that is not a JSON-RPC 2.0 message: %q", ErrProtocol, clip(string(line), 200)))
			return
		}
		if err := c.dispatch(&m); err != nil {
			c.fail(err)
			return
		}
	}
}

// dispatch routes one message.
func (c *conn) dispatch(m *message) error {
	switch {
	case m.Method == "" && len(m.ID) > 0:
		id, err := strconv.ParseInt(string(m.ID), 10, 64)
		c.mu.Lock()
		ch, ok := c.pending[id]
		delete(c.pending, id)
		dropped := c.abandoned[id]
		delete(c.abandoned, id)
		c.mu.Unlock()
		if dropped {
			return nil
		}
		if err != nil || !ok {
			return fmt.Errorf("%w: it answered request id %s, which warren never sent or already had an answer to", ErrProtocol, clip(string(m.ID), 40))
		}
		ch <- m
		return nil
	case m.Method == "":
		return fmt.Errorf("%w: a message with neither a method nor an id", ErrProtocol)
	}
	c.handle(m)
	return nil
}

// call sends a request and waits for its response, the connection's end,
// or cancel.
func (c *conn) call(method string, params any, result any, cancel <-chan struct{}) error {
	ch, id, err := c.start(method, params)
	if err != nil {
		return err
	}
	select {
	case m := <-ch:
		return decodeResult(method, m, result)
	case <-c.dead:
		return c.Err()
	case <-cancel:
		c.abandon(id)
		return errCallCancelled
	}
}

var errCallCancelled = errors.New("call abandoned")

// start sends a request and returns the channel its response arrives on.
func (c *conn) start(method string, params any) (chan *message, int64, error) {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan *message, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.send(message{JSONRPC: "2.0", ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: mustJSON(params)}); err != nil {
		c.forget(id)
		return nil, 0, err
	}
	return ch, id, nil
}

// abandon stops waiting for a request's answer.
func (c *conn) abandon(id int64) {
	c.mu.Lock()
	if _, ok := c.pending[id]; ok {
		delete(c.pending, id)
		c.abandoned[id] = true
	}
	c.mu.Unlock()
}

func (c *conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func decodeResult(method string, m *message, result any) error {
	if m.Error != nil {
		return fmt.Errorf("%s: %w", method, m.Error)
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(m.Result, result); err != nil {
		return fmt.Errorf("%w: malformed %s result: %v", ErrProtocol, method, err)
	}
	return nil
}

// notify sends a notification.
func (c *conn) notify(method string, params any) error {
	return c.send(message{JSONRPC: "2.0", Method: method, Params: mustJSON(params)})
}

// reply answers a request of the agent.
func (c *conn) reply(id json.RawMessage, result any, rerr *RPCError) error {
	m := message{JSONRPC: "2.0", ID: id}
	if rerr != nil {
		m.Error = rerr
	} else {
		m.Result = mustJSON(result)
	}
	return c.send(m)
}

// writeTimeout bounds one write to an agent that does not read its stdin.
const writeTimeout = 30 * time.Second

func (c *conn) send(m message) error {
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", m.Method, err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.dead:
		return c.Err()
	default:
	}
	_ = c.in.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.in.Write(append(data, '\n')); err != nil {
		werr := fmt.Errorf("%w: writing to it: %v", ErrAgentExited, err)
		c.fail(werr)
		return werr
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	if r, ok := v.(json.RawMessage); ok {
		return r
	}
	data, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return data
}

func clip(s string, n int) string { return textcut.Cut(s, n, "...") }
