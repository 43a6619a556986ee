package inproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/warren-dev/warren/provider"
)

// session is one inproc provider.Session.
type session struct {
	p      *Provider
	spec   provider.Spec
	handle string

	mu      sync.Mutex
	history []provider.Turn
	stopped bool
}

var _ provider.Session = (*session)(nil)

// Handle implements provider.Session.
func (s *session) Handle() string { return s.handle }

// outcome is what a program goroutine hands back to Send.
type outcome struct {
	resp string
	err  error
}

// Send implements provider.Session: it runs the program registered for the
// session's model.
func (s *session) Send(ctx context.Context, prompt string, tio provider.TurnIO) (string, error) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return "", provider.Permanent(fmt.Errorf("inproc send (handle %s): %w; restore or create a new session", s.handle, ErrStopped))
	}
	// The history is append-only: a capacity-capped view is a stable
	// snapshot without copying.
	hist := s.history[:len(s.history):len(s.history)]
	s.mu.Unlock()

	prog, err := s.p.program(s.spec.Model)
	if err != nil {
		return "", provider.Permanent(err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("inproc turn not started: %w", err)
	}
	t := &Turn{
		Prompt:       prompt,
		History:      hist,
		AgentID:      s.spec.AgentID,
		Model:        s.spec.Model,
		Instructions: s.spec.Instructions,
		Cwd:          s.spec.Cwd,
		Handle:       s.handle,
		ctx:          ctx,
		tio:          tio,
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- outcome{err: provider.Permanent(fmt.Errorf("inproc program for model %q panicked: %v", s.spec.Model, r))}
			}
		}()
		resp, err := prog(ctx, t)
		done <- outcome{resp: resp, err: err}
	}()

	var out outcome
	select {
	case out = <-done:
	case <-ctx.Done():
		t.finish()
		s.p.log.Debug("turn cancelled", "agent_id", s.spec.AgentID, "handle", s.handle)
		return "", fmt.Errorf("inproc turn for model %q cancelled: %w", s.spec.Model, ctx.Err())
	}
	calls, suspendErr, chunked := t.finish()
	if suspendErr != nil {
		if out.err != nil && errors.Is(out.err, provider.ErrRunSuspended) {
			return "", out.err
		}
		return "", fmt.Errorf("inproc turn for model %q ended by a tool call: %w", s.spec.Model, suspendErr)
	}
	if out.err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(out.err, ctxErr) {
			return "", fmt.Errorf("inproc turn for model %q cancelled: %w (program error: %v)", s.spec.Model, ctxErr, out.err)
		}
		return "", fmt.Errorf("inproc model %q: %w", s.spec.Model, out.err)
	}
	if !chunked && tio.OnChunk != nil {
		tio.OnChunk(out.resp)
	}
	turn := provider.Turn{Message: prompt, Calls: calls, Response: out.resp}
	s.mu.Lock()
	s.history = append(s.history, turn)
	snapshot := s.history[:len(s.history):len(s.history)]
	s.mu.Unlock()
	s.p.recordNative(s.handle, snapshot)
	return out.resp, nil
}

// Suspend implements provider.Session: the JSON blob {handle, turns}; the
// history itself comes back from the agent's log on Restore
// (Capabilities.HistoryOnRestore), so the blob stays small.
func (s *session) Suspend(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("inproc suspend: %w", err)
	}
	s.mu.Lock()
	b := blob{Handle: s.handle, Turns: len(s.history)}
	s.mu.Unlock()
	data, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("inproc suspend: encoding the blob: %w", err)
	}
	return data, nil
}

// Stop implements provider.Session. Later Sends fail with ErrStopped; Stop
// is idempotent.
func (s *session) Stop() error {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	return nil
}
