package daemon

import (
	"context"
	"time"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

// WaitView is one pending wait, as waits.list shows it (SPEC 4, 8.1):
// never the secret.
type WaitView struct {
	AgentID  string
	Path     string
	RunID    string
	Kind     string
	Prompt   string
	TokenID  string
	Deadline time.Time
	Since    time.Time
}

func (w WaitView) waitMap() map[string]any {
	m := map[string]any{"agent_id": w.AgentID, "path": w.Path, "run_id": w.RunID, "kind": w.Kind,
		"prompt": w.Prompt, "token_id": w.TokenID, "deadline": w.Deadline.UTC().Format(time.RFC3339Nano)}
	if !w.Since.IsZero() {
		m["since"] = w.Since.UTC().Format(time.RFC3339Nano)
	}
	return m
}

// Waits lists every pending wait in the tree (a live token on an open
// run), in tree order: whoever started it and whether or not anyone
// watched, the operator can find it here and answer it by token id.
func (c *Core) Waits() []WaitView {
	var out []WaitView
	for _, v := range c.List() {
		a, ok := c.agent(v.ID)
		if !ok {
			continue
		}
		a.mu.Lock()
		if a.hasLiveWait() {
			r := a.p.Run
			out = append(out, WaitView{AgentID: a.id, Path: v.Path, RunID: r.RunID, Kind: r.Wait.Kind,
				Prompt: r.Wait.Prompt, TokenID: r.Wait.TokenID, Deadline: r.Wait.Deadline, Since: r.Wait.Since})
		}
		a.mu.Unlock()
	}
	return out
}

func (h *handler) waitsList(context.Context, protocol.Params, server.Stream) (any, error) {
	ws := h.c.Waits()
	out := make([]any, len(ws))
	for i, w := range ws {
		out[i] = w.waitMap()
	}
	return map[string]any{"waits": out}, nil
}
