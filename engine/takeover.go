package engine

import (
	"context"
	"errors"

	"time"

	"github.com/warren-dev/warren/engine/internal/claims"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

// Takeover on a cluster store (docs/DECISIONS.md, "Failover between
// daemons"). Every agent's log is written under a claim (Store.Own); on
// store/jetstream a daemon's agent claims rest on its USER inbox's lease,
// which it renews, and when that daemon dies the lease lapses after the
// owner TTL. Another daemon notices by polling, every TakeoverEvery on the
// core's clock:
//
//   - a daemon that cannot claim the USER inbox at start stands by in
//     Recover (openUserInbox, over package claims' Open), claiming it as
//     soon as its lease lapses, then recovers everything it can claim, as
//     at any start;
//   - a running daemon scans the store's agents (Takeover): those it does
//     not run and no live lease holds are claimed and recovered into the
//     running core exactly as Recover does (fold, interrupted runs marked,
//     pending messages re-injected, wakes), parents with their children.
//
// Polling rather than watching the owners bucket: a lease lapses by the
// server's MaxAge expiry, which a KV watch does not report (no delete
// marker is written), so a watcher would still need a timer per key on
// the server's clock; a poll asks the servers themselves (an absent key
// is a lapsed lease) and costs one request per interval while nothing is
// to be taken. The claim follows a lapse within one interval.

// claimTimeout bounds one claim attempt of the standby and the scan: a
// request lost with a server (the owners bucket's leader killed, the
// connection moving to another server) is tried again on the next tick
// instead of waiting out the store's request timeout.
const claimTimeout = 750 * time.Millisecond

// leaseGrace is how long a lease this daemon found held must stay lapsed
// before it claims the id (package claims, grace.go): longer than a
// holder's retry interval while its owners bucket elects a leader.
const leaseGrace = 2 * time.Second

// holderView is a store that names a lease's holder (store/jetstream).
type holderView interface {
	Holder(ctx context.Context, id string) (node string, released bool, err error)
}

// takeoverTimer names the periodic takeover scan under the empty owner.
const takeoverTimer = "takeover"

// clustered reports whether the store's leases can lapse (any store but
// store/local, whose home lock owns every agent for the daemon's life).
func (c *Core) clustered() bool {
	_, isLocal := c.st.(*local.Store)
	return !isLocal
}

// known reports whether this core runs id, knows it terminated, or holds
// a claim on it (an agent being created claims its id before its first
// entry is written and before it is listed).
func (c *Core) known(id string) bool {
	return c.agents.Known(id) || c.claims.Holds(id)
}

// claimable returns the ids to load: all of them on the local store. On a
// cluster store, those claims.Set.Claimable claims (take) and those it
// leaves to other daemons (elsewhere: no spawn of them is redone).
func (c *Core) claimable(ctx context.Context, ids []string) (take, elsewhere []string) {
	if !c.clustered() {
		return ids, nil
	}
	return c.claims.Claimable(ctx, ids, claimTimeout, c.known, func(id string) string {
		return claims.ParentOf(ctx, c.st.ReadSeq, id)
	})
}

// Takeover claims the agents of a cluster store that no daemon holds and
// that this core does not run, and recovers them into it as Recover does
// (recovery.go, steps 2 to 8), restoring each agent before it is placed.
// It returns what it did; on the local store, or once the core is
// stopping, it does nothing. The scans are serialised.
func (c *Core) Takeover(ctx context.Context) (RecoveryReport, error) {
	c.takeoverMu.Lock()
	defer c.takeoverMu.Unlock()
	var rep RecoveryReport
	if !c.clustered() || c.stopping() {
		return rep, nil
	}
	ids, err := c.st.Agents(ctx)
	if err != nil {
		return rep, err
	}
	fresh := false
	for _, id := range ids {
		if !c.known(id) {
			fresh = true
			break
		}
	}
	if !fresh {
		return rep, nil
	}
	take, _ := c.claimable(ctx, ids)
	if len(take) == 0 {
		return rep, nil
	}
	kept, _ := c.loadedOrLater(ctx, c.loadAll(ctx, take, false))
	live, existing, _ := c.classify(ctx, kept, &rep)
	for _, id := range ids {
		existing[id] = true // a spawn whose child exists anywhere is not redone
	}
	// Runs are marked before the agents are placed, so that no turn can
	// start on one (a send over the socket) before its open run is marked.
	for _, l := range live {
		c.restore(l, &rep)
		l.Agent.Snap.Load() // read now: a takeover has no scrub to read it
	}
	placed := c.place(live, &rep)
	rep.Agents = len(placed)
	c.adoptPlaced(ctx, placed)
	c.arm(placed, &rep)
	c.finish(ctx, placed, existing)
	c.afterStart(ctx, agentsOf(placed))
	for _, l := range placed {
		c.wake(l.Agent)
	}
	c.log.Info("took over agents whose owner's lease lapsed", "agents", rep.Agents, "terminated", rep.Terminated,
		"corrupt", rep.Corrupt, "interrupted", rep.Interrupted, "pending", rep.Pending)
	c.changed.Fire()
	return rep, nil
}

// startTakeover arms the periodic takeover scan on a cluster store: every
// CoreOptions.TakeoverEvery on the core's clock, the next armed when a
// scan ends.
func (c *Core) startTakeover() {
	if !c.clustered() {
		return
	}
	var tick func()
	tick = func() {
		if _, err := c.Takeover(c.ctx); err != nil {
			c.log.Warn("takeover scan", "err", err)
		}
		c.sched.Arm("", takeoverTimer, c.now().Add(c.opts.TakeoverEvery), tick)
	}
	c.sched.Arm("", takeoverTimer, c.now().Add(c.opts.TakeoverEvery), tick)
}

// loadedOrLater drops from a recovery or a takeover on a cluster store
// the agents whose log the cluster did not serve, or whose claim the log's
// fence refused (an earlier owner's append landed between the read of the
// log's end and the claim): their lease is given up and the next scan
// tries again on the new end. Neither is damage; listing them corrupt
// would keep them from the scan until a restart.
func (c *Core) loadedOrLater(ctx context.Context, all []*loaded) (kept []*loaded, later []string) {
	if !c.clustered() {
		return all, nil
	}
	for _, l := range all {
		if l.Err != nil && (errors.Is(l.Err, store.ErrUnavailable) || errors.Is(l.Err, store.ErrFenced)) {
			c.log.Warn("the cluster did not serve an agent's log, or another owner wrote it last; the next takeover scan tries again", "agent", l.ID, "err", l.Err)
			c.claims.Drop(ctx, l.ID)
			later = append(later, l.ID)
			continue
		}
		kept = append(kept, l)
	}
	return kept, later
}

// adoptPlaced indexes the subscriptions to and from the agents just
// placed, delivers the messages they recorded but their recipients lack,
// and re-arms and announces their waits.
func (c *Core) adoptPlaced(ctx context.Context, placed []*loaded) {
	isNew := make(map[string]bool, len(placed))
	for _, l := range placed {
		isNew[l.ID] = true
		for _, sub := range l.Agent.Subscriptions(nil) {
			c.agents.Index(sub, l.ID)
		}
	}
	for _, a := range c.agentList() {
		if isNew[a.ID()] {
			continue
		}
		for _, sub := range a.Subscriptions(isNew) {
			c.agents.Index(sub, a.ID())
		}
	}
	for _, l := range placed {
		sent, deadline := l.Agent.Sent(), l.Agent.WaitDeadline()
		c.redeliverRefs(ctx, l.ID, sent, true)
		c.notify(l.Agent)
		if !deadline.IsZero() {
			c.armDeadline(deadline)
			c.noticeWaitOf(l.Agent)
		}
	}
}

// leasePoll is how often a paused agent's lease is looked at again.
const leasePoll = 100 * time.Millisecond

// awaitLease holds a side effect (a turn's start, a tool's execution)
// while the agent's lease is past its expiry unrenewed: the owners bucket
// is electing a leader, and the renewal goes on (store/jetstream, lease.go).
// It returns once the lease is renewed, or with an error when the lease is
// lost (the agent is released) or ctx ends. Appends need no such wait:
// the log's fence refuses them once another daemon claims.
func (c *Core) awaitLease(ctx context.Context, id string) error {
	if !c.clustered() {
		return nil
	}
	for n := 0; ; n++ {
		paused, lost := c.claims.Expired(id, time.Now())
		switch {
		case lost:
			return failf(ErrUnavailable, "agent %s: its lease was lost; another daemon may run it", id)
		case !paused:
			if n > 0 {
				c.log.Info("the lease is renewed; the agent goes on", "agent", id)
			}
			return nil
		case n == 0:
			c.log.Warn("the agent's lease ran out unrenewed (the cluster is electing a leader); its turns and tools wait for the renewal", "agent", id)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(leasePoll): // a renewal has no signal of its own
		}
	}
}
