package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/warren-dev/warren/protocol"
)

func cmdEvents(ctx context.Context, c *cli, args []string) error {
	f := newFlags(c, "events")
	f.Bool("f", false, "follow (the default: events are printed until Ctrl-C)")
	since := f.Int("since", -1, "first print the logged events after this seq (0: from the start), then follow")
	deltas := f.Bool("deltas", false, "also print response text as models stream it (turn.delta, not logged)")
	pos, err := f.parse(args, 0, 1)
	if err != nil {
		return err
	}
	params := map[string]any{}
	if len(pos) == 1 {
		params["agent_id"] = pos[0]
	}
	if *since >= 0 {
		params["since_seq"] = *since
	}
	if *deltas {
		params["deltas"] = true
	}
	cl, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	names := &agentNames{c: c, paths: map[string]string{}, tried: map[string]bool{}}
	if !c.json {
		names.refresh(ctx)
	}
	err = cl.Stream(ctx, "events.subscribe", params, func(fr protocol.Frame) error {
		if c.json {
			return printJSON(c.stdout, frameJSON(fr))
		}
		if fr.Event != nil && str(fr.Event, "event") == "turn.delta" {
			_, err := fmt.Fprintf(c.stdout, "%s delta %q\n", names.name(ctx, str(fr.Event, "agent_id")), str(fr.Event, "text"))
			return err
		}
		if fr.Event != nil {
			_, err := fmt.Fprintln(c.stdout, eventLine(fr.Event, names.name(ctx, str(fr.Event, "agent_id"))))
			return err
		}
		return nil
	})
	if err != nil && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return rpcErr("events.subscribe", err)
	}
	return nil
}

// agentNames maps agent ids to paths for live event lines, asking the
// daemon again (once per id) when an unknown id shows up.
type agentNames struct {
	c     *cli
	paths map[string]string
	tried map[string]bool
}

func (n *agentNames) refresh(ctx context.Context) {
	res, err := n.c.call(ctx, "agent.list", nil)
	if err != nil {
		return
	}
	for _, a := range list(res, "agents") {
		n.paths[str(a, "agent_id")] = str(a, "path")
	}
}

func (n *agentNames) name(ctx context.Context, id string) string {
	if p, ok := n.paths[id]; ok {
		return p
	}
	if hexID.MatchString(id) && !n.tried[id] {
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

// eventLine renders a live event frame: `HH:MM:SS.mmm  <agent path>  #seq  event  k=v`.
func eventLine(ev map[string]any, who string) string {
	ev, _ = jsonable(ev).(map[string]any)
	ts := time.Now()
	if t, err := time.Parse(time.RFC3339Nano, str(ev, "ts")); err == nil {
		ts = t
	}
	data, _ := json.Marshal(ev["data"])
	line := fmt.Sprintf("%s  %s  #%d  %s", clockT(ts, true), dash(who), num(ev, "seq"), str(ev, "event"))
	if kv := kvPairs(data, maxValueRunes); kv != "" && string(data) != "null" {
		line += "  " + kv
	}
	if tok := str(ev, "token"); tok != "" {
		line += "  token=" + tok // the live run.waiting event carries the resume secret
	}
	return line
}
