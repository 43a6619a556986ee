package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/internal/textcut"
	"io"
	"slices"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/tools"
)

// SupportedVersions are the MCP protocol versions the bridge speaks, latest
// first (doc.go: the version negotiation).
var SupportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// structuredSince is the first protocol version with structuredContent.
const structuredSince = "2025-06-18"

// maxQueued bounds the tool calls waiting for their turn to reach the
// daemon (a client past it gets -32603 at once; the reader never blocks).
const maxQueued = 32

// Caller runs a tool for the agent. Errors are *protocol.Error for the
// daemon's refusals, *rpcError for the bridge's own (see daemon.go).
type Caller interface {
	CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error)
}

// Options configure Serve.
type Options struct {
	// Caller runs the tool calls (required).
	Caller Caller
	// Logger gets the bridge's log lines (stderr; never stdout).
	Logger hclog.Logger
	// Version is serverInfo.version.
	Version string
	// MaxLine bounds an incoming line (0: DefaultMaxLine).
	MaxLine int
}

// DefaultMaxLine is the longest message accepted by default: the daemon's
// frame limit, less room for the tool.call request around the arguments.
const DefaultMaxLine = protocol.MaxFrame - 64<<10

// server is one Serve.
type server struct {
	opts Options
	log  hclog.Logger
	out  *writer

	mu       sync.Mutex
	version  string // negotiated protocol version ("" before initialize)
	inflight map[string]context.CancelFunc
	queue    chan *call
}

// call is one queued tools/call.
type call struct {
	id   json.RawMessage
	key  string
	ctx  context.Context
	tool string
	args map[string]any
}

// Serve answers MCP messages read from in on out until in ends (nil, once
// the calls received are answered), a read or write fails (the error), or
// ctx ends (nil, at once: the calls in flight are cancelled, even while a
// read of in is blocked). It never panics on input.
func Serve(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	if opts.Caller == nil {
		return errors.New("mcpbridge: Options.Caller is required")
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	s := &server{opts: opts, log: opts.Logger, out: &writer{w: out},
		inflight: map[string]context.CancelFunc{}, queue: make(chan *call, maxQueued)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.work(ctx)
	}()
	read := make(chan error, 1)
	go func() { read <- s.read(ctx, bufio.NewReaderSize(in, 64<<10)) }()
	var err error
	select {
	case err = <-read:
		if err != nil {
			cancel() // a broken pipe: nobody reads the answers of the calls in flight
		}
		// At the end of stdin the queued calls are still run and answered
		// (a client may write its requests and close its side before it
		// reads). The reader has ended: nothing sends on the queue now.
		close(s.queue)
	case <-ctx.Done():
		// Asked to stop (SIGTERM, SIGINT): the calls in flight are
		// cancelled and nothing more is written. A read blocked on in
		// stays blocked until in ends; its lines are not answered.
	}
	wg.Wait()
	if werr := s.out.close(); err == nil {
		err = werr
	}
	return err
}

// read handles incoming lines until the input ends.
func (s *server) read(ctx context.Context, r *bufio.Reader) error {
	for {
		if ctx.Err() != nil {
			return nil
		}
		line, n, err := readLine(r, s.opts.MaxLine)
		switch {
		case errors.Is(err, errLineTooLong):
			id := idFromPrefix(line)
			s.log.Warn("refused an over-long message", "bytes", n, "limit", s.opts.MaxLine)
			e := errorf(CodeInvalidRequest, "the message is %d bytes, over the bridge's limit of %d bytes (the daemon's frame limit); send smaller arguments", n, s.opts.MaxLine)
			if werr := s.out.error(id, e); werr != nil {
				return werr
			}
			continue
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("reading stdin: %w", err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := s.handle(ctx, line); err != nil {
			return err
		}
	}
}

// handle dispatches one line; it returns only write errors.
func (s *server) handle(ctx context.Context, line []byte) error {
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return s.out.error(nil, errorf(CodeParseError, "parse error: the line is not valid JSON"))
		}
		return s.out.error(nil, errorf(CodeInvalidRequest, "JSON-RPC batches are not supported (MCP dropped them in 2025-06-18): send one message per line"))
	}
	var m message
	if err := json.Unmarshal(trimmed, &m); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) || json.Valid(trimmed) {
			var idOnly struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(trimmed, &idOnly)
			if !validID(idOnly.ID) {
				idOnly.ID = nil
			}
			return s.out.error(idOnly.ID, errorf(CodeInvalidRequest, "invalid request: a JSON-RPC 2.0 message is an object with jsonrpc, id, method and params (%v)", err))
		}
		return s.out.error(nil, errorf(CodeParseError, "parse error: the line is not valid JSON: %v", err))
	}
	notification := m.ID == nil
	if !notification && !validID(m.ID) {
		return s.out.error(nil, errorf(CodeInvalidRequest, "invalid request: id %s is not a string or a number", clip(m.ID)))
	}
	if m.JSONRPC == nil || *m.JSONRPC != "2.0" {
		if notification {
			s.log.Debug("ignored a notification without jsonrpc 2.0")
			return nil
		}
		return s.out.error(m.ID, errorf(CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`))
	}
	if m.Method == nil {
		if m.Result != nil || m.Error != nil {
			s.log.Debug("ignored a response (the bridge sends no requests)", "id", string(m.ID))
			return nil
		}
		if notification {
			return nil
		}
		return s.out.error(m.ID, errorf(CodeInvalidRequest, `invalid request: "method" is missing`))
	}
	if notification {
		s.notification(*m.Method, m.Params)
		return nil
	}
	return s.request(ctx, m.ID, *m.Method, m.Params)
}

func (s *server) notification(method string, params json.RawMessage) {
	switch method {
	case "notifications/initialized":
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		}
		if err := json.Unmarshal(params, &p); err != nil || !validID(p.RequestID) {
			s.log.Debug("ignored a malformed notifications/cancelled")
			return
		}
		s.mu.Lock()
		cancel := s.inflight[idKey(p.RequestID)]
		s.mu.Unlock()
		if cancel != nil {
			s.log.Debug("tool call cancelled by the client", "id", string(p.RequestID), "reason", p.Reason)
			cancel()
		}
	default:
		s.log.Debug("ignored a notification", "method", method)
	}
}

func (s *server) request(ctx context.Context, id json.RawMessage, method string, params json.RawMessage) error {
	switch method {
	case "initialize":
		res, e := s.initialize(params)
		if e != nil {
			return s.out.error(id, e)
		}
		return s.out.result(id, res)
	case "ping":
		return s.out.result(id, map[string]any{})
	case "tools/list":
		list := make([]map[string]any, 0, len(tools.Names()))
		for _, spec := range tools.Catalog() {
			list = append(list, spec.MCPTool())
		}
		return s.out.result(id, map[string]any{"tools": list})
	case "tools/call":
		return s.enqueue(ctx, id, params)
	}
	return s.out.error(id, errorf(CodeMethodNotFound, "method %q is not served by warren mcp-bridge (it serves initialize, ping, tools/list and tools/call)", clip([]byte(method))))
}

func (s *server) initialize(params json.RawMessage) (map[string]any, *rpcError) {
	var p struct {
		ProtocolVersion *string `json:"protocolVersion"`
		ClientInfo      struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"clientInfo"`
	}
	if err := unmarshalParams(params, &p); err != nil {
		return nil, errorf(CodeInvalidParams, "initialize: %v", err)
	}
	if p.ProtocolVersion == nil {
		return nil, errorf(CodeInvalidParams, "initialize: protocolVersion is missing (the bridge speaks %v)", SupportedVersions)
	}
	v := SupportedVersions[0]
	if slices.Contains(SupportedVersions, *p.ProtocolVersion) {
		v = *p.ProtocolVersion
	}
	s.mu.Lock()
	s.version = v
	s.mu.Unlock()
	s.log.Debug("initialize", "client", p.ClientInfo.Name, "client_version", p.ClientInfo.Version,
		"asked", *p.ProtocolVersion, "protocol", v)
	return map[string]any{
		"protocolVersion": v,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
		"serverInfo":      map[string]any{"name": "warren", "version": s.opts.Version},
		"instructions":    instructions,
	}, nil
}

// instructions is initialize's instructions: what the tools are.
const instructions = "warren's agent tools: message your parent, children and siblings (send_message, broadcast, " +
	"check_inbox), spawn and manage child agents (spawn_agent, list_children, inspect_agent, gate, permit_turn), " +
	"report your result (complete) and ask the operator (await_input). Each call is a step of your current turn: " +
	"warren logs it and, if the turn is re-run after a crash, answers it from the log."

// unmarshalParams decodes params (absent or null: {}) into v.
func unmarshalParams(params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	if bytes.TrimSpace(params)[0] != '{' {
		return errors.New("params must be an object")
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad params: %w", err)
	}
	return nil
}

// idKey is the canonical form of an id, to match a cancellation.
func idKey(id json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, id); err != nil {
		return string(id)
	}
	return buf.String()
}

// clip shortens a client-given text for an error message.
func clip(b []byte) string {
	return textcut.Cut(string(b), 80, "...")
}
