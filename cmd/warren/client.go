package main

import (
	"context"
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
