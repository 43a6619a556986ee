package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/server"
)

// Requests made with an agent credential (param "credential", the value of
// WARREN_AGENT_CREDENTIAL in an agent process's environment) are done as
// that agent, never with the operator's authority:
//
//   - tool.call runs the tool for the credential's agent (agent_id may be
//     left out; if given it must name that agent), as a call of the agent's
//     running turn: it joins the attempt's ToolCaller, so it takes the next
//     position, is logged as that turn's tool.call, obeys the routing rules
//     of SPEC 6 and is answered from the log when the run is re-run. With
//     no running turn it is refused (code 2).
//   - every other method is refused (code 2): an agent acts through its
//     tools only.
//   - an unknown or revoked credential (its process has been reaped, or the
//     daemon restarted since it was issued) is code 5.
//
// Requests without a credential keep the operator's authority (the socket
// is owner-only and the server checks the peer's uid).

// handleAsAgent serves a request that carries a credential.
func (h *handler) handleAsAgent(ctx context.Context, req *protocol.Request, _ server.Stream) (any, error) {
	p := req.Params
	cred, err := p.String("credential")
	if err != nil {
		return nil, err
	}
	agentID, ok := h.c.creds.agentOf(cred)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeTokenRejected, "agent credential rejected: it is unknown or revoked "+
			"(the process it was issued to has ended, or the daemon restarted since); a process finds its own in $%s", provider.EnvCredential)
	}
	if req.Method != "tool.call" {
		return nil, protocol.Errorf(protocol.CodeInvalid, "method %s is not available with an agent credential: an agent acts "+
			"only through its tools (method tool.call); a request without a credential is the operator's", req.Method)
	}
	if p.Has("agent_id") {
		id, err := h.ref(p, "agent_id")
		if err != nil {
			return nil, err
		}
		if id != agentID {
			return nil, protocol.Errorf(protocol.CodeInvalid, "an agent credential acts only as its own agent (%s); agent_id names %s",
				h.c.displayName(agentID), h.c.displayName(id))
		}
	}
	tool, err := p.String("tool")
	if err != nil {
		return nil, err
	}
	args, err := p.OptMap("arguments")
	if err != nil {
		return nil, err
	}
	return h.c.CallToolInTurn(ctx, agentID, tool, args)
}

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
