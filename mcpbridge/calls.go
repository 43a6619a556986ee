package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/tools"
)

// enqueue checks a tools/call and queues it for the worker.
func (s *server) enqueue(ctx context.Context, id json.RawMessage, params json.RawMessage) error {
	var p struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := unmarshalParams(params, &p); err != nil {
		return s.out.error(id, errorf(CodeInvalidParams, "tools/call: %v", err))
	}
	if p.Name == nil {
		return s.out.error(id, errorf(CodeInvalidParams, "tools/call: params.name (the tool) is missing"))
	}
	if _, ok := tools.Lookup(*p.Name); !ok {
		return s.out.error(id, errorf(CodeInvalidParams, "unknown tool %q: warren's tools are %s (tools/list)",
			clip([]byte(*p.Name)), strings.Join(tools.Names(), ", ")))
	}
	args := map[string]any{}
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" {
		if bytes.TrimSpace(p.Arguments)[0] != '{' {
			return s.out.error(id, errorf(CodeInvalidParams, "tools/call %s: arguments must be an object", *p.Name))
		}
		dec := json.NewDecoder(bytes.NewReader(p.Arguments))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			return s.out.error(id, errorf(CodeInvalidParams, "tools/call %s: arguments: %v", *p.Name, err))
		}
	}
	if _, err := protocol.Normalize(args); err != nil {
		return s.out.error(id, errorf(CodeInvalidParams, "tools/call %s: arguments: %v", *p.Name, err))
	}
	key := idKey(id)
	cctx, cancel := context.WithCancel(ctx)
	c := &call{id: id, key: key, ctx: cctx, tool: *p.Name, args: args}
	s.mu.Lock()
	if _, dup := s.inflight[key]; dup {
		s.mu.Unlock()
		cancel()
		return s.out.error(id, errorf(CodeInvalidRequest, "request id %s is already in use by a tool call in progress", clip(id)))
	}
	s.inflight[key] = cancel
	s.mu.Unlock()
	select {
	case s.queue <- c:
		return nil
	default:
		s.done(c)
		return s.out.error(id, errorf(CodeInternal, "%d tool calls are already waiting for the daemon; wait for their results", maxQueued))
	}
}

// done forgets a call.
func (s *server) done(c *call) {
	s.mu.Lock()
	cancel := s.inflight[c.key]
	delete(s.inflight, c.key)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// work runs the queued calls one at a time, in arrival order, until the
// queue is closed and empty or ctx ends.
func (s *server) work(ctx context.Context) {
	for {
		var c *call
		select {
		case <-ctx.Done():
			return
		case q, ok := <-s.queue:
			if !ok {
				return
			}
			c = q
		}
		if c.ctx.Err() != nil {
			s.done(c) // cancelled while queued: no reply
			continue
		}
		res, err := s.opts.Caller.CallTool(c.ctx, c.tool, c.args)
		cancelled := c.ctx.Err() != nil
		s.done(c)
		switch {
		case err != nil && cancelled:
			s.log.Debug("tool call cancelled", "tool", c.tool, "err", err)
		case err != nil:
			e := s.callError(err)
			s.log.Info("tool call failed", "tool", c.tool, "code", e.Code, "err", e.Message)
			_ = s.out.error(c.id, e)
		default:
			if werr := s.out.result(c.id, s.toolResult(res)); werr != nil && !s.out.broken() {
				_ = s.out.error(c.id, errorf(CodeInternal, "the result of %s cannot be sent: %v", c.tool, werr))
			}
		}
	}
}

// callError maps a Caller error to the JSON-RPC error the client gets.
func (s *server) callError(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		prefix := "warren refused the tool call: "
		if pe.Code == protocol.CodeUnavailable {
			// The turn ended during the call (a wait began, a cancel, a
			// timeout) or the daemon is shutting down.
			prefix = "the tool call did not complete: "
		}
		return &rpcError{Code: CodeRefused, Message: prefix + pe.Message,
			Data: map[string]any{"warren_code": pe.Code, "warren_error": protocol.CodeName(pe.Code)}}
	}
	return errorf(CodeInternal, "%v", err)
}

// toolResult is the MCP result of a tool's result.
func (s *server) toolResult(res map[string]any) map[string]any {
	if res == nil {
		res = map[string]any{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	text := "{}"
	if err := enc.Encode(res); err == nil {
		text = strings.TrimSuffix(buf.String(), "\n")
	}
	_, isErr := res["error"].(string)
	out := map[string]any{
		"content": []any{map[string]any{"type": "text", "text": text}},
		"isError": isErr,
	}
	s.mu.Lock()
	v := s.version
	s.mu.Unlock()
	if v == "" || v >= structuredSince {
		out["structuredContent"] = res
	}
	return out
}
