package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

// A sandboxed agent reaches warren only through a socket of its own,
// <home>/agents/<id>/agent.sock (SPEC 12), bound into its sandbox: the
// main socket is not there. Its server serves tool.call for that agent
// and nothing else, as a call of the agent's running turn (between turns:
// code 2, as with a credential). No credential is needed; one given must
// be a live credential of that agent, and an agent_id given must name
// it. The socket is made when the agent's first process is prepared and
// closed when its last one has ended (engine.CoreOptions.AgentSocket).

// agentSockets are the sandboxed agents' own sockets of one daemon: a
// server.Pool keyed by agent, bound to the core that serves their calls.
type agentSockets struct {
	home string
	pool *server.Pool

	mu   sync.Mutex
	core *engine.Core // set once the core exists (before recovery)
}

func newAgentSockets(ctx context.Context, home string, log hclog.Logger) *agentSockets {
	return &agentSockets{home: home, pool: server.NewPool(ctx, log.Named("agent-socket"))}
}

// setCore binds the sockets to the core that serves their calls.
func (s *agentSockets) setCore(c *engine.Core) {
	s.mu.Lock()
	s.core = c
	s.mu.Unlock()
}

// acquire starts agent id's socket, or shares the running one, and
// returns its path and the function that gives it back.
func (s *agentSockets) acquire(id string) (string, func(), error) {
	path := filepath.Join(s.home, "agents", id, "agent.sock")
	s.mu.Lock()
	core := s.core
	s.mu.Unlock()
	if core == nil {
		return "", nil, fmt.Errorf("the daemon is not ready to serve agent sockets")
	}
	release, err := s.pool.Acquire(id, path, func() server.Handler { return agentHandler{c: core, id: id} })
	if err != nil {
		return "", nil, err
	}
	return path, release, nil
}

// closeAll closes every agent socket (the daemon stops).
func (s *agentSockets) closeAll() { s.pool.CloseAll() }

// agentHandler serves one sandboxed agent's socket.
type agentHandler struct {
	c  *engine.Core
	id string
}

func (h agentHandler) Handle(ctx context.Context, req *protocol.Request, _ server.Stream) (any, error) {
	res, err := h.handle(ctx, req)
	if err != nil {
		return nil, toRPCError(err)
	}
	return res, nil
}

func (h agentHandler) handle(ctx context.Context, req *protocol.Request) (map[string]any, error) {
	name := h.c.DisplayName(h.id)
	if req.Method != "tool.call" {
		return nil, protocol.Errorf(protocol.CodeInvalid, "this is the socket of agent %s: it serves tool.call for that agent and nothing else (method %s)", name, req.Method)
	}
	p := req.Params
	if p.Has("credential") {
		cred, err := p.String("credential")
		if err != nil {
			return nil, err
		}
		if id, ok := h.c.AgentOfCredential(cred); !ok || id != h.id {
			return nil, protocol.Errorf(protocol.CodeTokenRejected, "this is the socket of agent %s: the credential given is not a live credential of that agent", name)
		}
	}
	if p.Has("agent_id") {
		ref, err := p.String("agent_id")
		if err != nil {
			return nil, err
		}
		if id, err := h.c.Resolve(ref); err != nil || id != h.id {
			return nil, protocol.Errorf(protocol.CodeInvalid, "this is the socket of agent %s: it acts as that agent only, and agent_id names %q", name, ref)
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
	return h.c.CallToolInTurn(ctx, h.id, tool, args)
}
