package engine

import (
	"maps"
	"sort"
	"time"

	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
)

// View is the agent of snapshot s as agent.list shows it, its status
// derived for boot bootID at now.
func buildView(s agentSnapshot, bootID string, now time.Time) AgentView {
	v := AgentView{ID: s.ID, Name: s.Name, Path: s.Path, ParentID: s.ParentID,
		Status:   viewStatus(s.Session, s.Facts, s.Busy, bootID, now),
		Provider: s.Provider, Model: s.Model, Pending: s.Pending, Wait: s.Wait, LastError: s.LastError,
		Degraded: s.Degraded, Usage: s.Usage, Spent: s.Spent, CreatedAt: s.CreatedAt, LastTurnAt: s.LastTurnAt}
	if v.Path == "" {
		v.Path = s.Name
	}
	if s.Corrupt != nil {
		v.Error = s.Corrupt.Error() + repairAdvice(s.ID, s.Unopened)
	}
	return v
}

// repairAdvice is what a listed agent's error tells the operator to do:
// `warren repair` for a damaged log, nothing more when the log could not be
// opened (its error says to restart once the cause is gone).
func repairAdvice(id string, unopened bool) string {
	if unopened {
		return ""
	}
	return "; run `warren repair " + id + "` to keep a copy and cut the log to its last good entry"
}

// Order is agent.list's order of the loaded agents: those of the tree's
// walk (depth-first from the roots) that are loaded, in its order, then
// the other loaded ones (corrupt agents, outside the tree) by id.
func listOrder(walk, loaded []string) []string {
	in := make(map[string]bool, len(loaded))
	for _, id := range loaded {
		in[id] = true
	}
	out := make([]string, 0, len(loaded))
	for _, id := range walk {
		if in[id] {
			out = append(out, id)
			delete(in, id) // what is left of in: the loaded agents off the walk
		}
	}
	var rest []string
	for _, id := range loaded {
		if in[id] {
			rest = append(rest, id)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// Wait is the pending wait of snapshot s, as waits.list shows it: false
// when its open run does not wait on a live token.
func waitView(s agentSnapshot) (WaitView, bool) {
	w := s.Wait
	if w == nil || w.State != string(schema.TokLive) {
		return WaitView{}, false
	}
	path := s.Path
	if path == "" {
		path = s.Name
	}
	return WaitView{AgentID: s.ID, Path: path, RunID: w.RunID, Kind: w.Kind, Prompt: w.Prompt, TokenID: w.TokenID,
		Deadline: w.Deadline, Since: s.WaitSince}, true
}

// agentSettings is what agent.inspect shows beyond the list view, copied by
// TakeSettings under the agent's lock.
type agentSettings struct {
	Cwd, Instructions string
	Metadata          map[string]string
	Gated             bool
	// Pending are the first pending messages after the page's since_seq:
	// one more than the page holds, so Detail knows whether more follow.
	Pending []inbox.Message
}

// TakeSettings copies the settings of the projection p and the pending
// messages logged after sinceSeq, limit+1 at most. The caller guards p.
func takeSettings(p *fold.State, sinceSeq uint64, limit int) agentSettings {
	s := agentSettings{Cwd: p.Cwd, Pending: p.Pending.PeekAfter(sinceSeq, limit+1),
		Metadata: make(map[string]string, len(p.Metadata)), Gated: p.Gated, Instructions: p.Instructions}
	maps.Copy(s.Metadata, p.Metadata)
	return s
}

// Detail is agent.inspect's view of agent v with its children and
// settings s, but for its inbox page: it returns the messages of the page
// (at most limit and, beyond the first, about pageBytes of payload) for
// the caller to read their payloads back and pass to Inbox, and sets
// HasMore and InboxNextSeq when more follow. Children is never nil.
func buildDetail(v AgentView, children []ChildView, s agentSettings, limit int, pageBytes int64) (AgentDetail, []inbox.Message) {
	if children == nil {
		children = []ChildView{}
	}
	d := AgentDetail{AgentView: v, Children: children, Cwd: s.Cwd, Metadata: s.Metadata, Gated: s.Gated,
		Instructions: s.Instructions}
	msgs := s.Pending
	var size int64
	for i, msg := range msgs {
		if size += int64(msg.Size()); i == limit || (i > 0 && size > pageBytes) {
			d.HasMore, d.InboxNextSeq = true, msgs[i-1].Ref.Seq
			msgs = msgs[:i]
			break
		}
	}
	return d, msgs
}

// Inbox is a page of pending messages as agent.inspect shows them, each
// sender named by name (the engine's display name: a path, or an id once
// gone). Never nil.
func inboxItems(msgs []inbox.Message, name func(id string) string) []InboxItem {
	out := make([]InboxItem, 0, len(msgs))
	for _, msg := range msgs {
		out = append(out, InboxItem{From: name(msg.Sender), Text: msg.Payload, MessageID: msg.ID, Kind: string(msg.Kind),
			Timestamp: msg.Timestamp, Seq: msg.Ref.Seq})
	}
	return out
}

// Degraded says why an agent's log refuses appends ("" when it accepts
// them and nothing is owed): logErr is the log's refusal, released why
// this daemon may no longer write for the agent, owed the run end it has
// not logged yet (owed.End.Describe), each nil or "" when there is none.
func degradedText(logErr error, released error, owed string) string {
	if logErr == nil && owed == "" && released == nil {
		return ""
	}
	msg := ""
	if logErr != nil {
		msg = logErr.Error()
	}
	if released != nil {
		if msg != "" {
			msg += "; "
		}
		msg += "released by this daemon (" + released.Error() + "): its turns run on the daemon that claimed it"
	}
	if owed != "" {
		if msg != "" {
			msg += "; "
		}
		msg += owed
	}
	return msg
}

// Terminated is the terminated agent a as agent.list shows it, at path
// (the one it had).
func terminatedView(a goneAgent, path string) TerminatedView {
	v := TerminatedView{ID: a.ID, Name: a.Name, Path: path, ParentID: a.ParentID}
	if in := a.Info; in != nil {
		v.Known, v.Provider, v.Model, v.Usage = true, in.Provider, in.Model, in.Usage
		v.CreatedAt, v.LastTurnAt, v.TerminatedAt = in.CreatedAt, in.LastTurnAt, in.TerminatedAt
	}
	return v
}
