package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/tools"
)

// Send implements provider.Session: session/prompt, with the agent's text
// streamed through io.OnChunk and its permission requests answered by the
// entry's policy. A cancelled ctx, a suspension, a turn timeout or a flood
// sends session/cancel and, when the agent does not answer within
// CancelGrace, kills its process group.
func (s *Session) Send(ctx context.Context, prompt string, io provider.TurnIO) (string, error) {
	s.mu.Lock()
	stopped, c := s.stopped, s.conn
	s.mu.Unlock()
	if stopped {
		return "", provider.Permanent(fmt.Errorf("acp send: %w; restore or create a new session", ErrStopped))
	}
	// A config reload applies from the next turn (the command from the
	// next process start).
	if st, err := s.p.settings(); err == nil {
		s.st = st
	}
	if c == nil || c.Err() != nil {
		if err := s.revive(ctx); err != nil {
			return "", err
		}
		s.mu.Lock()
		c = s.conn
		s.mu.Unlock()
	}
	maxText := s.p.opts.MaxTurnOutput
	if m := s.st.MaxText; m > 0 && m < maxText {
		maxText = m
	}
	t := &turnState{onChunk: io.OnChunk, perms: make(chan *message, 16), flood: make(chan struct{}), maxText: maxText}
	s.mu.Lock()
	s.turn, s.replay = t, false
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.turn = nil
		s.mu.Unlock()
		t.mu.Lock()
		t.closed = true
		t.mu.Unlock()
	}()
	s.mu.Lock()
	text := s.preamble + prompt
	s.mu.Unlock()
	reply, _, err := c.start("session/prompt", promptParams{SessionID: s.Handle(), Prompt: []contentBlock{{Type: "text", Text: text}}})
	if err != nil {
		return "", s.connErr("session/prompt", err)
	}
	s.mu.Lock()
	s.preamble = ""
	s.mu.Unlock()
	timeout, stopTimer := deadline(s.st.Timeout)
	defer stopTimer()
	for {
		select {
		case m := <-reply:
			return s.finish(m, t, io)
		case <-c.dead:
			return "", s.connErr("the turn", c.Err())
		case req := <-t.perms:
			if err := s.permission(ctx, c, t, io, req); err != nil {
				return s.cancelTurn(c, reply, t, req, err)
			}
		case <-t.flood:
			return s.cancelTurn(c, reply, t, nil, provider.Permanent(t.floodErr))
		case <-ctx.Done():
			err := ctx.Err()
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
				err = fmt.Errorf("%w (%w)", err, cause)
			}
			return s.cancelTurn(c, reply, t, nil, fmt.Errorf("acp turn: %w", err))
		case <-timeout:
			return s.cancelTurn(c, reply, t, nil, provider.Transient(fmt.Errorf("entry %q: %w: the turn ran over %s", s.p.opts.Name, ErrTimeout, s.st.Timeout), 0))
		}
	}
}

// finish turns the prompt's answer into the turn's result.
func (s *Session) finish(m *message, t *turnState, io provider.TurnIO) (string, error) {
	t.mu.Lock()
	text := t.text.String()
	t.mu.Unlock()
	var res promptResult
	if err := decodeResult("session/prompt", m, &res); err != nil {
		var rerr *RPCError
		if errors.As(err, &rerr) && transientRPC(rerr) {
			return "", provider.Transient(fmt.Errorf("entry %q: %w", s.p.opts.Name, err), 0)
		}
		return "", provider.Permanent(fmt.Errorf("entry %q: %w", s.p.opts.Name, err))
	}
	if res.Usage != nil && io.OnUsage != nil {
		io.OnUsage(provider.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens,
			CachedInputTokens: res.Usage.CachedReadTokens, CacheWriteInputTokens: res.Usage.CachedWriteTokens})
	}
	if err := s.modelFailure(t); err != nil {
		return "", err
	}
	switch res.StopReason {
	case "refusal":
		return "", provider.Permanent(fmt.Errorf("entry %q: the agent refused the prompt (stopReason refusal)", s.p.opts.Name))
	case "cancelled":
		return "", provider.Permanent(fmt.Errorf("entry %q: the agent ended the turn as cancelled without warren cancelling it", s.p.opts.Name))
	}
	return text, nil
}

// transientRPC reports whether an agent's error answer says the model
// was overloaded or rate limited, or the connection to it failed.
func transientRPC(e *RPCError) bool {
	if e.Code == 429 || e.Code >= 500 && e.Code <= 599 {
		// An HTTP status passed through as the code (Gemini CLI answers
		// a prompt whose model request failed with the status).
		return true
	}
	s := strings.ToLower(e.Message + " " + string(e.Data))
	for _, w := range []string{"429", "529", "500", "502", "503", "504", "overloaded", "rate limit", "rate_limit", "timeout", "timed out", "econnreset", "econnrefused", "connection"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// cancelTurn ends a turn early with cause: session/cancel, the permission
// requests still open (open, and those queued) answered "cancelled", then
// the prompt's answer awaited for CancelGrace before the agent's process
// group is killed.
func (s *Session) cancelTurn(c *conn, reply <-chan *message, t *turnState, open *message, cause error) (string, error) {
	// session/cancel goes first: the agent then knows why its open
	// permission request is answered "cancelled".
	_ = c.notify("session/cancel", cancelParams{SessionID: s.Handle()})
	if open != nil {
		_ = c.reply(open.ID, cancelledOutcome(), nil)
	}
	grace, stop := deadline(s.p.opts.CancelGrace)
	defer stop()
	for {
		select {
		case <-reply:
			return "", cause
		case req := <-t.perms:
			_ = c.reply(req.ID, cancelledOutcome(), nil)
		case <-c.dead:
			s.kill()
			return "", cause
		case <-grace:
			s.log.Warn("agent did not answer session/cancel in time; killing its process group", "grace", s.p.opts.CancelGrace)
			s.kill()
			return "", cause
		}
	}
}

// handle serves what the agent sends besides answers; it runs on c's
// reader goroutine.
func (s *Session) handle(c *conn, m *message) {
	switch {
	case m.Method == "session/update":
		s.onUpdate(m.Params)
	case m.Method == "session/request_permission" && len(m.ID) > 0:
		s.mu.Lock()
		t := s.turn
		s.mu.Unlock()
		if t != nil {
			select {
			case t.perms <- m:
				return
			default:
			}
		}
		_ = c.reply(m.ID, cancelledOutcome(), nil)
	case len(m.ID) > 0:
		msg := fmt.Sprintf("warren does not serve %s", m.Method)
		if strings.HasPrefix(m.Method, "fs/") || strings.HasPrefix(m.Method, "terminal/") {
			msg += ": it advertises no file system or terminal capability; use the agent's own tools"
		}
		_ = c.reply(m.ID, nil, &RPCError{Code: codeMethodNotFound, Message: msg})
	}
}

// onUpdate streams a session/update of the running turn; other updates
// (between turns, or replayed by a load) are dropped.
func (s *Session) onUpdate(params json.RawMessage) {
	var n sessionNotification
	if err := json.Unmarshal(params, &n); err != nil {
		return
	}
	s.mu.Lock()
	t := s.turn
	if t == nil || s.replay || n.SessionID != s.id {
		s.discarded++
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.updates++
	switch u := n.Update.SessionUpdate; {
	case u == "tool_call" || u == "tool_call_update":
		t.noteToolCall(n.Update.ToolCallID, n.Update.RawInput)
	case u == "session_info_update":
		switch n.Update.Meta.Codex.ThreadStatus.Type {
		case codexSystemError:
			t.failed = true
		case "active":
			// The thread recovered within the turn: what follows is
			// the answer again.
			t.failed = false
			t.failText.Reset()
		}
	}
	text := ""
	if n.Update.SessionUpdate == "agent_message_chunk" {
		var cb contentBlock
		if json.Unmarshal(n.Update.Content, &cb) == nil && cb.Type == "text" {
			text = cb.Text
		}
	}
	switch {
	case t.updates > s.p.opts.MaxTurnUpdates:
		t.stop(fmt.Errorf("entry %q: %w (limits: %d updates, %d bytes of text); the agent was cancelled",
			s.p.opts.Name, ErrFlood, s.p.opts.MaxTurnUpdates, s.p.opts.MaxTurnOutput))
		return
	case t.bytes+len(text) > t.maxText && t.maxText < s.p.opts.MaxTurnOutput:
		// Refused before it is kept: the turn holds at most maxText.
		t.stop(fmt.Errorf("entry %q: %w: the agent's text passed %d bytes, the message limit (limits.message_bytes); the agent was cancelled and the turn fails: ask for a shorter answer (or for long output in a file), or raise limits.message_bytes in config.json (at most 8 MiB)",
			s.p.opts.Name, ErrResponseTooLong, t.maxText))
		return
	case t.bytes+len(text) > t.maxText:
		t.stop(fmt.Errorf("entry %q: %w (limits: %d updates, %d bytes of text); the agent was cancelled",
			s.p.opts.Name, ErrFlood, s.p.opts.MaxTurnUpdates, s.p.opts.MaxTurnOutput))
		return
	}
	t.bytes += len(text)
	if text == "" {
		return
	}
	if t.failed {
		// codex-acp's error text after a failed model request: the
		// turn's error, not its answer (codexerr.go).
		if t.failText.Len() < 4096 {
			t.failText.WriteString(text)
		}
		return
	}
	t.text.WriteString(text)
	if t.onChunk != nil {
		t.onChunk(text)
	}
}

// stop ends the turn for err (the first bound passed wins); t.mu is held.
func (t *turnState) stop(err error) {
	t.floodOnce.Do(func() {
		t.floodErr = err
		close(t.flood)
	})
}

// permission answers one session/request_permission by the entry's
// policy. Under ask it becomes an operator wait (an await_input call of
// kind "permission" through the turn's ToolCaller): the first time the run
// suspends (the error wraps provider.ErrRunSuspended); when the run is
// re-run after the operator answered, the same call at the same position
// returns the answer.
func (s *Session) permission(ctx context.Context, c *conn, t *turnState, io provider.TurnIO, m *message) error {
	var p permissionParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		_ = c.reply(m.ID, nil, &RPCError{Code: codeInvalidParams, Message: "malformed session/request_permission: " + err.Error()})
		return nil
	}
	allow := func(always bool) error {
		kinds := []string{"allow_once", "allow_always"}
		if always {
			kinds = []string{"allow_always", "allow_once"}
		}
		if id, ok := pickOption(p.Options, kinds...); ok {
			return c.reply(m.ID, permissionResult{Outcome: permissionOutcome{Outcome: "selected", OptionID: id}}, nil)
		}
		return c.reply(m.ID, cancelledOutcome(), nil)
	}
	deny := func() error {
		if id, ok := pickOption(p.Options, "reject_once", "reject_always"); ok {
			return c.reply(m.ID, permissionResult{Outcome: permissionOutcome{Outcome: "selected", OptionID: id}}, nil)
		}
		return c.reply(m.ID, cancelledOutcome(), nil)
	}
	if name, ok := warrenToolOf(p, t.seenMCPCall); ok {
		// warren's own tools run under warren's rules (routing, log).
		s.log.Debug("permission for warren's own tool allowed", "tool", name, "title", p.ToolCall.Title)
		_ = allow(false)
		return nil
	}
	switch s.st.Permissions {
	case PermAllow:
		_ = allow(false)
		return nil
	case PermDeny:
		_ = deny()
		return nil
	}
	if io.Tools == nil {
		_ = deny()
		return nil
	}
	if p.ToolCall.Title == "" {
		// codex-acp sends the title in the tool_call update only.
		if ref, ok := t.seenMCPCall(p.ToolCall.ToolCallID); ok {
			p.ToolCall.Title = "mcp." + ref.Server + "." + ref.Tool
		}
	}
	res, err := io.Tools.CallTool(ctx, tools.ToolAwaitInput, map[string]any{"kind": WaitKind, "prompt": permissionPrompt(p),
		"timeout": PermissionWaitTimeout.Seconds()})
	if err != nil {
		return err // the caller cancels the turn and answers m
	}
	if e, isErr := res["error"]; isErr {
		s.log.Warn("the permission wait could not begin; denying", "tool", p.ToolCall.Title, "err", e)
	}
	resp, _ := res["response"].(string)
	switch strings.ToLower(strings.TrimSpace(resp)) {
	case "allow", "allowed", "yes", "y", "ok", "approve", "approved":
		_ = allow(false)
	case "always", "allow always", "allow_always":
		_ = allow(true)
	default:
		_ = deny()
	}
	s.log.Info("permission answered by the operator", "tool", p.ToolCall.Title, "answer", clip(resp, 40))
	return nil
}

// permissionPrompt is the prompt of a permission wait.
func permissionPrompt(p permissionParams) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The agent asks permission to run %q", p.ToolCall.Title)
	if p.ToolCall.Kind != "" {
		fmt.Fprintf(&b, " (%s)", p.ToolCall.Kind)
	}
	if len(p.ToolCall.RawInput) > 0 && string(p.ToolCall.RawInput) != "null" {
		fmt.Fprintf(&b, " with %s", clip(string(p.ToolCall.RawInput), 500))
	}
	b.WriteString(". Answer \"allow\" to let it run once, \"always\" to allow it for the session; anything else denies it.")
	return b.String()
}
