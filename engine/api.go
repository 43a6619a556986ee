package engine

import (
	"context"

	"github.com/warren-dev/warren/bus"
	"github.com/warren-dev/warren/engine/internal/agentrec"
	"github.com/warren-dev/warren/engine/internal/logpage"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/multiplexer"
	"github.com/warren-dev/warren/schema"
)

// Resolve turns an agent reference (path, unique name or id) into an id.
// Corrupt agents (not in the tree) resolve by id or name (roster.Resolve).
func (c *Core) Resolve(ref string) (string, error) { return c.agents.Resolve(ref) }

// Send runs a turn with a user message and returns when it ends (or ctx is
// done; the turn goes on). A live wait is revoked: the message starts a new
// run.
func (c *Core) Send(ctx context.Context, agentID, message, provName, model string, onChunk func(string)) (TurnResult, error) {
	return c.SendNotify(ctx, agentID, message, provName, model, onChunk, nil)
}

// SendNotify is Send that also tells onRetry (when not nil) of each retry
// of the turn it starts, as it is scheduled.
func (c *Core) SendNotify(ctx context.Context, agentID, message, provName, model string, onChunk func(string),
	onRetry func(RetryNotice)) (TurnResult, error) {
	a, ok := c.agent(agentID)
	if !ok {
		return TurnResult{}, notFound(agentID)
	}
	if limit := c.limits().MessageBytes; len(message) > limit {
		return TurnResult{}, failf(ErrInvalid, "message is %d bytes; the limit is %d (limits.message_bytes)", len(message), limit)
	}
	if err := c.checkRunChoice(a, provName, model); err != nil {
		return TurnResult{}, err
	}
	if err := a.Claim(); err != nil {
		return TurnResult{}, err
	}
	tokID, runID, waitKind, abandoned := a.Superseded()
	if tokID != "" {
		if err := c.revokeToken(a, tokID, runID, schema.RevokeNewMessage); err != nil {
			c.release(a)
			return TurnResult{}, err
		}
	}
	ch := c.startTurn(a, TurnRequest{Prompt: message, Provider: provName, Model: model, OnChunk: onChunk, OnRetry: onRetry})
	select {
	case res := <-ch:
		if tokID != "" {
			res.RevokedWait = &WaitInfo{TokenID: tokID, Kind: waitKind, RunID: runID}
		}
		res.AbandonedRun = abandoned
		return res, nil
	case <-ctx.Done():
		if c.agents.Closed() {
			return TurnResult{}, failf(ErrShuttingDown, "the daemon is shutting down; the turn was cancelled (logged as turn.cancelled)")
		}
		return TurnResult{}, failf(ErrUnavailable, "request ended before the turn did (%w); the turn goes on", ctx.Err())
	}
}

// Log returns an agent's log entries from a seq, all of them (tests and
// tools; the socket pages with LogPage).
func (c *Core) Log(agentID string, fromSeq uint64) ([]eventlog.Entry, error) {
	return logpage.All(fromSeq, func(from uint64) ([]eventlog.Entry, bool, error) {
		return c.LogPage(agentID, from, MaxPageLimit)
	})
}

// LogPage returns one page of an agent's log: the entries from fromSeq on,
// at most limit of them and, beyond the first, about pageBytes of data, so
// that a page always fits in a reply. more says entries follow.
func (c *Core) LogPage(agentID string, fromSeq uint64, limit int) (entries []eventlog.Entry, more bool, err error) {
	a, ok := c.agent(agentID)
	if !ok {
		return nil, false, notFound(agentID)
	}
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	return logpage.Page(c.st.Read, a.ID(), fromSeq, limit, pageBytes, &a.Cursors)
}

// PoolStats reports the multiplexer pools by name.
func (c *Core) PoolStats() map[string]multiplexer.PoolStats {
	return c.sessions.Stats()
}

// AgentCount is the number of agents the daemon serves.
func (c *Core) AgentCount() int { return c.agents.Count() }

// Evict forces the eviction of an agent's live provider session (its state
// saved in session.json, suspend.result logged). It is an error when the
// session is not live or is held by a turn.
func (c *Core) Evict(ctx context.Context, agentID string) error {
	if _, ok := c.agent(agentID); !ok {
		return notFound(agentID)
	}
	return c.sessions.Evict(ctx, agentID)
}

// WaitChange returns a channel closed at the next change of live state that
// the logs do not show (a turn ended, an agent was terminated).
func (c *Core) WaitChange() <-chan struct{} { return c.changed.Wait() }

// Subscribe streams logged events (agentID "" = all agents); cancel ends it.
func (c *Core) Subscribe(agentID string) (<-chan bus.Event, func()) { return c.bus.Subscribe(agentID) }

// Idle reports whether no turn runs (nor its aftermath: deferred spawns,
// notices, completion) and no wake is due, at one moment (agentrec.Quiet).
func (c *Core) Idle() bool { return agentrec.Quiet(c.agentList, c.opts.NoWake) }
