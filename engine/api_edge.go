package engine

import (
	"github.com/warren-dev/warren/bus"
	"github.com/warren-dev/warren/registry"
)

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
	return c.views().Status(a), true
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
