package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/offline"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
)

// completeTimeout bounds how long a completion waits for the daemon.
const completeTimeout = 2 * time.Second

// completeAgents completes the REF argument of a command (its first
// positional argument) with agent paths and unique names.
func (c *cli) completeAgents(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return c.agentRefs(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeAgentFlag completes a flag whose value is an agent (--parent).
func (c *cli) completeAgentFlag(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return c.agentRefs(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeProviders completes --provider with the daemon's provider
// entries (nothing when the daemon is down).
func (c *cli) completeProviders(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	if res, err := c.completionCall(cmd.Context(), "daemon.providers"); err == nil {
		for _, p := range reply.List(res, "providers") {
			if n := reply.Str(p, "name"); strings.HasPrefix(n, toComplete) {
				out = append(out, cobra.CompletionWithDesc(n, reply.Str(p, "type")))
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completionCall makes one RPC for a completion, briefly.
func (c *cli) completionCall(ctx context.Context, method string) (map[string]any, error) {
	home, err := resolveHome(c.homeFlag)
	if err != nil {
		return nil, err
	}
	c.home = home
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	return c.daemon().Call(ctx, method, nil)
}

// agentRefs lists the references of the live agents that start with
// prefix: every path, and each name that names one agent only. They come
// from the daemon (agent.list) or, when it does not answer, from the
// first entry of each log on disk, as warren logs reads them.
func (c *cli) agentRefs(ctx context.Context, prefix string) []cobra.Completion {
	type ref struct{ path, name, desc string }
	var refs []ref
	if res, err := c.completionCall(ctx, "agent.list"); err == nil {
		for _, a := range reply.List(res, "agents") {
			refs = append(refs, ref{reply.Str(a, "path"), reply.Str(a, "name"), reply.Str(a, "status")})
		}
	} else if c.home != "" {
		agents, _ := offline.Agents(c.home)
		for _, a := range agents {
			if offline.Terminated(c.home, a.ID) {
				continue
			}
			refs = append(refs, ref{a.Path, a.Name, "daemon not running"})
		}
	}
	names := map[string]int{}
	for _, r := range refs {
		names[r.name]++
	}
	var out []cobra.Completion
	add := func(v, desc string) {
		if strings.HasPrefix(v, prefix) {
			out = append(out, cobra.CompletionWithDesc(v, desc))
		}
	}
	for _, r := range refs {
		add(r.path, r.desc)
		if r.name != r.path && names[r.name] == 1 {
			add(r.name, r.desc+", "+r.path)
		}
	}
	return out
}
