package daemon

import (
	"context"

	"github.com/warren-dev/warren/bus"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
	"github.com/warren-dev/warren/tree"
)

// Progress a client sees while a turn runs (docs/DECISIONS.md, "Retries
// and waits shown as they happen"):
//
//   - agent.stream sends, for each retry of its turn, an event frame
//     {"event":"turn.retry","agent_id","run_id","turn","attempt",
//     "max_retries","error","delay_ms"} once the retry's turn.retry entry
//     is logged and before the backoff; a retry happens only before any
//     chunk of the attempt reached the client.
//   - events.subscribe with "ready": true first sends the frame
//     {"event":"subscribed"} (no agent_id, no seq) once the subscription is
//     in place: a client that starts a turn after it sees every entry the
//     turn logs (turn.retry, run.waiting, ...). agent send uses it.

// subscribedEvent is the event name of events.subscribe's ready frame.
const subscribedEvent = "subscribed"

// subscribeParams are events.subscribe's parameters.
type subscribeParams struct {
	agentID string // "" = all agents
	since   int    // -1: live events only
	deltas  bool
	ready   bool
}

func (h *handler) subscribeParams(p protocol.Params) (sp subscribeParams, err error) {
	if p.Has("agent_id") {
		ref, err := p.String("agent_id")
		if err != nil {
			return sp, err
		}
		if ref != "" {
			if sp.agentID, err = h.c.Resolve(ref); err != nil {
				return sp, err
			}
		}
	}
	if sp.since, err = p.OptInt("since_seq", -1); err != nil {
		return sp, err
	}
	if sp.deltas, err = p.OptBool("deltas", false); err != nil {
		return sp, err
	}
	sp.ready, err = p.OptBool("ready", false)
	return sp, err
}

// subscribe streams logged events (of one agent or all) as they are
// written. With since_seq, events after that seq already in the logs come
// first; live events never repeat one already sent.
func (h *handler) subscribe(ctx context.Context, p protocol.Params, out server.Stream) (any, error) {
	sp, err := h.subscribeParams(p)
	if err != nil {
		return nil, err
	}
	ch, unsubscribe := h.c.SubscribeEvents(sp.agentID, sp.deltas)
	defer unsubscribe()
	if sp.ready {
		// The client may now start what it wants to watch: nothing logged
		// from here on is missed.
		if err := out.Event(map[string]any{"event": subscribedEvent}); err != nil {
			return nil, err
		}
	}
	last := map[string]uint64{}
	if sp.since >= 0 {
		if err := h.sendBacklog(ctx, sp, out, last); err != nil {
			return nil, err
		}
	}
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return nil, protocol.Errorf(protocol.CodeUnavailable,
					"event stream ended (the daemon is stopping or the client fell behind); subscribe again with since_seq")
			}
			if err := sendLive(ev, out, last); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// sendBacklog sends the logged entries after sp.since, of sp's agent or of
// every agent, and records in last the seq sent of each.
func (h *handler) sendBacklog(ctx context.Context, sp subscribeParams, out server.Stream, last map[string]uint64) error {
	ids := []string{sp.agentID}
	if sp.agentID == "" {
		ids = h.c.Walk()
	}
	for _, id := range ids {
		if !h.c.Known(id) {
			continue // being created right now: its events come live
		}
		entries, err := h.c.Log(ctx, id, uint64(sp.since)+1)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := out.Event(entryMap(id, e)); err != nil {
				return err
			}
			last[id] = e.Seq
		}
	}
	return nil
}

// sendLive sends one live event, unless the backlog already sent it.
func sendLive(ev bus.Event, out server.Stream, last map[string]uint64) error {
	if ev.Delta != "" {
		return out.Event(map[string]any{"event": protocol.EventTurnDelta, "agent_id": ev.AgentID, "run_id": ev.RunID, "text": ev.Delta})
	}
	if ev.AgentID != tree.User && ev.Entry.Seq <= last[ev.AgentID] {
		return nil
	}
	m := entryMap(ev.AgentID, ev.Entry)
	if ev.Token != "" {
		m["token"] = ev.Token
	}
	return out.Event(m)
}
