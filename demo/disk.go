package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/schema"
)

// diskAgent is what one agent's log on disk says, read without the daemon.
type diskAgent struct {
	id, name, parentID, path string
	entries                  int
	lastSeq                  uint64
	terminated               bool
	// enqueued lists message.enqueued ids in log order.
	enqueued []string
	// consumed counts, per message id, the completed turns (and
	// message.delivered entries) that consumed it.
	consumed map[string]int
	// openRuns are runs whose latest turn has no turn.complete, turn.failed
	// or turn.cancelled and which are not yet marked interrupted or waiting.
	openRuns []string
	// interrupted counts run.interrupted entries per run id and reason.
	interrupted map[string]map[string]int
	// walBytes is the size of events.pending (0 when absent): records the
	// next open replays into the log.
	walBytes int64
	events   []parsed
	err      error
}

// parsed is one log entry with its data decoded.
type parsed struct {
	event string
	data  map[string]any
}

// cutRuns returns the runs that had a turn under boot whose turn had not
// ended (complete, failed, cancelled, waiting) when the log next shows the
// run interrupted or turned under another boot: the turns a crash of that
// boot cut.
func (a *diskAgent) cutRuns(boot string) []string {
	type st struct{ open, decided bool }
	runs := map[string]*st{}
	var order []string
	for _, e := range a.events {
		id := s(e.data, "run_id")
		r := runs[id]
		switch e.event {
		case schema.TurnStart:
			if r == nil {
				if s(e.data, "boot_id") != boot {
					continue
				}
				r = &st{}
				runs[id] = r
				order = append(order, id)
			}
			if r.decided {
				continue
			}
			if s(e.data, "boot_id") != boot {
				r.decided = true
				continue
			}
			r.open = true
		case schema.TurnComplete, schema.TurnFailed, schema.TurnCancelled, schema.RunWaiting:
			if r != nil && !r.decided {
				r.open = false
			}
		case schema.RunInterrupted:
			if r != nil && !r.decided {
				r.decided = true
			}
		}
	}
	var out []string
	for _, id := range order {
		if runs[id].open {
			out = append(out, id)
		}
	}
	return out
}

// pending returns the enqueued message ids no completed turn consumed.
func (a *diskAgent) pending() []string {
	var out []string
	for _, id := range a.enqueued {
		if a.consumed[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// readDisk reads every agent log under home/agents.
func readDisk(home string) (map[string]*diskAgent, error) {
	fsys := faultfs.OS{}
	dir := filepath.Join(home, "agents")
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return map[string]*diskAgent{}, nil
		}
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	out := map[string]*diskAgent{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		a := readAgent(fsys, filepath.Join(dir, e.Name(), "events.jsonl"))
		a.id = e.Name()
		if st, err := fsys.Stat(filepath.Join(dir, e.Name(), "events.pending")); err == nil {
			a.walBytes = st.Size()
		}
		out[a.id] = a
	}
	for _, a := range out {
		a.path = diskPath(out, a)
	}
	return out, nil
}

func diskPath(all map[string]*diskAgent, a *diskAgent) string {
	parts := []string{a.name}
	seen := map[string]bool{a.id: true}
	for p := a.parentID; p != "" && !seen[p]; {
		seen[p] = true
		pa, ok := all[p]
		if !ok {
			break
		}
		parts = append([]string{pa.name}, parts...)
		p = pa.parentID
	}
	return strings.Join(parts, "/")
}

type runState struct {
	open     bool
	turn     int
	messages []string
}

func readAgent(fsys faultfs.FS, path string) *diskAgent {
	a := &diskAgent{consumed: map[string]int{}, interrupted: map[string]map[string]int{}}
	entries, err := eventlog.ReadAll(fsys, path)
	a.err = err
	a.entries = len(entries)
	runs := map[string]*runState{}
	var order []string
	for _, e := range entries {
		a.lastSeq = e.Seq
		var d map[string]any
		_ = json.Unmarshal(e.Data, &d)
		a.events = append(a.events, parsed{event: e.Event, data: d})
		runID := s(d, "run_id")
		switch e.Event {
		case schema.AgentCreated:
			a.name = s(d, "name")
			a.parentID = s(d, "parent_id")
		case schema.AgentTerminated:
			a.terminated = true
		case schema.MessageEnqueued:
			a.enqueued = append(a.enqueued, s(d, "message_id"))
		case schema.MessageDelivered:
			a.consumed[s(d, "message_id")]++
		case schema.TurnStart:
			r := runs[runID]
			if r == nil {
				r = &runState{}
				runs[runID] = r
				order = append(order, runID)
			}
			r.open, r.turn, r.messages = true, n(d, "turn"), strs(d, "message_ids")
		case schema.TurnComplete:
			if r := runs[runID]; r != nil && r.open && r.turn == n(d, "turn") {
				for _, m := range r.messages {
					a.consumed[m]++
				}
				r.open = false
			}
		case schema.TurnFailed, schema.TurnCancelled, schema.RunWaiting:
			if r := runs[runID]; r != nil {
				r.open = false
			}
		case schema.RunInterrupted:
			if a.interrupted[runID] == nil {
				a.interrupted[runID] = map[string]int{}
			}
			a.interrupted[runID][s(d, "reason")]++
			if r := runs[runID]; r != nil {
				r.open = false
			}
		case schema.RunResumed:
			if r := runs[runID]; r != nil && s(d, "token_id") == "" {
				r.open = true // re-run of an interrupted run
			}
		}
	}
	for _, id := range order {
		if runs[id].open {
			a.openRuns = append(a.openRuns, id)
		}
	}
	return a
}

func s(m map[string]any, k string) string {
	v, _ := m[k].(string)
	return v
}

func n(m map[string]any, k string) int {
	v, _ := m[k].(float64)
	return int(v)
}

func strs(m map[string]any, k string) []string {
	raw, _ := m[k].([]any)
	out := make([]string, 0, len(raw))
	for _, x := range raw {
		if v, ok := x.(string); ok {
			out = append(out, v)
		}
	}
	return out
}

// sortedAgents returns the agents ordered by path.
func sortedAgents(m map[string]*diskAgent) []*diskAgent {
	out := make([]*diskAgent, 0, len(m))
	for _, a := range m {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}
