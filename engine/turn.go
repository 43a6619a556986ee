package engine

import (
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

// release undoes a claim (agentrec.Agent.Claim) that started no turn.
func (c *Core) release(a *agent) {
	a.Unclaim()
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
	r := turnrun.Runner{BootID: c.bootID, Now: c.now, Log: c.log}
	return r.Run(c.ctx, &turnAgent{agent: a, c: c}, req)
}
