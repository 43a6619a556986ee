package engine

import (
	"context"
	"fmt"
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
	t, name := a.TurnTools()
	if t == nil {
		return nil, errNoTurn(name)
	}
	return external(ctx, t, tool, args, name)
}

func errNoTurn(name string) error {
	return failf(ErrWrongState, "agent %s has no running turn: a tool call made with an agent credential is a call "+
		"of the agent's running turn (logged and replayed with it), so it cannot be made between turns", name)
}

// external runs a call that arrived over the socket as the attempt's next
// call (calldoor.go). It ends when ctx (the request) or the attempt
// ends.
func external(ctx context.Context, t *runTools, tool string, args map[string]any, name string) (map[string]any, error) {
	res, status, err := t.Door.Call(ctx, func(cctx context.Context) (map[string]any, error) {
		return t.CallTool(cctx, tool, args)
	})
	switch {
	case status == doorClosed:
		return nil, errNoTurn(name)
	case status == doorSuspended:
		return nil, failf(ErrUnavailable, "%w: the turn of %s ends now and its process is stopped; it is re-run when the wait is answered", err, name)
	case status == doorEnded:
		return nil, failf(ErrUnavailable, "the turn of %s ended during the call: %w", name, err)
	case err != nil:
		return nil, fmt.Errorf("tool %s for agent %s: %w", tool, name, err)
	}
	return res, nil
}
