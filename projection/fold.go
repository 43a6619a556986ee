package projection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/warren-dev/warren/schema"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
)

// One fold method per event of the projection (see apply in projection.go
// and the event table in doc.go).

// projectionFolds maps each event the projection reads to its fold.
var projectionFolds = map[string]func(*State, eventlog.Entry) error{
	schema.AgentCreated:      (*State).foldAgentCreated,
	schema.AgentTerminated:   (*State).foldAgentTerminated,
	schema.AgentClaimed:      (*State).foldAgentClaimed,
	schema.SessionCreated:    (*State).foldSessionCreated,
	schema.ContextReset:      (*State).foldContextReset,
	schema.SessionRestored:   (*State).foldSessionRestored,
	schema.SuspendResult:     (*State).foldSuspendResult,
	schema.TurnStart:         (*State).foldTurnStart,
	schema.TurnComplete:      (*State).foldTurnComplete,
	schema.TurnFailed:        (*State).foldTurnFailed,
	schema.TurnCancelled:     (*State).foldTurnCancelled,
	schema.RunInterrupted:    (*State).foldRunInterrupted,
	schema.RunWaiting:        (*State).foldRunWaiting,
	schema.TokenConsumed:     (*State).foldTokenState,
	schema.TokenRevoked:      (*State).foldTokenState,
	schema.TokenExpired:      (*State).foldTokenState,
	schema.RunResumed:        (*State).foldRunResumed,
	schema.ToolCall:          (*State).foldToolCall,
	schema.MessageEnqueued:   (*State).foldMsgEnqueued,
	schema.MessageDelivered:  (*State).foldMsgDelivered,
	schema.MetadataUpdated:   (*State).foldMetadataUpdated,
	schema.ToolGate:          (*State).foldToolGate,
	schema.ToolSubscribe:     (*State).foldToolSubscribe,
	schema.ToolUnsubscribe:   (*State).foldToolUnsubscribe,
	schema.ReminderSched:     (*State).foldReminderSched,
	schema.ReminderCancel:    (*State).foldReminderCancel,
	schema.NoticesOwed:       (*State).foldNoticesOwed,
	schema.WorkspaceCreated:  (*State).foldWorkspaceCreated,
	schema.WorkspaceSnapshot: (*State).foldWorkspaceSnapshot,
	schema.WorkspaceClosed:   (*State).foldWorkspaceClosed,
	schema.UsageStep:         (*State).foldUsageStep,
	schema.BudgetSet:         (*State).foldBudgetSet,
}

func (p *State) foldAgentCreated(e eventlog.Entry) error {
	var d schema.AgentCreatedData
	if err := decode(e, &d); err != nil {
		return err
	}
	if p.Created {
		return nil
	}
	p.Created = true
	p.CreatedTS = e.TS
	if t := parseTime(d.CreatedAt); !t.IsZero() {
		p.CreatedTS = t
	}
	p.ID, p.Name, p.Instructions, p.Cwd, p.Bootstrap = d.AgentID, d.Name, d.Instructions, d.Cwd, d.Bootstrap
	if d.ParentID != nil {
		p.ParentID = *d.ParentID
	}
	p.Provider, p.Model, p.PrefRef = d.Provider, d.Model, refOf(e)
	p.Sandbox = d.Sandbox
	for k, v := range d.Metadata {
		p.Metadata[k] = v
	}
	return nil
}

func (p *State) foldAgentTerminated(e eventlog.Entry) error {
	p.Terminated = true
	return nil
}

// foldAgentClaimed records the latest claim (a cluster store's new
// owner). A run whose turn began under an earlier claim is one its daemon
// no longer runs: recovery marks it interrupted (session.Facts.EarlierClaim).
func (p *State) foldAgentClaimed(e eventlog.Entry) error {
	var d schema.AgentClaimedData
	if err := decode(e, &d); err != nil {
		return err
	}
	if d.Epoch > p.ClaimEpoch {
		p.ClaimEpoch = d.Epoch
	}
	return nil
}

func (p *State) foldSessionCreated(e eventlog.Entry) error {
	var d schema.SessionCreatedData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Handle, p.SessProvider, p.SessModel = d.Handle, d.Provider, d.Model
	p.Suspended, p.SessRef = false, refOf(e)
	return nil
}

func (p *State) foldContextReset(e eventlog.Entry) error {
	// The next session starts fresh: no native handle, no blob.
	p.Handle, p.Suspended, p.SessRef = "", false, refOf(e)
	return nil
}

func (p *State) foldSessionRestored(e eventlog.Entry) error {
	var d schema.SessionRestoredData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.SessProvider, p.SessModel = d.Provider, d.Model
	p.Suspended, p.SessRef = false, refOf(e)
	return nil
}

func (p *State) foldSuspendResult(e eventlog.Entry) error {
	p.Suspended, p.SessRef = true, refOf(e)
	return nil
}

func (p *State) foldTurnStart(e eventlog.Entry) error {
	var d schema.TurnStartData
	var raw startRaw
	var rawp *startRaw // replaying: the raw values go here (startRaw)
	if p.lazy != nil {
		rawp = &raw
	}
	replaying := rawp != nil
	if p.slow || !fastTurnStart(e.Data, p.Run, &d, rawp) {
		var full schema.TurnStartData // (d itself stays on the stack)
		if err := decode(e, &full); err != nil {
			return err
		}
		d, replaying = full, false
	}
	if d.Turn > p.TurnNo {
		p.TurnNo = d.Turn
	}
	// The preference (the last provider and model used) changes only
	// when a run on them completes (turn.complete): a failed run
	// leaves it alone.
	rerun := p.Run != nil && p.Run.RunID == d.RunID && p.Run.Turn == d.Turn && !p.Run.Ended
	switch {
	case rerun:
	case p.lazy != nil && p.Run != nil && p.Run.Ended:
		// Replaying: nothing else holds the ended run, so its record is
		// reused (a log has a run every few events), and an ended run's
		// calls' array too, once the run has a call (foldToolCall: until
		// then its Calls is nil, as a live fold's is).
		*p.Run = Run{RunID: d.RunID, Turn: d.Turn, StartRef: refOf(e)}
	default:
		p.Run = &Run{RunID: d.RunID, Turn: d.Turn, StartRef: refOf(e)}
	}
	if !rerun && p.lazy != nil {
		p.lazy.refs = p.lazy.refs[:0] // the run before and its calls are let go
	}
	r := p.Run
	r.BootID, r.Prompt, r.MessageIDs = d.BootID, d.Prompt, d.MessageIDs
	if replaying {
		p.lazy.holdStart(r, raw)
	} else if p.lazy != nil {
		p.lazy.startOf = nil
	}
	r.ClaimEpoch = p.ClaimEpoch
	r.Provider, r.Model, r.StartedAt = d.Provider, d.Model, e.TS
	r.Interrupted, r.Reason = false, ""
	if r.Wait != nil && r.Wait.TokenState != tokLive {
		r.Wait = nil
	}
	return nil
}

// turnEndOf decodes the data of a turn-ending event: with the fast
// decoder, or with encoding/json into its data type.
func (p *State) turnEndOf(e eventlog.Entry, kind int) (turnEnd, error) {
	var d turnEnd
	if !p.slow && fastTurnEnd(e.Data, kind, &d) {
		return d, nil
	}
	d = turnEnd{}
	switch kind {
	case endComplete:
		var full schema.TurnCompleteData
		if err := decode(e, &full); err != nil {
			return d, err
		}
		d.RunID, d.Usage = []byte(full.RunID), full.Usage
		d.ResponseText, d.Decoded = full.Response, true
	case endFailed:
		var full schema.TurnFailedData
		if err := decode(e, &full); err != nil {
			return d, err
		}
		d.RunID, d.Error = []byte(full.RunID), full.Error
	default:
		var full schema.TurnCancelledData
		if err := decode(e, &full); err != nil {
			return d, err
		}
		d.RunID = []byte(full.RunID)
	}
	return d, nil
}

// runForID is runFor for an id given as bytes (no copy).
func (p *State) runForID(runID []byte) *Run {
	if p.Run != nil && p.Run.RunID == string(runID) {
		return p.Run
	}
	return nil
}

func (p *State) foldTurnComplete(e eventlog.Entry) error {
	d, err := p.turnEndOf(e, endComplete)
	if err != nil {
		return err
	}
	if r := p.runForID(d.RunID); r != nil {
		r.Ended, r.Wait, r.EndRef = true, nil, refOf(e)
		// Answers for a re-run; an ended run is never re-run. Replaying,
		// the array serves the next run (foldTurnStart).
		p.lazy.spare(r.Calls)
		r.Calls = nil
		if lz := p.lazy; lz != nil && lz.startOf == r {
			eachString(lz.start.msgIDs, p.takeOne)
		} else {
			p.take(r.MessageIDs)
		}
		if r.Provider != "" {
			p.Provider, p.Model, p.PrefRef = r.Provider, r.Model, r.StartRef
		}
	}
	if d.Usage != nil {
		p.Usage = p.Usage.Add(*d.Usage)
	}
	p.Spent.Turns++
	if lr := p.LastResume; lr != nil && lr.RunID == string(d.RunID) {
		resp := d.ResponseText
		if !d.Decoded && d.Response != nil && !setString(&resp, d.Response, "") {
			var full schema.TurnCompleteData
			if err := decode(e, &full); err == nil {
				resp = full.Response
			}
		}
		lr.Result, lr.Completed = resp, true
	}
	p.LastError = ""
	return nil
}

func (p *State) foldTurnFailed(e eventlog.Entry) error {
	d, err := p.turnEndOf(e, endFailed)
	if err != nil {
		return err
	}
	if r := p.runForID(d.RunID); r != nil {
		r.Ended, r.Calls, r.EndRef = true, nil, refOf(e)
	}
	p.LastError = d.Error
	return nil
}

func (p *State) foldTurnCancelled(e eventlog.Entry) error {
	d, err := p.turnEndOf(e, endCancelled)
	if err != nil {
		return err
	}
	if r := p.runForID(d.RunID); r != nil {
		r.Ended, r.Calls, r.EndRef = true, nil, refOf(e)
	}
	return nil
}

func (p *State) foldRunInterrupted(e eventlog.Entry) error {
	var d schema.RunInterruptedData
	if err := decode(e, &d); err != nil {
		return err
	}
	if r := p.RunFor(d.RunID); r != nil {
		r.Interrupted, r.Reason, r.InterruptSeq = true, d.Reason, e.Seq
	}
	return nil
}

func (p *State) foldRunWaiting(e eventlog.Entry) error {
	var d schema.RunWaitingData
	if err := decode(e, &d); err != nil {
		return err
	}
	if r := p.RunFor(d.RunID); r != nil {
		r.Wait = &Wait{TokenID: d.TokenID, Kind: d.WaitKind, Prompt: d.Prompt,
			SecretHash: d.SecretHash, Deadline: parseTime(d.Deadline), Since: e.TS, Turn: d.Turn, TokenState: tokLive}
		r.ResumeResponse, r.TimedOut = nil, false
	}
	return nil
}

func (p *State) foldTokenState(e eventlog.Entry) error {
	var d schema.TokenData
	if err := decode(e, &d); err != nil {
		return err
	}
	if r := p.RunFor(d.RunID); r != nil && r.Wait != nil && r.Wait.TokenID == d.TokenID {
		switch e.Event {
		case schema.TokenConsumed:
			r.Wait.TokenState = tokConsumed
		case schema.TokenRevoked:
			r.Wait.TokenState = tokRevoked
		default:
			r.Wait.TokenState = tokExpired
		}
	}
	return nil
}

func (p *State) foldRunResumed(e eventlog.Entry) error {
	var d schema.RunResumedData
	if err := decode(e, &d); err != nil {
		return err
	}
	if r := p.RunFor(d.RunID); r != nil {
		r.Interrupted, r.Reason = false, ""
		if d.By == schema.ByAuto {
			r.AutoResumes++
		}
		if d.TimedOut {
			r.TimedOut = true
		}
		if d.TokenID != "" && r.Wait != nil && r.Wait.TokenID == d.TokenID {
			resp := d.Response
			r.ResumeResponse = &resp
			r.Wait.Response = d.Response
			r.Wait.TokenState = tokConsumed
			p.LastResume = &Resume{TokenID: d.TokenID, RunID: d.RunID, SecretHash: r.Wait.SecretHash, Response: d.Response}
		}
	}
	return nil
}

// toolCallOf decodes the data of a tool.call: with the fast decoder, or
// with encoding/json into the members the fold reads.
func (p *State) toolCallOf(e eventlog.Entry) (toolCallFields, error) {
	var d toolCallFields
	if !p.slow && fastToolCall(e.Data, &d) {
		return d, nil
	}
	var full struct {
		Tool     string            `json:"tool"`
		Args     json.RawMessage   `json:"args"`
		Result   json.RawMessage   `json:"result"`
		Error    string            `json:"error"`
		RunID    string            `json:"run_id"`
		Messages []json.RawMessage `json:"messages"`
	}
	if err := decode(e, &full); err != nil {
		return d, err
	}
	return toolCallFields{Tool: []byte(full.Tool), Args: full.Args, Result: full.Result, Error: full.Error,
		RunID: []byte(full.RunID), MessageList: full.Messages}, nil
}

func (p *State) foldToolCall(e eventlog.Entry) error {
	// Arguments, results and envelopes stay raw: most are never read
	// again.
	d, err := p.toolCallOf(e)
	if err != nil {
		return err
	}
	sent := sentRefs(e, d, p.lazy)
	if lz := p.lazy; lz != nil && len(p.Sent)+len(sent) > cap(p.Sent) && len(sent) < maxSentKept {
		// Replaying, nothing else reads Sent: the window moves to the
		// front of the replay's own array instead of to a new one.
		if lz.sent == nil {
			lz.sent = make([]SentRef, 0, 2*maxSentKept)
		}
		keep := p.Sent[max(0, len(p.Sent)-(maxSentKept-len(sent))):]
		p.Sent = lz.sent[:copy(lz.sent[:cap(lz.sent)], keep)]
	}
	p.Sent = append(p.Sent, sent...)
	if n := len(p.Sent) - maxSentKept; n > 0 {
		// The window slides without a copy; append copies the live part
		// when the array is full. Nothing written stays visible through
		// p.Sent, which others read (pruneRecovered).
		p.Sent = p.Sent[n:]
	}
	if string(d.Tool) == "spawn_agent" && d.Error == "" && len(d.RunID) > 0 {
		var res struct {
			AgentID string `json:"agent_id"`
		}
		if json.Unmarshal(d.Result, &res) == nil && res.AgentID != "" {
			p.Spawns = append(p.Spawns, Spawn{ChildID: res.AgentID, RunID: string(d.RunID), Ref: inbox.Ref{Seq: e.Seq, Off: e.Off}})
		}
	}
	if len(d.RunID) > 0 {
		if r := p.runForID(d.RunID); r != nil && !r.Ended {
			if r.Calls == nil && p.lazy != nil {
				r.Calls = p.lazy.spareCalls()
			}
			r.Calls = append(r.Calls, Call{Tool: p.toolName(r.Calls, d.Tool), Result: p.keepRaw(d.Result), Error: d.Error, Messages: sent})
		}
	}
	return nil
}

// toolName is the tool's name, shared with an earlier call of the run
// when one has it, or while replaying with the replay's names.
func (p *State) toolName(calls []Call, tool []byte) string {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Tool == string(tool) {
			return calls[i].Tool
		}
	}
	if p.lazy != nil {
		return p.lazy.name(tool)
	}
	return string(tool)
}

func (p *State) foldMsgEnqueued(e eventlog.Entry) error {
	if id, ok := messageIDOf(e.Data); ok && p.lazy != nil && len(e.Data) <= lazyRawMax && !bytes.Contains(e.Data, []byte(`"reminder_id"`)) {
		if !p.Enqueued.addHex(id) {
			return nil
		}
		p.lazy.add(msgKey{hex: id, isHex: true}, lazyMsg{raw: p.lazy.keep(e.Data), ref: inbox.Ref{Seq: e.Seq, Off: e.Off}})
		return nil
	}
	m, err := messageFromData(e.Data)
	if err != nil {
		return fmt.Errorf("event %s at seq %d: %w", e.Event, e.Seq, err)
	}
	if !p.Enqueued.Add(m.ID) {
		return nil
	}
	q := Queued(m, e)
	if p.lazy != nil {
		p.lazy.add(keyOf(m.ID), lazyMsg{msg: &q})
	} else if err := p.Pending.Push(q); err != nil {
		return fmt.Errorf("event %s at seq %d: %w", e.Event, e.Seq, err)
	}
	if rid := m.Metadata["reminder_id"]; rid != "" {
		if r := p.Reminders[rid]; r != nil {
			r.LastHit = m.Timestamp
			if r.Every == 0 {
				delete(p.Reminders, rid)
			}
		}
	}
	return nil
}

func (p *State) foldMsgDelivered(e eventlog.Entry) error {
	if !p.slow {
		if id, ok := fastMessageID(e.Data); ok {
			p.takeOne(id)
			return nil
		}
	}
	var d schema.MessageDeliveredData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.takeOne([]byte(d.MessageID))
	return nil
}

func (p *State) foldMetadataUpdated(e eventlog.Entry) error {
	var d schema.MetadataUpdatedData
	if err := decode(e, &d); err != nil {
		return err
	}
	if d.Value == nil {
		delete(p.Metadata, d.Key)
	} else {
		p.Metadata[d.Key] = *d.Value
	}
	return nil
}

func (p *State) foldToolGate(e eventlog.Entry) error {
	var d schema.GateData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Gated, p.GateRef = d.Action == "gate", refOf(e)
	return nil
}

func (p *State) foldToolSubscribe(e eventlog.Entry) error {
	var d schema.SubscribeData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Subs[d.SubscriptionID] = Subscription{ID: d.SubscriptionID, Target: d.TargetID, From: d.From, To: d.To, Once: d.Once}
	return nil
}

func (p *State) foldToolUnsubscribe(e eventlog.Entry) error {
	var d schema.UnsubscribeData
	if err := decode(e, &d); err != nil {
		return err
	}
	delete(p.Subs, d.SubscriptionID)
	return nil
}

// foldNoticesOwed keeps the latest transition's owed notices: the live
// engine delivers each transition's before the agent's next one, so only
// the latest can be owed still after a crash.
func (p *State) foldNoticesOwed(e eventlog.Entry) error {
	var d schema.NoticesOwedData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Notices = &Notices{Seq: e.Seq, NoticesOwedData: d}
	return nil
}

func (p *State) foldReminderSched(e eventlog.Entry) error {
	var d schema.ReminderData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Reminders[d.ReminderID] = &Reminder{ID: d.ReminderID, Reason: d.Reason,
		Due: parseTime(d.Due), Every: time.Duration(d.EveryMS) * time.Millisecond}
	return nil
}

func (p *State) foldReminderCancel(e eventlog.Entry) error {
	var d schema.ReminderData
	if err := decode(e, &d); err != nil {
		return err
	}
	delete(p.Reminders, d.ReminderID)
	return nil
}

func (p *State) foldWorkspaceCreated(e eventlog.Entry) error {
	var d schema.WorkspaceData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Workspace = &Workspace{Repo: d.Repo, Path: d.Path, Branch: d.Branch, Base: d.Base}
	return nil
}

// foldWorkspaceSnapshot keeps the start snapshot of the run it names and
// the latest end snapshot.
func (p *State) foldWorkspaceSnapshot(e eventlog.Entry) error {
	var d schema.WorkspaceSnapshotData
	if err := decode(e, &d); err != nil {
		return err
	}
	if p.Workspace == nil {
		return nil
	}
	p.Workspace.Last = d.Commit
	switch d.At {
	case schema.SnapshotStart:
		if r := p.RunFor(d.RunID); r != nil {
			r.StartCommit = d.Commit
		}
	case schema.SnapshotEnd:
		p.Workspace.LastEnd = d.Commit
	}
	return nil
}

func (p *State) foldWorkspaceClosed(e eventlog.Entry) error {
	var d schema.WorkspaceClosedData
	if err := decode(e, &d); err != nil {
		return err
	}
	if p.Workspace != nil {
		p.Workspace.Closed, p.Workspace.Head = true, d.Commit
	}
	return nil
}

func (p *State) foldUsageStep(e eventlog.Entry) error {
	var d schema.UsageStepData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Spent.AddStep(d)
	return nil
}

func (p *State) foldBudgetSet(e eventlog.Entry) error {
	var d schema.BudgetSetData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Budget = &d
	return nil
}
