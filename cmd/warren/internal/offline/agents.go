package offline

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// IsAgentID reports whether s has the form of an agent id (32 hex digits).
func IsAgentID(s string) bool { return hexID.MatchString(s) }

// ErrUnknownAgent: REF names no agent on disk.
var ErrUnknownAgent = errors.New("no such agent")

// Agent is what the first entry of an agent's log says about it, with
// the slash path derived from its ancestors' logs.
type Agent struct {
	ID, Name, ParentID, Path string
}

// UserRef is the REF of the operator's inbox (tree.User).
const UserRef = "USER"

func logPath(home, id string) string { return filepath.Join(home, "agents", id, "events.jsonl") }

// LogPath resolves REF to the agent's events.jsonl without the daemon,
// as the daemon resolves it (tree.Resolve): a 32-hex id directly; a REF
// with a slash is a path, else a name; live agents first; two live
// matches are an error listing their paths. Only when no live agent
// matches, a terminated one does (a reused name or path that names several
// terminated agents is an error listing their ids). Never a random pick.
//
// REF "USER" (a name no agent may take) is the operator's inbox,
// <home>/user.jsonl (SPEC 9: `warren logs USER`, `warren repair USER`).
func LogPath(home, ref string) (string, error) {
	if ref == UserRef {
		p := filepath.Join(home, "user.jsonl")
		if _, err := os.Lstat(p); err != nil {
			return "", fmt.Errorf("%w: the USER inbox has no log yet (%s): the daemon writes it when a root agent first sends to USER", ErrUnknownAgent, p)
		}
		return p, nil
	}
	if IsAgentID(ref) {
		if _, err := os.Stat(logPath(home, ref)); err != nil {
			return "", fmt.Errorf("%w: no log for agent id %s under %s", ErrUnknownAgent, ref, filepath.Join(home, "agents"))
		}
		return logPath(home, ref), nil
	}
	agents, err := Agents(home)
	if err != nil {
		return "", err
	}
	var live, ended []Agent
	for _, a := range agents {
		match := a.Name == ref
		if strings.Contains(ref, "/") {
			match = a.Path == strings.TrimPrefix(ref, "/")
		}
		if !match {
			continue
		}
		if loggedTermination(logPath(home, a.ID)) {
			ended = append(ended, a)
		} else {
			live = append(live, a)
		}
	}
	switch {
	case len(live) == 1:
		return logPath(home, live[0].ID), nil
	case len(live) > 1:
		return "", fmt.Errorf("%w: %q is ambiguous: it names %d agents (%s); use one of these paths or an agent id",
			ErrUnknownAgent, ref, len(live), describeAgents(live, false))
	case len(ended) == 1:
		return logPath(home, ended[0].ID), nil
	case len(ended) > 1:
		return "", fmt.Errorf("%w: %q names no live agent but %d terminated ones (%s); use an agent id",
			ErrUnknownAgent, ref, len(ended), describeAgents(ended, true))
	}
	return "", fmt.Errorf("%w: %q matches no agent path, name or id under %s", ErrUnknownAgent, ref, filepath.Join(home, "agents"))
}

// describeAgents lists agents as "path" (withID: "path (id)"), in order.
func describeAgents(as []Agent, withID bool) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = "/" + a.Path
		if withID {
			out[i] += " (" + a.ID + ")"
		}
	}
	return strings.Join(out, ", ")
}

// loggedTermination reports whether an agent's log records agent.terminated.
func loggedTermination(path string) bool {
	r, err := eventlog.NewReader(faultfs.OS{}, path, 0)
	if err != nil {
		return false
	}
	defer r.Close()
	for {
		e, err := r.Next()
		if err != nil {
			return false
		}
		if e.Event == schema.AgentTerminated {
			return true
		}
	}
}

// Agents reads the first entry (agent.created) of every agent log of home
// and derives the slash paths; they come sorted by path, then id.
func Agents(home string) ([]Agent, error) {
	dir := filepath.Join(home, "agents")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list agents in %s: %w", dir, err)
	}
	byID := map[string]*Agent{}
	for _, e := range ents {
		if !e.IsDir() || !IsAgentID(e.Name()) {
			continue
		}
		a, ok := readCreated(filepath.Join(dir, e.Name(), "events.jsonl"))
		if !ok {
			continue
		}
		a.ID = e.Name()
		byID[a.ID] = &a
	}
	out := make([]Agent, 0, len(byID))
	for _, a := range byID {
		a.Path = agentPath(byID, a)
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func agentPath(byID map[string]*Agent, a *Agent) string {
	parts := []string{a.Name}
	seen := map[string]bool{a.ID: true}
	for p := a.ParentID; p != ""; {
		pa, ok := byID[p]
		if !ok || seen[p] {
			break
		}
		seen[p] = true
		parts = append(parts, pa.Name)
		p = pa.ParentID
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "/")
}

func readCreated(path string) (Agent, bool) {
	r, err := eventlog.NewReader(faultfs.OS{}, path, 0)
	if err != nil {
		return Agent{}, false
	}
	defer r.Close()
	e, err := r.Next()
	if err != nil || e.Event != schema.AgentCreated {
		return Agent{}, false
	}
	var d struct {
		Name     string  `json:"name"`
		ParentID *string `json:"parent_id"`
	}
	if json.Unmarshal(e.Data, &d) != nil || d.Name == "" {
		return Agent{}, false
	}
	a := Agent{Name: d.Name}
	if d.ParentID != nil {
		a.ParentID = *d.ParentID
	}
	return a, true
}

// Terminated reports whether an agent's session.json says it was
// terminated (a cheap read: the log may be long).
func Terminated(home, id string) bool {
	b, err := os.ReadFile(filepath.Join(home, "agents", id, "session.json"))
	if err != nil {
		return false
	}
	s, err := session.Parse(b)
	return err == nil && s.State == session.StateTerminated
}
