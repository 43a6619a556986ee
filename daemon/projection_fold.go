package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
)

// One fold method per event of the projection (see apply in projection.go
// and the event table in doc.go).

// projectionFolds maps each event the projection reads to its fold.
var projectionFolds = map[string]func(*projection, eventlog.Entry) error{
	evAgentCreated:    (*projection).foldAgentCreated,
	evAgentTerminated: (*projection).foldAgentTerminated,
	evSessionCreated:  (*projection).foldSessionCreated,
	evContextReset:    (*projection).foldContextReset,
	evSessionRestored: (*projection).foldSessionRestored,
	evSuspendResult:   (*projection).foldSuspendResult,
	evTurnStart:       (*projection).foldTurnStart,
	evTurnComplete:    (*projection).foldTurnComplete,
	evTurnFailed:      (*projection).foldTurnFailed,
	evTurnCancelled:   (*projection).foldTurnCancelled,
	evRunInterrupted:  (*projection).foldRunInterrupted,
	evRunWaiting:      (*projection).foldRunWaiting,
	evTokenConsumed:   (*projection).foldTokenState,
	evTokenRevoked:    (*projection).foldTokenState,
	evTokenExpired:    (*projection).foldTokenState,
	evRunResumed:      (*projection).foldRunResumed,
	evToolCall:        (*projection).foldToolCall,
	evMsgEnqueued:     (*projection).foldMsgEnqueued,
	evMsgDelivered:    (*projection).foldMsgDelivered,
	evMetadataUpdated: (*projection).foldMetadataUpdated,
	evToolGate:        (*projection).foldToolGate,
	evToolSubscribe:   (*projection).foldToolSubscribe,
	evToolUnsubscribe: (*projection).foldToolUnsubscribe,
	evReminderSched:   (*projection).foldReminderSched,
	evReminderCancel:  (*projection).foldReminderCancel,
}

func (p *projection) foldAgentCreated(e eventlog.Entry) error {
	var d agentCreatedData
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
	p.ID, p.Name, p.Instructions, p.Cwd = d.AgentID, d.Name, d.Instructions, d.Cwd
	if d.ParentID != nil {
		p.ParentID = *d.ParentID
	}
	p.Provider, p.Model = d.Provider, d.Model
	for k, v := range d.Metadata {
		p.Metadata[k] = v
	}
	return nil
}

func (p *projection) foldAgentTerminated(e eventlog.Entry) error {
	p.Terminated = true
	return nil
}

func (p *projection) foldSessionCreated(e eventlog.Entry) error {
	var d sessionCreatedData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Handle, p.SessProvider, p.SessModel = d.Handle, d.Provider, d.Model
	p.Suspended = false
	return nil
}

func (p *projection) foldContextReset(e eventlog.Entry) error {
	// The next session starts fresh: no native handle, no blob.
	p.Handle, p.Suspended = "", false
	return nil
}

func (p *projection) foldSessionRestored(e eventlog.Entry) error {
	var d sessionRestoredData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.SessProvider, p.SessModel = d.Provider, d.Model
	p.Suspended = false
	return nil
}

func (p *projection) foldSuspendResult(e eventlog.Entry) error {
	p.Suspended = true
	return nil
}

func (p *projection) foldTurnStart(e eventlog.Entry) error {
	var d turnStartData
	if p.slow || !fastTurnStart(e.Data, p.Run, &d) {
		var full turnStartData // (d itself stays on the stack)
		if err := decode(e, &full); err != nil {
			return err
		}
		d = full
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
		// reused (a log has a run every few events).
		*p.Run = runFacts{RunID: d.RunID, Turn: d.Turn}
	default:
		p.Run = &runFacts{RunID: d.RunID, Turn: d.Turn}
	}
	r := p.Run
	r.BootID, r.Prompt, r.MessageIDs = d.BootID, d.Prompt, d.MessageIDs
	r.Provider, r.Model, r.StartedAt = d.Provider, d.Model, e.TS
	r.Interrupted, r.Reason = false, ""
	if r.Wait != nil && r.Wait.TokenState != tokLive {
		r.Wait = nil
	}
	return nil
}

// turnEndOf decodes the data of a turn-ending event: with the fast
// decoder, or with encoding/json into its data type.
func (p *projection) turnEndOf(e eventlog.Entry, kind int) (turnEnd, error) {
	var d turnEnd
	if !p.slow && fastTurnEnd(e.Data, kind, &d) {
		return d, nil
	}
	d = turnEnd{}
	switch kind {
	case endComplete:
		var full turnCompleteData
		if err := decode(e, &full); err != nil {
			return d, err
		}
		d.RunID, d.Usage = []byte(full.RunID), full.Usage
		d.ResponseText, d.Decoded = full.Response, true
	case endFailed:
		var full turnFailedData
		if err := decode(e, &full); err != nil {
			return d, err
		}
		d.RunID, d.Error = []byte(full.RunID), full.Error
	default:
		var full turnCancelledData
		if err := decode(e, &full); err != nil {
			return d, err
		}
		d.RunID = []byte(full.RunID)
	}
	return d, nil
}

// runForID is runFor for an id given as bytes (no copy).
func (p *projection) runForID(runID []byte) *runFacts {
	if p.Run != nil && p.Run.RunID == string(runID) {
		return p.Run
	}
	return nil
}

func (p *projection) foldTurnComplete(e eventlog.Entry) error {
	d, err := p.turnEndOf(e, endComplete)
	if err != nil {
		return err
	}
	if r := p.runForID(d.RunID); r != nil {
		r.Ended, r.Wait = true, nil
		r.Calls = nil // answers for a re-run; an ended run is never re-run
		p.take(r.MessageIDs)
		if r.Provider != "" {
			p.Provider, p.Model = r.Provider, r.Model
		}
	}
	if d.Usage != nil {
		p.Usage = p.Usage.Add(*d.Usage)
	}
	if lr := p.LastResume; lr != nil && lr.RunID == string(d.RunID) {
		resp := d.ResponseText
		if !d.Decoded && d.Response != nil && !setString(&resp, d.Response, "") {
			var full turnCompleteData
			if err := decode(e, &full); err == nil {
				resp = full.Response
			}
		}
		lr.Result, lr.Completed = resp, true
	}
	p.LastError = ""
	return nil
}

func (p *projection) foldTurnFailed(e eventlog.Entry) error {
	d, err := p.turnEndOf(e, endFailed)
	if err != nil {
		return err
	}
	if r := p.runForID(d.RunID); r != nil {
		r.Ended, r.Calls = true, nil
	}
	p.LastError = d.Error
	return nil
}

func (p *projection) foldTurnCancelled(e eventlog.Entry) error {
	d, err := p.turnEndOf(e, endCancelled)
	if err != nil {
		return err
	}
	if r := p.runForID(d.RunID); r != nil {
		r.Ended, r.Calls = true, nil
	}
	return nil
}

func (p *projection) foldRunInterrupted(e eventlog.Entry) error {
	var d runInterruptedData
	if err := decode(e, &d); err != nil {
		return err
	}
	if r := p.runFor(d.RunID); r != nil {
		r.Interrupted, r.Reason = true, d.Reason
	}
	return nil
}

func (p *projection) foldRunWaiting(e eventlog.Entry) error {
	var d runWaitingData
	if err := decode(e, &d); err != nil {
		return err
	}
	if r := p.runFor(d.RunID); r != nil {
		r.Wait = &waitRec{TokenID: d.TokenID, Kind: d.WaitKind, Prompt: d.Prompt,
			SecretHash: d.SecretHash, Deadline: parseTime(d.Deadline), Since: e.TS, Turn: d.Turn, TokenState: tokLive}
		r.ResumeResponse = nil
	}
	return nil
}

func (p *projection) foldTokenState(e eventlog.Entry) error {
	var d tokenData
	if err := decode(e, &d); err != nil {
		return err
	}
	if r := p.runFor(d.RunID); r != nil && r.Wait != nil && r.Wait.TokenID == d.TokenID {
		switch e.Event {
		case evTokenConsumed:
			r.Wait.TokenState = tokConsumed
		case evTokenRevoked:
			r.Wait.TokenState = tokRevoked
		default:
			r.Wait.TokenState = tokExpired
		}
	}
	return nil
}

func (p *projection) foldRunResumed(e eventlog.Entry) error {
	var d runResumedData
	if err := decode(e, &d); err != nil {
		return err
	}
	if r := p.runFor(d.RunID); r != nil {
		r.Interrupted, r.Reason = false, ""
		if d.TokenID != "" && r.Wait != nil && r.Wait.TokenID == d.TokenID {
			resp := d.Response
			r.ResumeResponse = &resp
			r.Wait.Response = d.Response
			r.Wait.TokenState = tokConsumed
			p.LastResume = &resumeRec{TokenID: d.TokenID, RunID: d.RunID, SecretHash: r.Wait.SecretHash, Response: d.Response}
		}
	}
	return nil
}

// toolCallOf decodes the data of a tool.call: with the fast decoder, or
// with encoding/json into the members the fold reads.
func (p *projection) toolCallOf(e eventlog.Entry) (toolCallFields, error) {
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

func (p *projection) foldToolCall(e eventlog.Entry) error {
	// Arguments, results and envelopes stay raw: most are never read
	// again.
	d, err := p.toolCallOf(e)
	if err != nil {
		return err
	}
	sent := sentRefs(e, d)
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
			p.Spawns = append(p.Spawns, spawnRec{ChildID: res.AgentID, RunID: string(d.RunID), Ref: inbox.Ref{Seq: e.Seq, Off: e.Off}})
		}
	}
	if len(d.RunID) > 0 {
		if r := p.runForID(d.RunID); r != nil && !r.Ended {
			r.Calls = append(r.Calls, recordedCall{Tool: toolName(r.Calls, d.Tool), Result: p.keepRaw(d.Result), Error: d.Error, Messages: sent})
		}
	}
	return nil
}

// toolName is the tool's name, shared with an earlier call of the run
// when one has it.
func toolName(calls []recordedCall, tool []byte) string {
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Tool == string(tool) {
			return calls[i].Tool
		}
	}
	return string(tool)
}

func (p *projection) foldMsgEnqueued(e eventlog.Entry) error {
	if id, ok := messageIDOf(e.Data); ok && p.lazy != nil && len(e.Data) <= lazyRawMax && !bytes.Contains(e.Data, []byte(`"reminder_id"`)) {
		if !p.Enqueued.add(id) {
			return nil
		}
		p.lazy.add(id, lazyMsg{raw: p.lazy.keep(e.Data), ref: inbox.Ref{Seq: e.Seq, Off: e.Off}})
		return nil
	}
	m, err := messageFromData(e.Data)
	if err != nil {
		return fmt.Errorf("event %s at seq %d: %w", e.Event, e.Seq, err)
	}
	if !p.Enqueued.add(m.ID) {
		return nil
	}
	q := queued(m, e)
	if p.lazy != nil {
		p.lazy.add(m.ID, lazyMsg{msg: &q})
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

func (p *projection) foldMsgDelivered(e eventlog.Entry) error {
	if !p.slow {
		if id, ok := fastMessageID(e.Data); ok {
			p.takeOne(id)
			return nil
		}
	}
	var d messageDeliveredData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.takeOne([]byte(d.MessageID))
	return nil
}

func (p *projection) foldMetadataUpdated(e eventlog.Entry) error {
	var d metadataUpdatedData
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

func (p *projection) foldToolGate(e eventlog.Entry) error {
	var d gateData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Gated = d.Action == "gate"
	return nil
}

func (p *projection) foldToolSubscribe(e eventlog.Entry) error {
	var d subscribeData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Subs[d.SubscriptionID] = subscriptionRec{ID: d.SubscriptionID, Target: d.TargetID, From: d.From, To: d.To, Once: d.Once}
	return nil
}

func (p *projection) foldToolUnsubscribe(e eventlog.Entry) error {
	var d unsubscribeData
	if err := decode(e, &d); err != nil {
		return err
	}
	delete(p.Subs, d.SubscriptionID)
	return nil
}

func (p *projection) foldReminderSched(e eventlog.Entry) error {
	var d reminderData
	if err := decode(e, &d); err != nil {
		return err
	}
	p.Reminders[d.ReminderID] = &reminderRec{ID: d.ReminderID, Reason: d.Reason,
		Due: parseTime(d.Due), Every: time.Duration(d.EveryMS) * time.Millisecond}
	return nil
}

func (p *projection) foldReminderCancel(e eventlog.Entry) error {
	var d reminderData
	if err := decode(e, &d); err != nil {
		return err
	}
	delete(p.Reminders, d.ReminderID)
	return nil
}
