package daemon

import (
	"context"

	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

func (h *handler) cancel(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, err := h.ref(p, "agent_id")
	if err != nil {
		return nil, err
	}
	if err := h.c.Cancel(ctx, id); err != nil {
		return nil, err
	}
	status, ok := h.c.Status(id)
	if !ok {
		status = "idle"
	}
	return map[string]any{"agent_id": id, "status": status}, nil
}

// reset starts an agent on a fresh context (the log keeps its history).
func (h *handler) reset(_ context.Context, p protocol.Params, _ server.Stream) (any, error) {
	id, err := h.ref(p, "agent_id")
	if err != nil {
		return nil, err
	}
	if err := h.c.Reset(id); err != nil {
		return nil, err
	}
	return map[string]any{"agent_id": id, "status": "reset"}, nil
}

func (h *handler) resume(ctx context.Context, p protocol.Params, _ server.Stream) (any, error) {
	all, err := p.OptBool("all", false)
	if err != nil {
		return nil, err
	}
	recursive, err := p.OptBool("recursive", false)
	if err != nil {
		return nil, err
	}
	if all || recursive {
		return h.resumeTree(ctx, p, all)
	}
	id, err := h.ref(p, "agent_id")
	if err != nil {
		return nil, err
	}
	opt, err := optStrings(p, "token", "response", "token_id")
	if err != nil {
		return nil, err
	}
	tok, resp, tokID := opt[0], opt[1], opt[2]
	if tok != "" && tokID != "" {
		return nil, protocol.Errorf(protocol.CodeInvalid, "give the wait's token or its token_id, not both")
	}
	if tok == "" && tokID == "" && p.Has("response") {
		return nil, protocol.Errorf(protocol.CodeInvalid, "a response needs the wait's token (param token) or its token_id (listed by waits.list)")
	}
	keep, err := p.OptBool("keep_workspace", false)
	if err != nil {
		return nil, err
	}
	if p.Has("token_id") && tokID == "" {
		return nil, protocol.Errorf(protocol.CodeInvalid, "an empty token_id names no wait; list the pending waits with warren waits")
	}
	// With token_id the peer passed the socket's owner check
	// (server/peer.go): a local operator may name the wait by its public
	// id (SPEC 4).
	res, err := h.c.ResumeWith(ctx, id, engine.ResumeOptions{Token: tok, TokenID: tokID, Response: resp, KeepWorkspace: keep})
	if err != nil {
		return nil, err
	}
	return turnResultMap(id, res)
}

// resumeTree answers agent.resume with recursive (the agent's subtree)
// or all (the whole tree; agent_id may be left out): every interrupted
// run in it is re-run; it returns at once with what was started and what
// could not be, with why.
func (h *handler) resumeTree(ctx context.Context, p protocol.Params, all bool) (any, error) {
	if p.Has("token") || p.Has("token_id") || p.Has("response") {
		return nil, protocol.Errorf(protocol.CodeInvalid, "recursive and all re-run interrupted runs; they take no token, token_id or response (answer a wait alone)")
	}
	id := ""
	if !all || p.Has("agent_id") {
		var err error
		if id, err = h.ref(p, "agent_id"); err != nil {
			return nil, err
		}
	}
	runs, err := h.c.ResumeTree(ctx, id, all && id == "")
	if err != nil {
		return nil, err
	}
	return map[string]any{"runs": interruptedList(runs)}, nil
}

// interruptedList is runs as the wire shows them.
func interruptedList(runs []engine.InterruptedRun) []any {
	out := make([]any, len(runs))
	for i, r := range runs {
		m := map[string]any{"agent_id": r.AgentID, "path": r.Path, "run_id": r.RunID, "reason": r.Reason, "rerun": r.Rerun}
		if r.Left != "" {
			m["left"] = r.Left
		}
		out[i] = m
	}
	return out
}
