package main

import (
	"context"
	"fmt"
	"github.com/warren-dev/warren/cmd/warren/internal/client"

	"github.com/warren-dev/warren/cmd/warren/internal/notices"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
)

// callOut makes one RPC and, with --json, prints its result; it returns the
// result and whether the caller should print its own rendering.
func (c *cli) callOut(ctx context.Context, method string, params map[string]any) (map[string]any, bool, error) {
	res, err := c.daemon().Call(ctx, method, params)
	if err != nil {
		return nil, false, err
	}
	if c.json {
		return res, false, reply.JSON(c.stdout, res)
	}
	return res, true, nil
}

// listOut is callOut for agent.list: every page (client.ListAgents), one
// reply.
func (c *cli) listOut(ctx context.Context, params map[string]any) (map[string]any, bool, error) {
	res, err := client.ListAgents(ctx, c.daemon(), params)
	if err != nil {
		return nil, false, err
	}
	if c.json {
		return res, false, reply.JSON(c.stdout, res)
	}
	return res, true, nil
}

// notices is where the notices of send and attach come from and go.
func (c *cli) notices() notices.Config {
	d := c.daemon()
	return notices.Config{Daemon: d, Stderr: c.stderr, HomeArg: d.HomeArg(), Quiet: c.json}
}

// fillResponse reads back a response a turn's reply gave by reference
// (response_ref: too large for a reply frame) from the agent's log, into
// res["response"].
func (c *cli) fillResponse(ctx context.Context, res map[string]any) error {
	ref := reply.Obj(res, "response_ref")
	if ref == nil {
		return nil
	}
	seq := reply.Num(ref, "seq")
	page, err := c.daemon().Call(ctx, "agent.log", map[string]any{"agent_id": reply.Str(ref, "agent_id"), "since_seq": seq - 1, "limit": 1})
	if err != nil {
		return client.RPCError("agent.log", err)
	}
	for _, e := range reply.List(page, "events") {
		if reply.Num(e, "seq") == seq {
			res["response"] = reply.Str(reply.Obj(e, "data"), "response")
			return nil
		}
	}
	return fmt.Errorf("the response of run %s is not at seq %d of the agent's log; read it with warren logs", reply.Str(res, "run_id"), seq)
}
