package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/warren-dev/warren/agentspec"
	"github.com/warren-dev/warren/engine/internal/agentload"
	"github.com/warren-dev/warren/engine/internal/claims"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/store"
)

// openLog opens an agent's log with the projection and the event bus wired
// to its appends.
func (c *Core) openLog(id string, target **agent) (store.Log, error) {
	return c.openLogReplay(id, target, nil, nil)
}

// openLogReplay opens an agent's log, handing each recovered entry to
// replay (recovery folds the projection in the same pass that checks the
// log). With a replay function (recovery) a missing log is not created: the
// error wraps fs.ErrNotExist.
func (c *Core) openLogReplay(id string, target **agent, resume *eventlog.Resume, replay func(eventlog.Entry) error) (store.Log, error) {
	lease, err := c.own(id)
	if err != nil {
		return nil, fmt.Errorf("claiming agent %s: %w", id, err)
	}
	opts := store.LogOptions{OnHeal: func() { c.logHealed(id) }, Lease: lease}
	opts.Replay = replay
	// The projection copies what it keeps of an entry's data: recovery
	// reads every line without a copy of each.
	opts.ReplayBorrows = replay != nil
	opts.MustExist = replay != nil
	opts.Resume = resume
	opts.OnAppend = func(es []eventlog.Entry) {
		if a := *target; a != nil {
			due := a.ApplyCommitted(es, c.opts.CheckpointEvery, func(e eventlog.Entry, err error) {
				c.log.Error("applying logged event", "agent", id, "seq", e.Seq, "event", e.Event, "err", err)
			})
			if due {
				c.ckpts.Soon(a)
			}
		}
		c.bus.Publish(id, es)
	}
	lg, err := c.st.OpenLog(context.Background(), id, opts)
	if err != nil {
		return nil, err
	}
	return claims.Fenced(lg, func(cause error) { c.releaseAgent(id, cause) }), nil
}

// removeOrphanDir removes the directory of an agent whose creation failed
// before agent.created was durable (agentload.RemoveOrphanDir).
func (c *Core) removeOrphanDir(id string) { agentload.RemoveOrphanDir(c.fs, c.agentsDir, id) }

// providerSpec is the provider spec of agent id's session (package
// agentspec): its system prompt, identity, process environment and
// history mode.
func (c *Core) providerSpec(provName, id, model, instructions, cwd string) provider.Spec {
	entry := c.config().Providers[provName]
	var mode string
	var modeSet bool
	if a, ok := c.agent(id); ok {
		mode, modeSet = a.Metadata(agentspec.HistoryModeKey)
	}
	env := agentspec.Env{Environ: c.opts.Environ, Extra: c.opts.Env, PythonPath: c.opts.PythonPath, SocketPath: c.opts.SocketPath}
	return provider.Spec{AgentID: id, Model: model, Instructions: instructions, Cwd: cwd,
		System: agentspec.SystemPrompt(c.tree, id, instructions),
		Env:    agentspec.ProcessEnv(entry, env, id), Launcher: c.launches.For(id),
		Identity: agentspec.Identity(c.tree, id), HistoryMode: agentspec.HistoryMode(mode, modeSet, entry)}
}

// provider looks a provider up by name; an unknown one is code 2 naming the
// known providers.
func (c *Core) provider(name string) (provider.Provider, error) {
	if p, ok := c.providers.Lookup(name); ok {
		return p, nil
	}
	return nil, failf(ErrInvalid, "unknown provider %q (known: %s)", name, strings.Join(c.providers.Names(), ", "))
}
