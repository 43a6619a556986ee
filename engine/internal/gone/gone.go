// Package gone is what the daemon remembers of its terminated agents, so
// that a message one sent (still in an inbox) shows who sent it, not a raw
// id (issue 14), and agent.list (all) can show them: each one's name and
// its parent's id, from which the path it had is rebuilt, and, once read,
// what the list shows of it (Info, folded from its log by ReadInfo).
//
// # Locks
//
// A Registry has no lock of its own: its owner serialises every call (the
// engine calls it under its roster's lock, so that a terminated agent
// leaves the tree and enters the registry in one step). ReadInfo reads a
// log and takes no lock; call it without holding the owner's lock.
package gone

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

// Info is what agent.list (all) shows of a terminated agent beyond its
// path: read once from its log, which no longer changes.
type Info struct {
	Provider, Model                     string
	CreatedAt, LastTurnAt, TerminatedAt time.Time
	Usage                               provider.Usage
}

// Agent is one terminated agent. Info is nil until it is known.
type Agent struct {
	ID, Name, ParentID string
	Info               *Info
}

type entry struct {
	name     string
	parentID string
	info     *Info
}

// Registry holds the terminated agents by id. The zero value is empty and
// ready; it is not safe for concurrent use (see the package doc).
type Registry struct {
	m map[string]entry
}

// Remember records a terminated agent (its info unknown).
func (r *Registry) Remember(id, name, parentID string) {
	if r.m == nil {
		r.m = make(map[string]entry)
	}
	r.m[id] = entry{name: name, parentID: parentID}
}

// SetInfo records what the list shows of a terminated agent Remember
// recorded (nothing for another id).
func (r *Registry) SetInfo(id string, info *Info) {
	if g, ok := r.m[id]; ok {
		g.info = info
		r.m[id] = g
	}
}

// Has reports whether id is a terminated agent the registry knows.
func (r *Registry) Has(id string) bool {
	_, ok := r.m[id]
	return ok
}

// Path is the path a terminated agent had ("lead/w1"), or "" when the
// registry does not know the id. treePath gives the path of a live agent
// ("" for one not in the tree): the walk up the parents stops at the
// first live one.
func (r *Registry) Path(id string, treePath func(id string) string) string {
	var parts []string
	for depth := 0; id != "" && depth < 64; depth++ {
		if p := treePath(id); p != "" {
			parts = append(parts, p)
			break
		}
		g, ok := r.m[id]
		if !ok {
			if len(parts) == 0 {
				return ""
			}
			break
		}
		parts = append(parts, g.name)
		id = g.parentID
	}
	slices.Reverse(parts)
	return strings.Join(parts, "/")
}

// Unread lists the ids whose info is not known yet.
func (r *Registry) Unread() []string {
	var unread []string
	for id, g := range r.m {
		if g.info == nil {
			unread = append(unread, id)
		}
	}
	return unread
}

// All lists the terminated agents, in no particular order.
func (r *Registry) All() []Agent {
	out := make([]Agent, 0, len(r.m))
	for id, g := range r.m {
		out = append(out, Agent{ID: id, Name: g.name, ParentID: g.parentID, Info: g.info})
	}
	return out
}

// LogReader reads an agent's log (store.Store has it).
type LogReader interface {
	Read(ctx context.Context, id string, fromSeq uint64, hint int64) (store.Reader, error)
}

// ReadInfo reads what the list shows of a terminated agent from its log;
// what cannot be read stays empty (the list shows "-"), and is logged.
func ReadInfo(st LogReader, id string, log hclog.Logger) *Info {
	info := &Info{}
	r, err := st.Read(context.Background(), id, 0, 0)
	if err != nil {
		log.Warn("reading a terminated agent's log for agent.list", "agent", id, "err", err)
		return info
	}
	defer r.Close()
	for {
		e, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				log.Warn("reading a terminated agent's log for agent.list", "agent", id, "err", err)
			}
			return info
		}
		info.fold(e)
	}
}

// fold takes what the list shows from one entry.
func (in *Info) fold(e eventlog.Entry) {
	switch e.Event {
	case schema.AgentCreated:
		var d schema.AgentCreatedData
		if json.Unmarshal(e.Data, &d) == nil {
			in.Provider, in.Model = d.Provider, d.Model
		}
		in.CreatedAt = e.TS
		if t, err := time.Parse(time.RFC3339Nano, d.CreatedAt); err == nil {
			in.CreatedAt = t
		}
	case schema.TurnStart:
		var d schema.TurnStartData
		if json.Unmarshal(e.Data, &d) == nil && d.Provider != "" {
			in.Provider, in.Model = d.Provider, d.Model
		}
		in.LastTurnAt = e.TS
	case schema.TurnComplete:
		if bytes.Contains(e.Data, []byte(`"usage"`)) {
			var d schema.TurnCompleteData
			if json.Unmarshal(e.Data, &d) == nil && d.Usage != nil {
				in.Usage = in.Usage.Add(*d.Usage)
			}
		}
	case schema.AgentTerminated:
		in.TerminatedAt = e.TS
	}
}
