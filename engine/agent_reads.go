package engine

import (
	"errors"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"maps"
	"slices"
	"time"
)

// What the engine's packages read of an agent, each in one look under
// its lock: the views, the waits, the lifecycle, the mail and the tools.

// Snapshot copies what the views read of the agent (views.go); path
// is its path in the tree.
func (a *agent) Snapshot(path string) agentSnapshot {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return takeSnapshot(a.p, viewFlags{ID: a.id, Path: path, Session: a.statusSnap(a.facts()), Busy: a.busy,
		Degraded: a.degradedLocked(), Corrupt: a.corrupt, Unopened: errors.Is(a.corrupt, errUnopened)})
}

// Status is the agent's derived status (SPEC 4; Status).
func (a *agent) Status(bootID string, now time.Time) string {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	f := a.facts()
	return viewStatus(a.statusSnap(f), f, a.busy, bootID, now)
}

// statusSnap is the session.json snapshot a status is derived with: the
// snapshot when the log shows an open run (its boot and its wait's
// deadline may come from it), else none: the status of an agent without
// an open run comes from its log alone, so that listing agents does not
// read the session.json files a recovery left to read (snapshots.go).
// f is the agent's facts; the caller holds a.stateMu.
func (a *agent) statusSnap(f session.Facts) *session.Session {
	if f.Corrupt || f.Terminated || f.RunID == "" || f.RunEnded {
		return nil
	}
	return a.Snap.Get()
}

// facts reads the latest run's facts from the projection. The caller
// holds a.stateMu.
func (a *agent) facts() session.Facts { return viewFacts(a.p, a.corrupt != nil) }

// Settings are what agent.inspect shows of the agent's settings and one
// page of its inbox (TakeSettings).
func (a *agent) Settings(sinceSeq uint64, limit int) agentSettings {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return takeSettings(a.p, sinceSeq, limit)
}

// Degraded says why the agent's log refuses appends ("" when it accepts
// them), and which run end is owed.
func (a *agent) Degraded() string {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.degradedLocked()
}

func (a *agent) degradedLocked() string {
	if a.Log == nil {
		return ""
	}
	if a.blocked != nil {
		return a.blocked.Error() + " (fix that, then restart the daemon: the start checks workspaces and sandboxes again)"
	}
	return degradedText(a.Log.Degraded(), a.released, a.owed.Describe())
}

// WaitState is what an operation on the agent's waits reads at its start
// (waits.go, resume.go).
func (a *agent) WaitState() waitState {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	var s waitState
	if r := a.p.Run; r != nil {
		s.Run = *r
	}
	s.LiveWait, s.Busy, s.Settling, s.Claims = a.hasLiveWait(), a.busy, a.settling, a.claims
	if cur := a.cur; cur != nil {
		cancel := cur.cancel
		s.Turn = &turnRef{RunID: cur.runID, Cancel: func() { cancel(errOperatorCancel) }, Done: cur.done}
	}
	return s
}

// LastResume is the latest wait the log records answered with a token.
func (a *agent) LastResume() (fold.Resume, bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if lr := a.p.LastResume; lr != nil {
		return *lr, true
	}
	return fold.Resume{}, false
}

// Superseded names what a new run started by a message replaces: the
// live wait (its token, run and kind), whose token the message revokes,
// or else a run a restart interrupted (abandoned).
func (a *agent) Superseded() (tokenID, runID, waitKind, abandoned string) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.hasLiveWait() {
		return a.p.Run.Wait.TokenID, a.p.Run.RunID, a.p.Run.Wait.Kind, ""
	}
	if r := a.p.Run; r != nil && !r.Ended && r.Interrupted && r.Reason == schema.ReasonProcessRestart {
		return "", "", "", r.RunID // interrupted_startup: the new run replaces it
	}
	return "", "", "", ""
}

// Suspended is the wait run runID suspended on and its resume secret
// (handed out once), read together.
func (a *agent) Suspended(runID string) (wait *WaitInfo, token string) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if r := a.p.RunFor(runID); r != nil && r.Wait != nil {
		wait = waitOf(r.Wait, runID)
	}
	return wait, a.resumes.Take(runID)
}

// LiveWait is session.json's form of the latest run's live wait (nil
// when none).
func (a *agent) LiveWait() *session.Wait {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if r := a.p.Run; r != nil && r.Wait != nil && r.Wait.TokenState == string(schema.TokLive) {
		return &session.Wait{Kind: r.Wait.Kind, Prompt: r.Wait.Prompt, TokenID: r.Wait.TokenID,
			SecretHash: r.Wait.SecretHash, Deadline: r.Wait.Deadline}
	}
	return nil
}

// Look is what the lifecycle reads of the agent before acting on it.
func (a *agent) Look() agentLook {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	l := agentLook{Busy: a.busy, Terminated: a.p.Terminated, Corrupt: a.corrupt != nil,
		OpenRun: a.p.Run != nil && !a.p.Run.Ended}
	if a.hasLiveWait() {
		l.WaitToken, l.RunID = a.p.Run.Wait.TokenID, a.p.Run.RunID
	}
	return l
}

// Inherit is what a child spawned by the agent inherits.
func (a *agent) Inherit() inherited {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return inherited{Provider: a.p.Provider, Model: a.p.Model, Cwd: a.p.Cwd}
}

// GoneInfo is what the list of terminated agents shows of the agent,
// terminated at ended.
func (a *agent) GoneInfo(ended time.Time) *goneInfo {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	in := &goneInfo{Provider: a.p.Provider, Model: a.p.Model, CreatedAt: a.p.CreatedTS, TerminatedAt: ended, Usage: a.p.Usage, Spent: a.p.Spent}
	if a.p.Run != nil {
		in.LastTurnAt = a.p.Run.StartedAt
	}
	return in
}

// Inbox reports whether message id was enqueued to the agent, whether it
// is terminated and whether its log is damaged.
func (a *agent) Inbox(id string) (has, terminated, corrupt bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.p.Enqueued.Has(id), a.p.Terminated, a.corrupt != nil
}

// Room reads the agent's inbox for a reservation (reserve.go): its
// pending count and bytes, and what reserved counts of the reservations
// not yet landed in it. reserved runs under the agent's lock.
func (a *agent) Room(reserved func(has func(id string) bool) (int, int64)) (n int, b int64, rn int, rb int64) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	rn, rb = reserved(a.p.Enqueued.Has)
	return a.p.Pending.Len(), a.p.Pending.Bytes(), rn, rb
}

// Failed is what the agent's parent is told of its failed turn, with at
// most max of its pending messages.
func (a *agent) Failed(max int) failure {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return failure{ID: a.id, Parent: a.p.ParentID, Name: a.p.Name, LastErr: a.p.LastError,
		Total: a.p.Pending.Len(), Pending: a.p.Pending.PeekFirst(max, 0)}
}

// TransitionKey names the agent's current transition for notice ids: its
// latest run (a transition happens once per run and direction).
func (a *agent) TransitionKey() string {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.p.Run != nil {
		return transitionKey(a.p.Run.RunID, a.p.Run.Turn)
	}
	return a.id
}

// TakeNotices returns the notices the agent's logged transitions owe
// that this process has not taken yet, in log order: those it logged
// since the last take, or, in a process that logged none (a recovery),
// the log's latest notices.owed, once.
func (a *agent) TakeNotices() []fold.Notices {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	out := a.untold
	a.untold = nil
	if len(out) == 0 && a.p.Notices != nil {
		out = []fold.Notices{*a.p.Notices}
	}
	if len(out) == 0 || out[len(out)-1].Seq <= a.noticesTaken {
		return nil
	}
	a.noticesTaken = out[len(out)-1].Seq
	return out
}

// Subscription is the agent's subscription id.
func (a *agent) Subscription(id string) (fold.Subscription, bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	sub, ok := a.p.Subs[id]
	return sub, ok
}

// WithReminder calls f with the agent's reminder id under its lock; it
// does nothing when there is no such reminder. f may arm a timer.
func (a *agent) WithReminder(id string, f func(fold.Reminder)) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if r := a.p.Reminders[id]; r != nil {
		f(*r)
	}
}

// ToolView is the agent as the tools see it (toolAgent).
func (a *agent) ToolView() toolAgent {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return toolAgent{ID: a.id, Name: a.p.Name, ParentID: a.p.ParentID, State: a.stateLocked(), Gated: a.p.Gated,
		Busy: a.busy, Metadata: maps.Clone(a.p.Metadata), Pending: a.p.Pending.Len()}
}

// Pending lists the agent's pending messages and the ids of those the
// open run was shown: the running turn's, or those of a run a crash
// interrupted or that waits, whose re-run shows them again and consumes
// them when it completes (so check_inbox must not deliver them meanwhile).
func (a *agent) Pending() (pending []inbox.Message, shown []string) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if r := a.p.Run; r != nil && !r.Ended {
		shown = slices.Clone(r.MessageIDs)
	}
	return a.p.Pending.Peek(), shown
}

// PendingFirst is the first of the agent's pending messages: at most n,
// about b bytes of payload.
func (a *agent) PendingFirst(n int, b int64) []inbox.Message {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.p.Pending.PeekFirst(n, b)
}

// OpenWorkspace is the agent's workspace, when it has one not closed.
func (a *agent) OpenWorkspace() (fold.Workspace, bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	w := a.p.Workspace
	if w == nil || w.Closed {
		return fold.Workspace{}, false
	}
	return *w, true
}

// Workspace is the agent's workspace, open or closed.
func (a *agent) Workspace() (fold.Workspace, bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.p.Workspace == nil {
		return fold.Workspace{}, false
	}
	return *a.p.Workspace, true
}

// RunStartCommit is the workspace snapshot at the start of run runID
// ("" when it has none).
func (a *agent) RunStartCommit(runID string) string {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if r := a.p.RunFor(runID); r != nil {
		return r.StartCommit
	}
	return ""
}

// Recorded is what the log records of run runID: its tool calls and how
// its wait was answered (nil when it was not: a response, or the
// timeout of a wait that timed out and was re-run).
func (a *agent) Recorded(runID string) (calls []fold.Call, answer map[string]any) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	r := a.p.RunFor(runID)
	if r == nil {
		return nil, nil
	}
	calls = slices.Clone(r.Calls)
	switch {
	case r.ResumeResponse != nil:
		answer = map[string]any{"response": *r.ResumeResponse}
	case r.TimedOut:
		answer = map[string]any{"error": "wait timed out", "timed_out": true}
	}
	return calls, answer
}

// Metadata is the agent's metadata value of key.
func (a *agent) Metadata(key string) (string, bool) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	v, ok := a.p.Metadata[key]
	return v, ok
}

// reopenSettings is what bringing back the agent's provider session reads: the
// handle and the provider and model its session was created with, its
// instructions and working directory.
type reopenSettings struct {
	Handle, Provider, Model, Instructions, Cwd string
	Sandbox                                    *schema.SandboxData
}

// ReopenSettings reads what bringing back the agent's provider session
// needs.
func (a *agent) ReopenSettings() reopenSettings {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return reopenSettings{Handle: a.p.Handle, Provider: a.p.SessProvider, Model: a.p.SessModel, Instructions: a.p.Instructions,
		Cwd: a.p.Cwd, Sandbox: a.p.Sandbox}
}

// agentLook is what the lifecycle's operations read of an agent, in one
// look under its lock.
type agentLook struct {
	Busy       bool // a turn runs or is being started
	Terminated bool
	Corrupt    bool // its log is damaged in the middle
	// OpenRun: its latest run has not ended (waiting or interrupted).
	OpenRun bool
	// WaitToken and RunID name the live wait of the open run ("" when
	// none).
	WaitToken, RunID string
}

// inherited is what a spawned child takes from its parent.
type inherited struct{ Provider, Model, Cwd string }

// Spent is what the agent's own requests and turns cost (SPEC 13).
func (a *agent) Spent() fold.Spent {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return a.p.Spent
}

// BudgetSet is the agent's budget (a copy; nil: none).
func (a *agent) BudgetSet() *schema.BudgetSetData {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.p.Budget == nil {
		return nil
	}
	b := *a.p.Budget
	return &b
}

// ProviderModel is the agent's provider entry and model (its latest
// turn's, else its session's).
func (a *agent) ProviderModel() (string, string) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.p.Provider != "" {
		return a.p.Provider, a.p.Model
	}
	return a.p.SessProvider, a.p.SessModel
}
