package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/warren-dev/warren/provider"
)

// CallToolInTurn runs a tool for an agent as a call of its running turn
// (a request made with the agent's credential).
func (c *Core) CallToolInTurn(ctx context.Context, agentID, tool string, args map[string]any) (map[string]any, error) {
	a, ok := c.agent(agentID)
	if !ok {
		return nil, notFound(agentID)
	}
	if args == nil {
		args = map[string]any{}
	}
	a.mu.Lock()
	var t *runTools
	if a.cur != nil {
		t = a.cur.tools
	}
	name := a.p.Name
	a.mu.Unlock()
	if t == nil {
		return nil, errNoTurn(name)
	}
	return t.external(ctx, tool, args, name)
}

func errNoTurn(name string) error {
	return failf(ErrWrongState, "agent %s has no running turn: a tool call made with an agent credential is a call "+
		"of the agent's running turn (logged and replayed with it), so it cannot be made between turns", name)
}

// extCalls tracks the calls that joined an attempt over the socket.
type extCalls struct {
	mu        sync.Mutex
	open      bool
	ctx       context.Context         // the attempt's
	suspend   context.CancelCauseFunc // ends the attempt when a call suspends the run
	suspended error                   // the error of the call that did
	inflight  sync.WaitGroup
}

// openExternal lets calls join the attempt until closeExternal.
func (t *runTools) openExternal(ctx context.Context, suspend context.CancelCauseFunc) {
	t.ext.mu.Lock()
	t.ext.open, t.ext.ctx, t.ext.suspend = true, ctx, suspend
	t.ext.mu.Unlock()
}

// closeExternal refuses further calls, waits for those in flight (so their
// tool.call entries precede the end of the attempt) and returns the error
// of a call that suspended the run, if any.
func (t *runTools) closeExternal() error {
	t.ext.mu.Lock()
	t.ext.open = false
	t.ext.mu.Unlock()
	t.ext.inflight.Wait()
	t.ext.mu.Lock()
	defer t.ext.mu.Unlock()
	return t.ext.suspended
}

// external runs a call that arrived over the socket as the attempt's next
// call. It ends when ctx (the request) or the attempt ends.
func (t *runTools) external(ctx context.Context, tool string, args map[string]any, name string) (map[string]any, error) {
	t.ext.mu.Lock()
	if !t.ext.open {
		t.ext.mu.Unlock()
		return nil, errNoTurn(name)
	}
	t.ext.inflight.Add(1)
	actx, suspend := t.ext.ctx, t.ext.suspend
	t.ext.mu.Unlock()
	defer t.ext.inflight.Done()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(actx, cancel)
	defer stop()
	res, err := t.CallTool(cctx, tool, args)
	switch {
	case errors.Is(err, provider.ErrRunSuspended):
		t.ext.mu.Lock()
		if t.ext.suspended == nil {
			t.ext.suspended = err
		}
		t.ext.mu.Unlock()
		suspend(err)
		return nil, failf(ErrUnavailable, "%w: the turn of %s ends now and its process is stopped; it is re-run when the wait is answered", err, name)
	case err != nil && actx.Err() != nil:
		return nil, failf(ErrUnavailable, "the turn of %s ended during the call: %w", name, err)
	case err != nil:
		return nil, fmt.Errorf("tool %s for agent %s: %w", tool, name, err)
	}
	return res, nil
}

// setTurnTools publishes (or, with nil, withdraws) the ToolCaller of the
// attempt in progress of run runID.
func (a *agent) setTurnTools(runID string, t *runTools) {
	a.mu.Lock()
	if a.cur != nil && a.cur.runID == runID {
		a.cur.tools = t
	}
	a.mu.Unlock()
}
