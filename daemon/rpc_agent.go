package daemon

import (
	"context"

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
	agentID, ok := h.c.AgentOfCredential(cred)
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
				h.c.DisplayName(agentID), h.c.DisplayName(id))
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
