package daemon

import (
	"context"
	fold "github.com/warren-dev/warren/projection"
	"time"

	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/multiplexer"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/server"
)

// The wire shapes of the core's views (SPEC 8.1), built at the edge.

func listMap(v engine.AgentView) map[string]any {
	var parent any
	if v.ParentID != "" {
		parent = v.ParentID
	}
	m := map[string]any{"agent_id": v.ID, "name": v.Name, "path": v.Path, "parent_id": parent,
		"status": v.Status, "provider": v.Provider, "model": v.Model, "pending": v.Pending}
	if v.Wait != nil {
		w := turnWaitMap(v.Wait)
		w["state"], w["run_id"] = v.Wait.State, v.Wait.RunID
		m["wait"] = w
	}
	if v.Error != "" {
		m["error"] = v.Error
	}
	if v.LastError != "" {
		m["last_error"] = v.LastError // the latest turn failed: data, not a status
	}
	if v.Degraded != "" {
		m["degraded"] = v.Degraded
	}
	if !v.Usage.IsZero() {
		m["usage"] = v.Usage
	}
	if v.Spent.Steps > 0 || v.Spent.Turns > 0 {
		m["spent"] = spentMap(v.Spent)
	}
	setTime(m, "created_at", v.CreatedAt)
	setTime(m, "last_turn_at", v.LastTurnAt)
	return m
}

// goneMap is a terminated agent as an agent.list item.
func goneMap(v engine.TerminatedView) map[string]any {
	var parent any
	if v.ParentID != "" {
		parent = v.ParentID
	}
	m := map[string]any{"agent_id": v.ID, "name": v.Name, "path": v.Path, "parent_id": parent,
		"status": "terminated", "pending": 0}
	if v.Known {
		m["provider"], m["model"] = v.Provider, v.Model
		setTime(m, "created_at", v.CreatedAt)
		setTime(m, "last_turn_at", v.LastTurnAt)
		setTime(m, "terminated_at", v.TerminatedAt)
		if !v.Usage.IsZero() {
			m["usage"] = v.Usage
		}
	}
	return m
}

// detailMap is agent.inspect's reply.
func detailMap(d engine.AgentDetail) map[string]any {
	m := listMap(d.AgentView)
	children := make([]any, 0, len(d.Children))
	for _, ch := range d.Children {
		children = append(children, map[string]any{"agent_id": ch.ID, "name": ch.Name, "status": ch.Status})
	}
	m["children"] = children
	if d.Cwd != "" {
		m["cwd"] = d.Cwd
	}
	if d.HasMore {
		m["inbox_next_seq"] = int64(d.InboxNextSeq)
	}
	inbox := make([]any, 0, len(d.Inbox))
	for _, it := range d.Inbox {
		inbox = append(inbox, map[string]any{"from": it.From, "text": it.Text, "message_id": it.MessageID, "kind": it.Kind,
			"timestamp": it.Timestamp.UTC().Format(time.RFC3339Nano), "seq": int64(it.Seq)})
	}
	m["inbox"] = inbox
	if d.HasLog {
		m["last_seq"] = int64(d.LastSeq)
	}
	m["metadata"] = copyMap(d.Metadata)
	m["gated"] = d.Gated
	m["instructions"] = d.Instructions
	if d.LastError != "" {
		m["last_error"] = d.LastError
	}
	return m
}

// poolsMap is daemon.status's "pools".
func poolsMap(stats map[string]multiplexer.PoolStats) map[string]any {
	out := make(map[string]any, len(stats))
	for name, s := range stats {
		out[name] = map[string]any{"slots": s.Slots, "live": s.Live, "held": s.Held}
	}
	return out
}

func waitMap(w engine.WaitView) map[string]any {
	m := map[string]any{"agent_id": w.AgentID, "path": w.Path, "run_id": w.RunID, "kind": w.Kind,
		"prompt": w.Prompt, "token_id": w.TokenID, "deadline": w.Deadline.UTC().Format(time.RFC3339Nano)}
	if !w.Since.IsZero() {
		m["since"] = w.Since.UTC().Format(time.RFC3339Nano)
	}
	return m
}

func (h *handler) waitsList(context.Context, protocol.Params, server.Stream) (any, error) {
	ws := h.c.Waits()
	out := make([]any, len(ws))
	for i, w := range ws {
		out[i] = waitMap(w)
	}
	return map[string]any{"waits": out}, nil
}

// retryFrame is a retry notice as an agent.stream event frame.
func retryFrame(agentID string, n engine.RetryNotice) map[string]any {
	return map[string]any{"event": schema.TurnRetry, "agent_id": agentID, "run_id": n.RunID, "turn": n.Turn,
		"attempt": n.Attempt, "max_retries": n.MaxRetries, "error": n.Error, "delay_ms": n.Delay.Milliseconds()}
}

// setTime sets m[k] to t in RFC 3339 (UTC, nanoseconds) unless t is zero.
func setTime(m map[string]any, k string, t time.Time) {
	if !t.IsZero() {
		m[k] = t.UTC().Format(time.RFC3339Nano)
	}
}

func copyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// turnWaitMap is a wait as a turn's result shows it (nil: none).
func turnWaitMap(w *engine.WaitInfo) map[string]any {
	if w == nil {
		return nil
	}
	return map[string]any{"kind": w.Kind, "prompt": w.Prompt, "token_id": w.TokenID,
		"deadline": w.Deadline.UTC().Format(time.RFC3339Nano)}
}

// spentMap is an agent's (or subtree's) spend as agent.list and
// agent.inspect show it (SPEC 13).
func spentMap(s fold.Spent) map[string]any {
	m := map[string]any{"tokens": s.Tokens, "usd": s.USD, "turns": int64(s.Turns), "requests": int64(s.Steps)}
	if s.Unpriced > 0 {
		m["unpriced_requests"] = int64(s.Unpriced)
	}
	return m
}
