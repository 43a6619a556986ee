package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/server"
)

// sockets are the agents' own sockets on a worker, one per agent with a
// live session: <dir>/agents/<id>/agent.sock, given to the agent's
// processes as WARREN_SOCKET (and bound into its sandbox). Like the
// daemon's agent sockets they serve tool.call for that agent and nothing
// else; a call is forwarded to the daemon as a call of the agent's
// running attempt (`warren mcp-bridge` of an acp agent, or a scripted
// program's call_tool_socket). Between turns: code 2.
type sockets struct {
	w    *Worker
	pool *server.Pool
}

func newSockets(w *Worker, log hclog.Logger) *sockets {
	return &sockets{w: w, pool: server.NewPool(context.Background(), log.Named("agent-socket"))}
}

// acquire starts agent id's socket, or shares it, and returns its path
// and the function that gives it back.
func (s *sockets) acquire(_ context.Context, id string) (string, func(), error) {
	dir := filepath.Join(s.w.o.Dir, "agents", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "agent.sock")
	release, err := s.pool.Acquire(id, path, func() server.Handler { return agentHandler{w: s.w, id: id} })
	if err != nil {
		return "", nil, err
	}
	return path, release, nil
}

// closeAll closes every socket (the worker stops).
func (s *sockets) closeAll() { s.pool.CloseAll() }

// agentHandler serves one agent's socket on the worker.
type agentHandler struct {
	w  *Worker
	id string
}

func (h agentHandler) Handle(ctx context.Context, req *protocol.Request, _ server.Stream) (any, error) {
	if req.Method != "tool.call" {
		return nil, protocol.Errorf(protocol.CodeInvalid, "this is the socket of agent %s on worker %s: it serves tool.call for that agent and nothing else (method %s)",
			h.id, h.w.o.ID, req.Method)
	}
	p := req.Params
	if p.Has("credential") {
		cred, err := p.String("credential")
		if err != nil {
			return nil, err
		}
		if id, ok := h.w.launches.AgentOf(cred); !ok || id != h.id {
			return nil, protocol.Errorf(protocol.CodeTokenRejected, "this is the socket of agent %s: the credential given is not a live credential of that agent", h.id)
		}
	}
	if p.Has("agent_id") {
		ref, err := p.String("agent_id")
		if err != nil {
			return nil, err
		}
		if ref != h.id {
			return nil, protocol.Errorf(protocol.CodeInvalid, "this is the socket of agent %s: it acts as that agent only, and agent_id names %q", h.id, ref)
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
	t := h.w.turnOf(h.id)
	if t == nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, "agent %s runs no turn on worker %s: a tool call through its socket is part of a running turn", h.id, h.w.o.ID)
	}
	res, err := t.CallTool(ctx, tool, args)
	if errors.Is(err, provider.ErrRunSuspended) {
		t.suspend(err) // the attempt ends, answered "suspended"
	}
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, "tool %s: %v", tool, err)
	}
	return res, nil
}
