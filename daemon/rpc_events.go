package daemon

import (
	"context"
	"encoding/json"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
	"github.com/warren-dev/warren/tree"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// subscribe streams logged events (of one agent or all) as they are
// written. With since_seq, events after that seq already in the logs come
// first; live events never repeat one already sent.
func (h *handler) subscribe(ctx context.Context, p protocol.Params, out server.Stream) (any, error) {
	agentID := ""
	if p.Has("agent_id") {
		ref, err := p.String("agent_id")
		if err != nil {
			return nil, err
		}
		if ref != "" {
			if agentID, err = h.c.Resolve(ref); err != nil {
				return nil, err
			}
		}
	}
	since, err := p.OptInt("since_seq", -1)
	if err != nil {
		return nil, err
	}
	deltas, err := p.OptBool("deltas", false)
	if err != nil {
		return nil, err
	}
	ready, err := p.OptBool("ready", false)
	if err != nil {
		return nil, err
	}
	ch, unsubscribe := h.c.bus.subscribeWith(agentID, deltas)
	defer unsubscribe()
	if ready {
		// The client may now start what it wants to watch: nothing logged
		// from here on is missed (retrynotice.go).
		if err := out.Event(map[string]any{"event": subscribedEvent}); err != nil {
			return nil, err
		}
	}
	last := map[string]uint64{}
	if since >= 0 {
		var ids []string
		if agentID != "" {
			ids = []string{agentID}
		} else {
			ids = h.c.tree.Walk()
		}
		for _, id := range ids {
			if _, ok := h.c.agent(id); !ok {
				continue // being created right now: its events come live
			}
			entries, err := h.c.Log(id, uint64(since)+1)
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				if err := out.Event(entryMap(id, e)); err != nil {
					return nil, err
				}
				last[id] = e.Seq
			}
		}
	}
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return nil, protocol.Errorf(protocol.CodeUnavailable,
					"event stream ended (the daemon is stopping or the client fell behind); subscribe again with since_seq")
			}
			if ev.Delta != "" {
				if err := out.Event(map[string]any{"event": "turn.delta", "agent_id": ev.AgentID, "run_id": ev.RunID, "text": ev.Delta}); err != nil {
					return nil, err
				}
				continue
			}
			if ev.AgentID != tree.User && ev.Entry.Seq <= last[ev.AgentID] {
				continue
			}
			m := entryMap(ev.AgentID, ev.Entry)
			if ev.Token != "" {
				m["token"] = ev.Token
			}
			if err := out.Event(m); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, nil
		}
	}
}
