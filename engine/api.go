package engine

import (
	"context"
	"errors"
	"io"

	"github.com/warren-dev/warren/bus"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/multiplexer"
	"github.com/warren-dev/warren/registry"
	"github.com/warren-dev/warren/schema"
)

// Resolve turns an agent reference (path, unique name or id) into an id.
// Corrupt agents (not in the tree) resolve by id or name (roster.Resolve).
func (c *Core) Resolve(ref string) (string, error) { return c.agents.Resolve(ref) }

// ResolveAny is Resolve, where a terminated agent resolves too (a child
// whose branch is merged after it completed).
func (c *Core) ResolveAny(ref string) (string, error) { return c.agents.ResolveAny(ref) }

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
			return TurnResult{}, failf(ErrShuttingDown, "the daemon is stopping: the run is interrupted (run.interrupted, shutdown) and the next start re-runs it "+
				"(resume policy auto) or lists it for `warren agent resume`")
		}
		return TurnResult{}, failf(ErrUnavailable, "request ended before the turn did (%w); the turn goes on", ctx.Err())
	}
}

// Log returns an agent's log entries from a seq, all of them (tests and
// tools; the socket pages with LogPage).
func (c *Core) Log(ctx context.Context, agentID string, fromSeq uint64) ([]eventlog.Entry, error) {
	return allPages(fromSeq, func(from uint64) ([]eventlog.Entry, bool, error) {
		return c.LogPage(ctx, agentID, from, MaxPageLimit)
	})
}

// LogPage returns one page of an agent's log: the entries from fromSeq on,
// at most limit of them and, beyond the first, about pageBytes of data, so
// that a page always fits in a reply. more says entries follow.
func (c *Core) LogPage(ctx context.Context, agentID string, fromSeq uint64, limit int) (entries []eventlog.Entry, more bool, err error) {
	a, ok := c.agent(agentID)
	if !ok {
		return nil, false, notFound(agentID)
	}
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	return readLogPage(ctx, c.st.Read, a, fromSeq, limit, pageBytes)
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

// Drain lets the running turns finish before a stop, for as long as ctx
// allows: from now on no wake starts a turn (messages stay pending for
// the next start) and the resume policy re-runs nothing; it returns once
// no turn runs nor its aftermath, or when ctx ends. The caller refuses new
// sends and creates meanwhile (the RPC edge, code 6) and then closes the
// Core, which interrupts what still runs.
func (c *Core) Drain(ctx context.Context) {
	c.agents.SetDraining()
	for {
		changed := c.changed.Wait()
		if quiet(c.agentList, true) {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// Idle reports whether no turn runs (nor its aftermath: deferred spawns,
// notices, completion) and no wake is due, at one moment (quiet).
func (c *Core) Idle() bool { return quiet(c.agentList, c.opts.NoWake) }

// What the RPC edge reads of the core beyond the operations in api.go:
// the credential's agent, names and paths, an agent's status, the open log
// handles and the USER inbox's health, and the live event stream.

// AgentOfCredential returns the agent a process credential was issued to
// (procs.go); false when it is unknown or revoked.
func (c *Core) AgentOfCredential(credential string) (string, bool) {
	return c.launches.AgentOf(credential)
}

// DisplayName is how messages name an agent: its path, or its id once gone.
func (c *Core) DisplayName(id string) string { return c.displayName(id) }

// Path is an agent's path in the tree ("" if it has none).
func (c *Core) Path(id string) string { return c.tree.Path(id) }

// Known reports whether an agent is loaded (false for one being created
// right now or gone).
func (c *Core) Known(id string) bool {
	_, ok := c.agent(id)
	return ok
}

// Status is an agent's derived status (SPEC 4); false if it is not loaded.
func (c *Core) Status(id string) (string, bool) {
	a, ok := c.agent(id)
	if !ok {
		return "", false
	}
	return a.Status(c.bootID, c.now()), true
}

// Walk lists the agents of the tree, parents before children.
func (c *Core) Walk() []string { return c.tree.Walk() }

// OpenLogs counts the log files holding open handles: the store's count
// (a store of files counts them, whether the Core built it or was given
// it); 0 for a store without files.
func (c *Core) OpenLogs() int {
	if st, ok := c.st.(interface{ OpenLogs() int }); ok {
		return st.OpenLogs()
	}
	return 0
}

// UserInboxDegraded says why the USER inbox's log refuses appends (nil when
// it accepts them, or when there is none).
func (c *Core) UserInboxDegraded() error {
	if c.user == nil {
		return nil
	}
	return c.user.Degraded()
}

// SubscribeEvents subscribes to the logged entries of one agent ("" = all)
// and, with deltas, to the response text of turns as it streams.
func (c *Core) SubscribeEvents(agentID string, deltas bool) (<-chan bus.Event, func()) {
	return c.bus.SubscribeWith(agentID, deltas)
}

// StopWaiting ends the Core's background context, so a Recover waiting
// (a standby for a cluster's USER inbox, takeover.go; an unavailable
// cluster) returns; the caller closes the Core after.
func (c *Core) StopWaiting() { c.cancel() }

// Providers lists the provider entries (daemon.providers), sorted by name.
func (c *Core) Providers() []registry.Info { return c.providers.Entries() }

// ReadEntries calls fn for each entry of log id (an agent's, or the USER
// inbox's, "USER") from fromSeq on, up to its end now; fn's error stops
// it.
func (c *Core) ReadEntries(ctx context.Context, id string, fromSeq uint64, fn func(eventlog.Entry) error) error {
	return c.readEach(ctx, id, fromSeq, 0, fn)
}

// errStopRead ends readEach early without an error.
var errStopRead = errors.New("stop reading")

// readEach calls fn for each entry of log id from fromSeq on (the store
// starts its search at hint), up to the log's end now; fn's error stops
// it (errStopRead: with no error).
func (c *Core) readEach(ctx context.Context, id string, fromSeq uint64, hint int64, fn func(eventlog.Entry) error) error {
	r, err := c.st.Read(ctx, id, fromSeq, hint)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			if errors.Is(err, errStopRead) {
				return nil
			}
			return err
		}
	}
}

// IsRoot reports whether agent id is a root (it reports to USER).
func (c *Core) IsRoot(id string) bool { return c.tree.IsRoot(id) }
