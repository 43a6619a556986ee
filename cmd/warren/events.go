package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/offline"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/protocol"
)

func newEventsCmd(c *cli) *cobra.Command {
	var follow, deltas bool
	var since int
	cmd := &cobra.Command{
		Use:   "events [-f] [--since SEQ] [--deltas] [REF]",
		Short: "print the logged events through the daemon; -f follows live events until Ctrl-C",
		Long: `Without -f, print the events the daemon has logged (of REF, or of every live
agent in path order) and exit, as warren logs does with the files. With -f,
print events as the daemon logs them, until Ctrl-C; --since SEQ first
replays the logged events after SEQ. A stream that ends because the daemon
stopped says so and exits 3.`,
		Example: indent(`warren events lead
warren events -f
warren events -f --since 0 lead/w1
warren events -f --deltas lead   # response text as the model streams it`),
		Args:              args(0, 1, "REF"),
		ValidArgsFunction: c.completeAgents,
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "follow: print events as they are logged, until Ctrl-C")
	f.IntVar(&since, "since", -1, "only the logged events after this seq (with -f: replay them first, then follow)")
	f.BoolVar(&deltas, "deltas", false, "with -f, also print response text as models stream it (turn.delta, not logged)")
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, pos []string) error {
		ref := ""
		if len(pos) == 1 {
			ref = pos[0]
		}
		if !follow {
			if deltas {
				return exit.Usagef(cmd.UseLine(), "--deltas are streamed, never logged: use it with -f")
			}
			return c.printLogged(ctx, ref, max(since, 0))
		}
		return c.followEvents(ctx, ref, since, deltas)
	})
	return cmd
}

// printLogged prints the logged events of ref (or of every live agent, in
// the order agent list shows them) after seq since, page by page (agent.log), and returns.
func (c *cli) printLogged(ctx context.Context, ref string, since int) error {
	cl, err := c.daemon().Dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	type target struct{ id, path string }
	var targets []target
	if ref != "" {
		targets = []target{{id: ref, path: ref}}
		if res, err := cl.Call(ctx, "agent.inspect", map[string]any{"agent_id": ref, "limit": 1}); err == nil {
			targets[0] = target{id: reply.Str(res, "agent_id"), path: reply.Str(res, "path")}
		}
	} else {
		res, err := cl.Call(ctx, "agent.list", nil)
		if err != nil {
			return client.RPCError("agent.list", err)
		}
		agents := reply.List(res, "agents")
		render.SortAgents(agents) // as agent list shows them
		for _, a := range agents {
			targets = append(targets, target{id: reply.Str(a, "agent_id"), path: reply.Str(a, "path")})
		}
	}
	failed, n := false, 0
	for _, t := range targets {
		next := int64(since)
		for {
			page, err := cl.Call(ctx, "agent.log", map[string]any{"agent_id": t.id, "since_seq": next})
			if err != nil {
				if ref != "" {
					return c.daemon().Lost(ctx, &client.CallError{Method: "agent.log", Err: err})
				}
				fmt.Fprintf(c.stderr, "warning: the log of %s: %s\n", t.path, client.RPCError("agent.log", err))
				failed = true
				break
			}
			for _, e := range reply.List(page, "events") {
				e["agent_id"] = t.id
				n++
				if c.json {
					err = reply.JSON(c.stdout, map[string]any{"event": e})
				} else {
					_, err = fmt.Fprintln(c.stdout, render.EventLine(e, t.path))
				}
				if err != nil {
					return err
				}
			}
			more, _ := page["more"].(bool)
			if !more {
				break
			}
			next = reply.Num(page, "next_seq")
		}
	}
	if n == 0 && !c.json {
		fmt.Fprintln(c.stdout, "no events")
	}
	if failed {
		return exit.ErrSilent
	}
	return nil
}

// followEvents prints live events until Ctrl-C; a stream the daemon ends
// (it stopped) is an error saying so.
func (c *cli) followEvents(ctx context.Context, ref string, since int, deltas bool) error {
	params := map[string]any{}
	if ref != "" {
		params["agent_id"] = ref
	}
	if since >= 0 {
		params["since_seq"] = since
	}
	if deltas {
		params["deltas"] = true
	}
	cl, err := c.daemon().Dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	names := &agentNames{c: c, paths: map[string]string{}, tried: map[string]bool{}}
	if !c.json {
		names.refresh(ctx)
	}
	var lastSeq int64 = -1
	err = cl.Stream(ctx, "events.subscribe", params, func(fr protocol.Frame) error {
		if fr.Event != nil && reply.Str(fr.Event, "event") != "turn.delta" {
			lastSeq = reply.Num(fr.Event, "seq")
		}
		if c.json {
			return reply.JSON(c.stdout, frameJSON(fr))
		}
		if fr.Event != nil && reply.Str(fr.Event, "event") == "turn.delta" {
			_, err := fmt.Fprintf(c.stdout, "%s delta %q\n", names.name(ctx, reply.Str(fr.Event, "agent_id")), reply.Str(fr.Event, "text"))
			return err
		}
		if fr.Event != nil {
			_, err := fmt.Fprintln(c.stdout, render.EventLine(fr.Event, names.name(ctx, reply.Str(fr.Event, "agent_id"))))
			return err
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil // Ctrl-C
	}
	if stopped := c.daemon().Stopped(ctx); stopped != nil {
		stopped.Msg = "the event stream ended: " + stopped.Msg
		if ref != "" && lastSeq >= 0 {
			stopped.Msg += fmt.Sprintf("; then continue with: warren events -f --since %d %s%s", lastSeq, render.ShellQuote(ref), c.daemon().HomeArg())
		}
		return stopped
	}
	if err != nil {
		return client.RPCError("events.subscribe", err)
	}
	return &exit.Error{Code: exit.DaemonErr, Msg: "the event stream ended without a reason from the daemon; run warren events -f again"}
}

// agentNames maps agent ids to paths for live event lines, asking the
// daemon again (once per id) when an unknown id shows up.
type agentNames struct {
	c     *cli
	paths map[string]string
	tried map[string]bool
}

func (n *agentNames) refresh(ctx context.Context) {
	res, err := n.c.daemon().Call(ctx, "agent.list", nil)
	if err != nil {
		return
	}
	for _, a := range reply.List(res, "agents") {
		n.paths[reply.Str(a, "agent_id")] = reply.Str(a, "path")
	}
}

func (n *agentNames) name(ctx context.Context, id string) string {
	if p, ok := n.paths[id]; ok {
		return p
	}
	if offline.IsAgentID(id) && !n.tried[id] {
		n.tried[id] = true
		n.refresh(ctx)
		if p, ok := n.paths[id]; ok {
			return p
		}
	}
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
