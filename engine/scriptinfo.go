package engine

import (
	"github.com/warren-dev/warren/provider"
)

// historyModeKey is the agent metadata key, and the provider entry setting
// (config.json), that chooses how a structured-history provider passes the
// completed turns to a fresh process: "replay" (the default; the program
// re-executes them) or "context" (the program reads them as data). The
// agent's metadata wins over the entry's setting. It is read when a
// provider session opens. The provider refuses any other value with a
// permanent error naming it.
const historyModeKey = "history"

// historyMode is the history mode of an agent's sessions on provider entry
// provName ("" when neither the agent nor the entry sets one).
func (c *Core) historyMode(provName, id string) string {
	if a, ok := c.agent(id); ok {
		a.mu.Lock()
		v, set := a.p.Metadata[historyModeKey]
		a.mu.Unlock()
		if set {
			return v
		}
	}
	if v, ok := c.config().Providers[provName].Settings[historyModeKey].(string); ok {
		return v
	}
	return ""
}

// agentIdentity is who the agent is in its tree, for providers that tell
// their programs (the scripted provider's first turn line).
func (c *Core) agentIdentity(id string) provider.Identity {
	in := provider.Identity{Name: c.tree.Name(id), Path: c.tree.Path(id)}
	if in.Path == "" {
		in.Path = in.Name
	}
	if parent, ok := c.tree.Parent(id); ok && parent != "" {
		in.Parent, in.ParentID = c.tree.Name(parent), parent
	}
	return in
}
