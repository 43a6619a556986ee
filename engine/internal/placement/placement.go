// Package placement decides what recovery (and a takeover scan) makes of
// the agents it read back from the store: which are listed corrupt,
// settled as uncreated, remembered as terminated, or placed in the tree;
// in what order they are placed (parents before children, by creation);
// which are orphans to terminate or to list corrupt; which spawns a crash
// cut off are redone; what the projections no longer need to keep; and
// which children still owe their bootstrap turn.
//
// Every function here is pure: it takes plain values (ids, parent ids,
// flags read from the loaded agents and from the Core's agent map) and
// returns decisions. The engine gathers the values under its locks and
// does what was decided (the tree, the appends, the wakes), in the order
// returned, so the log entries and their order are those the engine wrote
// when it decided as it went.
//
// # Locks
//
// None: the package holds no state. Existing is a plain map its caller
// owns.
package placement

import (
	"sort"
	"time"

	"github.com/warren-dev/warren/projection"
)

// Loaded is what classification needs of one agent read back.
type Loaded struct {
	ID string
	// Parent is the parent its agent.created names ("" for a root).
	Parent string
	// Damaged: its log is damaged in the middle or could not be opened.
	Damaged bool
	// Created: its log holds a durable agent.created.
	Created bool
	// Terminated: its log holds agent.terminated.
	Terminated bool
}

// Class is what becomes of one loaded agent.
type Class int

const (
	// Corrupt agents are listed with the cause of the damage.
	Corrupt Class = iota
	// Uncreated agents (no agent.created) are settled: see Settle.
	Uncreated
	// Gone agents (terminated) are remembered and their logs closed.
	Gone
	// Live agents are placed in the tree: see Order.
	Live
)

// Existing holds the ids of the agents with a durable agent.created
// (anywhere, for a takeover scan): a spawn whose child exists is not
// redone.
type Existing map[string]bool

// Classification is Classify's result.
type Classification struct {
	// Classes holds the class of each loaded agent, in the order given.
	Classes []Class
	// Parents holds the ids some agent.created names as its parent: an
	// uncreated directory among them existed, so it is no orphan.
	Parents map[string]bool
	// Existing holds the ids of the loaded agents that were created.
	Existing Existing
}

// Classify sorts the loaded agents: damaged logs are corrupt, logs
// without agent.created uncreated, terminated ones gone, the rest live.
func Classify(ls []Loaded) Classification {
	cl := Classification{Classes: make([]Class, len(ls)), Parents: map[string]bool{}, Existing: Existing{}}
	for _, l := range ls {
		if l.Created {
			cl.Existing[l.ID] = true
			cl.Parents[l.Parent] = true
		}
	}
	for i, l := range ls {
		switch {
		case l.Damaged:
			cl.Classes[i] = Corrupt
		case !l.Created:
			cl.Classes[i] = Uncreated
		case l.Terminated:
			cl.Classes[i] = Gone
		default:
			cl.Classes[i] = Live
		}
	}
	return cl
}

// Settlement is what becomes of an agent directory without
// agent.created.
type Settlement int

const (
	// RemoveOrphan: the orphan of a crash during creation; removed.
	RemoveOrphan Settlement = iota
	// ListCorrupt: a cluster store's log, which is not a local directory
	// to move; listed corrupt.
	ListCorrupt
	// Quarantine: moved to <home>/quarantine (listed corrupt if the move
	// fails).
	Quarantine
)

// Settle decides the fate of an agent directory without agent.created.
// why and empty are what quarantine.ProvablyEmpty found; isParent says
// another agent's agent.created names it as parent; clustered says the
// store is a cluster's; missing says it has no events.jsonl. It returns
// the reason the directory is not an orphan, when it is not.
func Settle(why string, empty, isParent, clustered, missing bool) (Settlement, string) {
	if empty && isParent {
		why, empty = "it holds no agent.created, but another agent's agent.created names it as parent", false
	}
	switch {
	case empty:
		return RemoveOrphan, why
	case clustered && !missing:
		return ListCorrupt, why
	default:
		return Quarantine, why
	}
}

// Candidate is an agent to place in the tree: a live one, or one whose
// log is damaged but whose good prefix names it and its parent (listed
// corrupt, in the tree, so that its healthy children keep their paths).
type Candidate struct {
	ID     string
	Parent string
	// Created is its agent.created's time; placing follows it.
	Created time.Time
	// Corrupt: its log is damaged; it is placed in the tree but listed
	// corrupt (it runs nothing).
	Corrupt bool
}

// Parent is what the Core knew of a parent id before placing began.
type Parent struct {
	// Listed: the Core's agent map holds it (placed, or listed corrupt).
	Listed bool
	// InTree: it is in the tree (placed), so a child can be placed under it.
	InTree bool
	// Unopened: it is listed because its log could not be opened
	// (the engine's errUnopened), so nothing is wrong with its children.
	Unopened bool
	// Quarantined: its directory is in <home>/quarantine.
	Quarantined bool
	// Gone: its log holds agent.terminated (the Core remembers it as
	// terminated). Only then is a child an orphan to terminate.
	Gone bool
}

// Action is what the Core does with one candidate.
type Action int

const (
	// Place adds it to the tree (listed corrupt if the tree refuses it, or
	// if it is a corrupt candidate) and lists it.
	Place Action = iota
	// ParentUnopened lists it with its parent's cause: its parent's log
	// could not be opened.
	ParentUnopened
	// ParentQuarantined lists it corrupt: its parent's directory is in
	// quarantine and may come back, so nothing irreversible is done.
	ParentQuarantined
	// ParentUnplaced lists it, kept and reachable by id, outside the tree:
	// its parent is listed but not in the tree (its log names no parent or
	// name to place it by: a refused or unreadable directory).
	ParentUnplaced
	// ParentMissing lists it, kept and reachable by id, outside the tree:
	// its parent is neither listed nor known to be terminated (its
	// directory is gone). Nothing is terminated because of damage.
	ParentMissing
	// Terminate ends it: its parent's log holds agent.terminated.
	Terminate
)

// Step is one decision of Order.
type Step struct {
	ID     string
	Action Action
}

// Order decides, for the candidates, the order in which they are placed
// and what is done with each: by creation time (then id), roots and
// children of placed parents first, then, pass by pass, children whose
// parent a previous step placed. A child whose parent is not placed is
// kept and listed with the reason (ParentUnopened, ParentQuarantined,
// ParentUnplaced, ParentMissing, or, when a pass places nothing, the
// cycle's members as ParentMissing); only a child whose parent is known to
// be terminated (Gone) is terminated. parents describes each parent id as
// the Core knew it before the first step; a step that places a candidate
// makes it a placed parent for the steps after it, and one that lists a
// candidate outside the tree a listed one.
func Order(cands []Candidate, parents map[string]Parent) []Step {
	waiting := make(map[string]bool, len(cands))
	remaining := make([]Candidate, len(cands))
	copy(remaining, cands)
	for _, c := range cands {
		waiting[c.ID] = true
	}
	sort.Slice(remaining, func(i, j int) bool {
		a, b := remaining[i], remaining[j]
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		return a.ID < b.ID
	})
	known := make(map[string]Parent, len(parents))
	for id, p := range parents {
		known[id] = p
	}
	var steps []Step
	step := func(c Candidate, a Action) {
		steps = append(steps, Step{c.ID, a})
		waiting[c.ID] = false
		p := known[c.ID]
		p.Listed, p.InTree, p.Unopened = true, a == Place, a == ParentUnopened
		known[c.ID] = p
	}
	unplaced := func(c Candidate) {
		switch p := known[c.Parent]; {
		case p.Gone:
			steps = append(steps, Step{c.ID, Terminate})
			waiting[c.ID] = false
			g := known[c.ID]
			g.Gone = true // its own children follow it
			known[c.ID] = g
		case p.Quarantined:
			step(c, ParentQuarantined)
		case p.Listed && p.Unopened:
			step(c, ParentUnopened)
		case p.Listed:
			step(c, ParentUnplaced)
		default:
			step(c, ParentMissing)
		}
	}
	for progress := true; progress && len(remaining) > 0; {
		progress = false
		next := remaining[:0]
		for _, c := range remaining {
			p := known[c.Parent]
			switch {
			case c.Parent == "" || p.InTree:
				step(c, Place)
			case !p.Listed && waiting[c.Parent]:
				next = append(next, c)
				continue
			default:
				unplaced(c)
			}
			progress = true
		}
		remaining = next
	}
	for _, c := range remaining {
		// A cycle of parents: no agent.created can name a parent created
		// after it, so only a forged log leaves one. Keep them all.
		step(c, ParentMissing)
	}
	return steps
}

// CutSpawns returns the spawns whose child's creation a crash cut off in
// a run that has ended (run is the agent's latest run; spawns of an open
// run are redone when it is resumed), and marks their children existing,
// so that a child two records name is created once.
func (e Existing) CutSpawns(spawns []projection.Spawn, run *projection.Run) []projection.Spawn {
	var todo []projection.Spawn
	for _, sp := range spawns {
		if !e[sp.ChildID] && (run == nil || run.RunID != sp.RunID || run.Ended) {
			todo = append(todo, sp)
			e[sp.ChildID] = true
		}
	}
	return todo
}

// KeepSpawns returns the spawns whose child does not exist: a later
// recovery may still need them.
func (e Existing) KeepSpawns(spawns []projection.Spawn) []projection.Spawn {
	var keep []projection.Spawn
	for _, sp := range spawns {
		if !e[sp.ChildID] {
			keep = append(keep, sp)
		}
	}
	return keep
}

// Prune returns now with its first n elements, those recovery looked at,
// replaced by kept: entries applied meanwhile stay. When now holds fewer
// than n it is returned as it is.
func Prune[T any](now []T, n int, kept []T) []T {
	if len(now) < n {
		return now
	}
	return append(kept, now[n:]...)
}

// NeedsBootstrap reports whether a spawned child (its agent.created says
// it owes a bootstrap turn) never started it: no turn, no run. A child
// the operator created owes none (SPEC 6).
func NeedsBootstrap(owed bool, turns int, run *projection.Run) bool {
	return owed && turns == 0 && run == nil
}
