package engine

import (
	"errors"

	"github.com/warren-dev/warren/engine/internal/agentload"
	"github.com/warren-dev/warren/engine/internal/turnrun"
)

// A turn's steps, its outcomes and what each logs and returns are package
// turnrun's; the Core claims the agent, starts the turn on a goroutine of
// its own and carries out each step through turnAgent (turn_host.go).

// The turn's request, result and retry notice (package turnrun).
type (
	// TurnRequest starts (or re-runs) a turn.
	TurnRequest = turnrun.Request
	// TurnResult is how a turn ended.
	TurnResult = turnrun.Result
	// RetryNotice describes one scheduled retry of a turn
	// (TurnRequest.OnRetry).
	RetryNotice = turnrun.RetryNotice
)

// claim marks an agent busy for a turn; it fails when the agent cannot run
// one now.
func (c *Core) claim(a *agent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.corrupt != nil:
		if errors.Is(a.corrupt, agentload.ErrUnopened) {
			return failf(ErrUnavailable, "agent %s: %w", a.id, a.corrupt)
		}
		return failf(ErrWrongState, "agent %s has a damaged log: %w; run `warren repair %s`", a.id, a.corrupt, a.id)
	case a.p.Terminated:
		return failf(ErrWrongState, "agent %s (%s) is terminated", a.p.Name, a.id)
	case a.released != nil:
		return failf(ErrUnavailable, "agent %s (%s) is no longer run by this daemon: %v", a.p.Name, a.id, a.released)
	case a.busy:
		return failf(ErrWrongState, "agent %s (%s) is mid-turn; wait for it or cancel it (warren agent cancel)", a.p.Name, a.id)
	}
	a.busy = true
	return nil
}

// release undoes a claim that started no turn.
func (c *Core) release(a *agent) {
	a.mu.Lock()
	a.busy = false
	a.mu.Unlock()
	c.wake(a)
}

// startTurn runs a claimed agent's turn in the background and returns a
// channel that yields its result.
func (c *Core) startTurn(a *agent, req TurnRequest) <-chan TurnResult {
	out := make(chan TurnResult, 1)
	if !c.goBackground(func() { out <- c.runTurn(a, req) }) {
		c.release(a)
		out <- TurnResult{Err: failf(ErrShuttingDown, "daemon is shutting down")}
	}
	return out
}

// runTurn runs one turn of a claimed agent to its end (package turnrun).
func (c *Core) runTurn(a *agent, req TurnRequest) TurnResult {
	r := turnrun.Runner{BootID: c.bootID, Now: c.now, Log: c.log, Refuse: turnRefusal}
	return r.Run(c.ctx, &turnAgent{c: c, a: a}, req)
}

// turnRefusal is the domain error of an error package turnrun makes.
func turnRefusal(k turnrun.Kind, format string, args ...any) error {
	kind := ErrWrongState
	if k == turnrun.Unavailable {
		kind = ErrUnavailable
	}
	return failf(kind, format, args...)
}
