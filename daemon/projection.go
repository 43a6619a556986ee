package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/warren-dev/warren/provider"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
)

// Token states as the projection tracks them.
const (
	tokLive     = "live"
	tokConsumed = "consumed"
	tokRevoked  = "revoked"
	tokExpired  = "expired"
)

// recordedCall is a tool call the log records for the open run.
type recordedCall struct {
	Tool     string
	Result   json.RawMessage `json:",omitempty"` // decoded only when a re-run answers from it
	Error    string
	Messages []sentRef
}

// sentRef is a message a tool call sent, kept without its envelope: the id
// and recipient, and where the tool.call entry that records the envelope
// is in the sender's log (Index-th of its messages), to read it back in
// the rare case the recipient lacks it.
type sentRef struct {
	ID    string
	To    string
	Ref   inbox.Ref
	Index int
}

// sentRefs describes the envelopes msgs of the tool.call entry e.
func sentRefs(e eventlog.Entry, msgs []json.RawMessage) []sentRef {
	out := make([]sentRef, 0, len(msgs))
	for i, raw := range msgs {
		r := sentRef{Ref: inbox.Ref{Seq: e.Seq, Off: e.Off}, Index: i}
		objectMembers(raw, func(k string, v []byte) {
			switch k {
			case "message_id":
				r.ID, _ = jsonString(v)
			case "recipient":
				r.To, _ = jsonString(v)
			}
		})
		out = append(out, r)
	}
	return out
}

// waitRec is the wait of the latest run.
type waitRec struct {
	TokenID    string
	Kind       string
	Prompt     string
	SecretHash string
	Deadline   time.Time
	Since      time.Time // when the wait began (run.waiting's time)
	Turn       int
	TokenState string
	Response   string // set when consumed
}

// runFacts describes the latest run as the log records it.
type runFacts struct {
	RunID       string
	BootID      string
	Turn        int
	Prompt      string
	MessageIDs  []string
	Provider    string
	Model       string
	StartedAt   time.Time
	Ended       bool
	Interrupted bool
	Reason      string
	Wait        *waitRec
	Calls       []recordedCall
	// ResumeResponse answers the run's await_input call on re-run.
	ResumeResponse *string
}

type subscriptionRec struct {
	ID       string
	Target   string
	From, To string
	Once     bool
}

type reminderRec struct {
	ID      string
	Reason  string
	Due     time.Time
	Every   time.Duration
	LastHit time.Time
}

// projection is the durable state of one agent, folded from its log.
type projection struct {
	Created      bool
	ID           string
	Name         string
	ParentID     string
	Instructions string
	Provider     string // preferred provider (last used)
	Model        string
	Metadata     map[string]string
	Terminated   bool
	Handle       string
	SessProvider string // provider of the recorded provider session
	SessModel    string
	// Suspended says the last session event is suspend.result: only then
	// may a provider blob in session.json be restored (after a restore the
	// blob is stale, even if its clearing had not reached the disk).
	Suspended bool
	TurnNo    int
	Run       *runFacts
	Gated     bool
	Subs      map[string]subscriptionRec
	Reminders map[string]*reminderRec
	Pending   *inbox.Queue `json:"-"`
	// Enqueued holds the id of every message the log enqueued (compact).
	Enqueued  idSet `json:"-"`
	LastError string
	// Usage is the token usage of the agent's completed turns.
	Usage   provider.Usage
	LastSeq uint64
	// LastOff is the byte offset of the line of LastSeq (-1: unknown).
	LastOff int64
	// Sent holds the messages of the most recent tool calls that sent
	// some, so recovery can deliver one that reached this (the sender's)
	// log but not the recipient's.
	Sent      []sentRef
	CreatedTS time.Time
	// Spawns are the spawn_agent calls made in runs, so recovery can finish
	// a deferred creation a crash cut off.
	Spawns []spawnRec
	// lazy is set while recovery replays the log (see lazyInbox).
	lazy *lazyInbox
	// LastResume is the latest wait answered with a token, so that a
	// repeated resume is answered the same way after a restart.
	LastResume *resumeRec
}

// resumeRec is a consumed resume token and how its run ended.
type resumeRec struct {
	TokenID    string
	RunID      string
	SecretHash string
	Response   string // the human's response that consumed the token
	Result     string // the run's turn.complete response
	Completed  bool
}

// spawnRec is a spawn_agent call a run recorded. Its arguments (the
// child's instructions and metadata, up to the message limit each) stay in
// the log: Ref is the tool.call line to read them back from.
type spawnRec struct {
	ChildID string
	RunID   string
	Ref     inbox.Ref
}

// maxSentKept bounds Sent.
const maxSentKept = 32

func newProjection() *projection {
	return &projection{
		Metadata:  map[string]string{},
		Subs:      map[string]subscriptionRec{},
		Reminders: map[string]*reminderRec{},
		Pending:   inbox.NewQueue(0),
	}
}

func decode(e eventlog.Entry, v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("event %s at seq %d: bad data: %w", e.Event, e.Seq, err)
	}
	return nil
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// apply folds one entry into the projection. Unknown events are ignored
// (forward compatibility); a known event with malformed data is an error.
func (p *projection) apply(e eventlog.Entry) error {
	p.LastSeq, p.LastOff = e.Seq, entryOff(e)
	switch e.Event {
	case evAgentCreated:
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
		p.ID, p.Name, p.Instructions = d.AgentID, d.Name, d.Instructions
		if d.ParentID != nil {
			p.ParentID = *d.ParentID
		}
		p.Provider, p.Model = d.Provider, d.Model
		for k, v := range d.Metadata {
			p.Metadata[k] = v
		}
	case evAgentTerminated:
		p.Terminated = true
	case evSessionCreated:
		var d sessionCreatedData
		if err := decode(e, &d); err != nil {
			return err
		}
		p.Handle, p.SessProvider, p.SessModel = d.Handle, d.Provider, d.Model
		p.Suspended = false
	case evContextReset:
		// The next session starts fresh: no native handle, no blob.
		p.Handle, p.Suspended = "", false
	case evSessionRestored:
		var d sessionRestoredData
		if err := decode(e, &d); err != nil {
			return err
		}
		p.SessProvider, p.SessModel = d.Provider, d.Model
		p.Suspended = false
	case evSuspendResult:
		p.Suspended = true
	case evTurnStart:
		var d turnStartData
		if !fastTurnStart(e.Data, &d) {
			d = turnStartData{}
			if err := decode(e, &d); err != nil {
				return err
			}
		}
		if d.Turn > p.TurnNo {
			p.TurnNo = d.Turn
		}
		// The preference (the last provider and model used) changes only
		// when a run on them completes (turn.complete): a failed run
		// leaves it alone.
		rerun := p.Run != nil && p.Run.RunID == d.RunID && p.Run.Turn == d.Turn && !p.Run.Ended
		if !rerun {
			p.Run = &runFacts{RunID: d.RunID, Turn: d.Turn}
		}
		r := p.Run
		r.BootID, r.Prompt, r.MessageIDs = d.BootID, d.Prompt, d.MessageIDs
		r.Provider, r.Model, r.StartedAt = d.Provider, d.Model, e.TS
		r.Interrupted, r.Reason = false, ""
		if r.Wait != nil && r.Wait.TokenState != tokLive {
			r.Wait = nil
		}
	case evTurnComplete:
		var d turnCompleteData
		if !fastRunField(e.Data, &d.RunID, nil) {
			if err := decode(e, &d); err != nil {
				return err
			}
		}
		if r := p.runFor(d.RunID); r != nil {
			r.Ended, r.Wait = true, nil
			r.Calls = nil // answers for a re-run; an ended run is never re-run
			p.take(r.MessageIDs)
			if r.Provider != "" {
				p.Provider, p.Model = r.Provider, r.Model
			}
		}
		if bytes.Contains(e.Data, []byte(`"usage"`)) {
			var u struct {
				Usage *provider.Usage `json:"usage"`
			}
			if json.Unmarshal(e.Data, &u) == nil && u.Usage != nil {
				p.Usage = p.Usage.Add(*u.Usage)
			}
		}
		if lr := p.LastResume; lr != nil && lr.RunID == d.RunID {
			if d.Response == "" {
				// The fast decoder reads only run_id: fetch the response.
				var full turnCompleteData
				if err := decode(e, &full); err == nil {
					d.Response = full.Response
				}
			}
			lr.Result, lr.Completed = d.Response, true
		}
		p.LastError = ""
	case evTurnFailed:
		var d turnFailedData
		if !fastRunField(e.Data, &d.RunID, &d.Error) {
			if err := decode(e, &d); err != nil {
				return err
			}
		}
		if r := p.runFor(d.RunID); r != nil {
			r.Ended, r.Calls = true, nil
		}
		p.LastError = d.Error
	case evTurnCancelled:
		var d turnCancelledData
		if !fastRunField(e.Data, &d.RunID, nil) {
			if err := decode(e, &d); err != nil {
				return err
			}
		}
		if r := p.runFor(d.RunID); r != nil {
			r.Ended, r.Calls = true, nil
		}
	case evRunInterrupted:
		var d runInterruptedData
		if err := decode(e, &d); err != nil {
			return err
		}
		if r := p.runFor(d.RunID); r != nil {
			r.Interrupted, r.Reason = true, d.Reason
		}
	case evRunWaiting:
		var d runWaitingData
		if err := decode(e, &d); err != nil {
			return err
		}
		if r := p.runFor(d.RunID); r != nil {
			r.Wait = &waitRec{TokenID: d.TokenID, Kind: d.WaitKind, Prompt: d.Prompt,
				SecretHash: d.SecretHash, Deadline: parseTime(d.Deadline), Since: e.TS, Turn: d.Turn, TokenState: tokLive}
			r.ResumeResponse = nil
		}
	case evTokenConsumed, evTokenRevoked, evTokenExpired:
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
	case evRunResumed:
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
	case evToolCall:
		// Arguments, results and envelopes stay raw: most are never read
		// again.
		var d toolCallFields
		if !fastToolCall(e.Data, &d) {
			var full struct {
				Tool     string            `json:"tool"`
				Args     json.RawMessage   `json:"args"`
				Result   json.RawMessage   `json:"result"`
				Error    string            `json:"error"`
				RunID    string            `json:"run_id"`
				Messages []json.RawMessage `json:"messages"`
			}
			if err := decode(e, &full); err != nil {
				return err
			}
			d = toolCallFields(full)
		}
		sent := sentRefs(e, d.Messages)
		p.Sent = append(p.Sent, sent...)
		if n := len(p.Sent) - maxSentKept; n > 0 {
			p.Sent = append(p.Sent[:0:0], p.Sent[n:]...)
		}
		if d.Tool == "spawn_agent" && d.Error == "" && d.RunID != "" {
			var res struct {
				AgentID string `json:"agent_id"`
			}
			if json.Unmarshal(d.Result, &res) == nil && res.AgentID != "" {
				p.Spawns = append(p.Spawns, spawnRec{ChildID: res.AgentID, RunID: d.RunID, Ref: inbox.Ref{Seq: e.Seq, Off: e.Off}})
			}
		}
		if d.RunID != "" {
			if r := p.runFor(d.RunID); r != nil && !r.Ended {
				r.Calls = append(r.Calls, recordedCall{Tool: d.Tool, Result: cloneRaw(d.Result), Error: d.Error, Messages: sent})
			}
		}
	case evMsgEnqueued:
		if id, ok := messageIDOf(e.Data); ok && p.lazy != nil && len(e.Data) <= lazyRawMax && !bytes.Contains(e.Data, []byte(`"reminder_id"`)) {
			if !p.Enqueued.add(id) {
				return nil
			}
			p.lazy.add(id, lazyMsg{raw: cloneRaw(e.Data), ref: inbox.Ref{Seq: e.Seq, Off: e.Off}})
			return nil
		}
		m, err := inbox.FromEventData(e.Data)
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
	case evMsgDelivered:
		var d messageDeliveredData
		if !fastMessageID(e.Data, &d.MessageID) {
			if err := decode(e, &d); err != nil {
				return err
			}
		}
		p.take([]string{d.MessageID})
	case evMetadataUpdated:
		var d metadataUpdatedData
		if err := decode(e, &d); err != nil {
			return err
		}
		if d.Value == nil {
			delete(p.Metadata, d.Key)
		} else {
			p.Metadata[d.Key] = *d.Value
		}
	case evToolGate:
		var d gateData
		if err := decode(e, &d); err != nil {
			return err
		}
		p.Gated = d.Action == "gate"
	case evToolSubscribe:
		var d subscribeData
		if err := decode(e, &d); err != nil {
			return err
		}
		p.Subs[d.SubscriptionID] = subscriptionRec{ID: d.SubscriptionID, Target: d.TargetID, From: d.From, To: d.To, Once: d.Once}
	case evToolUnsubscribe:
		var d unsubscribeData
		if err := decode(e, &d); err != nil {
			return err
		}
		delete(p.Subs, d.SubscriptionID)
	case evReminderSched:
		var d reminderData
		if err := decode(e, &d); err != nil {
			return err
		}
		p.Reminders[d.ReminderID] = &reminderRec{ID: d.ReminderID, Reason: d.Reason,
			Due: parseTime(d.Due), Every: time.Duration(d.EveryMS) * time.Millisecond}
	case evReminderCancel:
		var d reminderData
		if err := decode(e, &d); err != nil {
			return err
		}
		delete(p.Reminders, d.ReminderID)
	}
	return nil
}

// runFor returns the latest run if it has the given id.
func (p *projection) runFor(runID string) *runFacts {
	if p.Run != nil && p.Run.RunID == runID {
		return p.Run
	}
	return nil
}

// openRun returns the latest run if it has not ended.
func (p *projection) openRun() *runFacts {
	if p.Run != nil && !p.Run.Ended {
		return p.Run
	}
	return nil
}
