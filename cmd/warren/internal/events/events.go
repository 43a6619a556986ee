// Package events prints agents' events through the daemon (`warren
// events`): the logged ones page by page (agent.log), of one agent or of
// every live agent in the order agent list shows them, or the live stream
// (events.subscribe) until Ctrl-C, each line naming its agent by path. A
// stream that ends because the daemon stopped is an error saying so, with
// the command that continues after the last event seen.
package events

import (
	"context"
	"fmt"
	"io"

	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/offline"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/protocol"
)

// Printer prints events of the daemon it reaches.
type Printer struct {
	Daemon *client.Client
	Stdout io.Writer
	Stderr io.Writer
	JSON   bool // one JSON object per event instead of a line of text
}

// Logged prints the logged events of ref (or of every live agent, in
// the order agent list shows them) after seq since, page by page (agent.log), and returns.
func (p *Printer) Logged(ctx context.Context, ref string, since int) error {
	cl, err := p.Daemon.Dial(ctx)
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
		res, err := client.ListAgents(ctx, cl, nil)
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
					return p.Daemon.Lost(ctx, &client.CallError{Method: "agent.log", Err: err})
				}
				fmt.Fprintf(p.Stderr, "warning: the log of %s: %s\n", t.path, client.RPCError("agent.log", err))
				failed = true
				break
			}
			for _, e := range reply.List(page, "events") {
				e["agent_id"] = t.id
				n++
				if p.JSON {
					err = reply.JSON(p.Stdout, map[string]any{"event": e})
				} else {
					_, err = fmt.Fprintln(p.Stdout, render.EventLine(e, t.path))
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
	if n == 0 && !p.JSON {
		fmt.Fprintln(p.Stdout, "no events")
	}
	if failed {
		return exit.ErrSilent
	}
	return nil
}

// Follow prints live events until Ctrl-C; a stream the daemon ends
// (it stopped) is an error saying so.
func (p *Printer) Follow(ctx context.Context, ref string, since int, deltas bool) error {
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
	cl, err := p.Daemon.Dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	names := &agentNames{daemon: p.Daemon, paths: map[string]string{}, tried: map[string]bool{}}
	if !p.JSON {
		names.refresh(ctx)
	}
	var lastSeq int64 = -1
	err = cl.Stream(ctx, "events.subscribe", params, func(fr protocol.Frame) error {
		if fr.Event != nil && reply.Str(fr.Event, "event") != protocol.EventTurnDelta {
			lastSeq = reply.Num(fr.Event, "seq")
		}
		if p.JSON {
			return reply.JSON(p.Stdout, reply.Frame(fr))
		}
		if fr.Event != nil && reply.Str(fr.Event, "event") == protocol.EventTurnDelta {
			_, err := fmt.Fprintf(p.Stdout, "%s delta %q\n", names.name(ctx, reply.Str(fr.Event, "agent_id")), reply.Str(fr.Event, "text"))
			return err
		}
		if fr.Event != nil {
			_, err := fmt.Fprintln(p.Stdout, render.EventLine(fr.Event, names.name(ctx, reply.Str(fr.Event, "agent_id"))))
			return err
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil // Ctrl-C
	}
	if stopped := p.Daemon.Stopped(ctx); stopped != nil {
		stopped.Msg = "the event stream ended: " + stopped.Msg
		if ref != "" && lastSeq >= 0 {
			stopped.Msg += fmt.Sprintf("; then continue with: warren events -f --since %d %s%s", lastSeq, render.ShellQuote(ref), p.Daemon.HomeArg())
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
	daemon *client.Client
	paths  map[string]string
	tried  map[string]bool
}

func (n *agentNames) refresh(ctx context.Context) {
	res, err := client.ListAgents(ctx, n.daemon, nil)
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
