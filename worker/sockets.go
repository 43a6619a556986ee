package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

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
	w   *Worker
	log hclog.Logger

	mu    sync.Mutex
	socks map[string]*agentSocket
}

type agentSocket struct {
	srv  *server.Server
	refs int
	done chan struct{}
}

func newSockets(w *Worker, log hclog.Logger) *sockets {
	return &sockets{w: w, log: log, socks: map[string]*agentSocket{}}
}

// acquire starts agent id's socket, or shares it, and returns its path
// and the function that gives it back.
func (s *sockets) acquire(ctx context.Context, id string) (string, func(), error) {
	dir := filepath.Join(s.w.o.Dir, "agents", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "agent.sock")
	s.mu.Lock()
	defer s.mu.Unlock()
	if as, ok := s.socks[id]; ok {
		as.refs++
		return path, func() { s.release(id, as) }, nil
	}
	srv := server.New(server.Config{SocketPath: path, MaxConns: 16, MaxPending: 16}, agentHandler{w: s.w, id: id},
		s.log.Named("agent-socket").With("agent", id))
	if err := srv.Listen(); err != nil {
		return "", nil, fmt.Errorf("listening on %s: %w (a shorter --home helps when it is too long)", path, err)
	}
	as := &agentSocket{srv: srv, refs: 1, done: make(chan struct{})}
	go func() {
		defer close(as.done)
		if err := srv.Serve(context.WithoutCancel(ctx)); err != nil {
			s.log.Warn("an agent socket stopped", "agent", id, "err", err)
		}
	}()
	s.socks[id] = as
	return path, func() { s.release(id, as) }, nil
}

func (s *sockets) release(id string, as *agentSocket) {
	s.mu.Lock()
	as.refs--
	last := as.refs == 0 && s.socks[id] == as
	if last {
		delete(s.socks, id)
	}
	s.mu.Unlock()
	if last {
		stopSocket(as, s.log)
	}
}

func stopSocket(as *agentSocket, log hclog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := as.srv.Shutdown(ctx); err != nil {
		log.Warn("closing an agent socket", "err", err)
	}
	<-as.done
}

// closeAll closes every socket (the worker stops).
func (s *sockets) closeAll() {
	s.mu.Lock()
	all := s.socks
	s.socks = map[string]*agentSocket{}
	s.mu.Unlock()
	for _, as := range all {
		stopSocket(as, s.log)
	}
}

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
