// Package complete completes the shell's words for the command tree
// (cobra's completion functions): agent references, as every path and
// each name that names one agent only, from the daemon (agent.list) or,
// when it does not answer, from the first entry of each log on disk, as
// warren logs reads them; and provider entry names from the daemon. A
// completion waits for the daemon briefly.
package complete

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/offline"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
)

// timeout bounds how long a completion waits for the daemon.
const timeout = 2 * time.Second

// Caller makes one RPC to the daemon of the home.
type Caller interface {
	Call(ctx context.Context, method string, params map[string]any) (map[string]any, error)
}

// Completer completes from the home Open returns (the flags are parsed
// when a completion runs) and its daemon.
type Completer struct {
	Open func() (home string, daemon Caller, err error)
}

// Agents completes the REF argument of a command (its first positional
// argument) with agent paths and unique names.
func (c *Completer) Agents(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return c.agentRefs(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// AgentFlag completes a flag whose value is an agent (--parent).
func (c *Completer) AgentFlag(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return c.agentRefs(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// Providers completes --provider with the daemon's provider entries
// (nothing when the daemon is down).
func (c *Completer) Providers(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	if _, res, err := c.call(cmd.Context(), "daemon.providers"); err == nil {
		for _, p := range reply.List(res, "providers") {
			if n := reply.Str(p, "name"); strings.HasPrefix(n, toComplete) {
				out = append(out, cobra.CompletionWithDesc(n, reply.Str(p, "type")))
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// call makes one RPC for a completion, briefly; it returns the home ("" when
// it could not be resolved).
func (c *Completer) call(ctx context.Context, method string) (string, map[string]any, error) {
	home, daemon, err := c.Open()
	if err != nil {
		return "", nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := daemon.Call(ctx, method, nil)
	return home, res, err
}

// agentRefs lists the references of the live agents that start with
// prefix: every path, and each name that names one agent only.
func (c *Completer) agentRefs(ctx context.Context, prefix string) []cobra.Completion {
	type ref struct{ path, name, desc string }
	var refs []ref
	if home, res, err := c.call(ctx, "agent.list"); err == nil {
		for _, a := range reply.List(res, "agents") {
			refs = append(refs, ref{reply.Str(a, "path"), reply.Str(a, "name"), reply.Str(a, "status")})
		}
	} else if home != "" {
		agents, _ := offline.Agents(home)
		for _, a := range agents {
			if offline.Terminated(home, a.ID) {
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
