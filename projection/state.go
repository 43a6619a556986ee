package projection

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/warren-dev/warren/internal/jsonfast"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
)

// Token states as the projection tracks them.
const (
	tokLive     = string(schema.TokLive)
	tokConsumed = string(schema.TokConsumed)
	tokRevoked  = string(schema.TokRevoked)
	tokExpired  = string(schema.TokExpired)
)

// Call is a tool call the log records for the open run.
type Call struct {
	Tool     string
	Result   json.RawMessage `json:",omitempty"` // decoded only when a re-run answers from it
	Error    string
	Messages []SentRef
}

// SentRef is a message a tool call sent, kept without its envelope: the id
// and recipient, and where the tool.call entry that records the envelope
// is in the sender's log (Index-th of its messages), to read it back in
// the rare case the recipient lacks it.
type SentRef struct {
	ID    string
	To    string
	Ref   inbox.Ref
	Index int
}

// SentEnvelopes returns the envelopes (raw, copied) of the messages that
// the tool.call data records, in order: SentRef.Index indexes them.
func SentEnvelopes(data []byte) []json.RawMessage {
	var msgs []json.RawMessage
	m := jsonfast.Object(data)
	for {
		k, v, ok := m.Next()
		if !ok {
			return msgs
		}
		if string(k) != "messages" {
			continue
		}
		arr := jsonfast.Array(v)
		for {
			el, ok := arr.Next()
			if !ok {
				break
			}
			msgs = append(msgs, cloneRaw(el))
		}
	}
}

// sentRefs describes the envelopes of the tool.call entry e (d.Messages,
// or d.MessageList when encoding/json decoded it); a replay (lz) shares
// the recipients' ids and puts the refs in the run's array (lazyInbox.refs).
func sentRefs(e eventlog.Entry, d toolCallFields, lz *lazyInbox) []SentRef {
	var out []SentRef
	if lz != nil {
		out = lz.refs // appended to
	}
	start := len(out)
	add := func(raw []byte) {
		r := SentRef{Ref: inbox.Ref{Seq: e.Seq, Off: e.Off}, Index: len(out) - start}
		m := jsonfast.Object(raw)
		for {
			k, v, ok := m.Next()
			if !ok {
				break
			}
			switch string(k) {
			case "message_id":
				r.ID, _ = jsonfast.String(v)
			case "recipient":
				if p, ok := jsonfast.Plain(v); ok && lz != nil {
					r.To = lz.recipient(p)
				} else {
					r.To, _ = jsonfast.String(v)
				}
			}
		}
		out = append(out, r)
	}
	for _, raw := range d.MessageList {
		add(raw)
	}
	if d.Messages != nil {
		arr := jsonfast.Array(d.Messages)
		for {
			raw, ok := arr.Next()
			if !ok {
				break
			}
			add(raw)
		}
	}
	if lz != nil {
		lz.refs = out
		if len(out) == start {
			return []SentRef{}
		}
		return out[start:len(out):len(out)]
	}
	if out == nil {
		out = []SentRef{}
	}
	return out
}

// Wait is the wait of the latest run.
type Wait struct {
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

// Run describes the latest run as the log records it.
type Run struct {
	RunID  string
	BootID string
	// ClaimEpoch is the State's ClaimEpoch when the run's latest
	// turn.start was folded: the claim the turn began under (0: none).
	ClaimEpoch  uint64 `json:",omitempty"`
	Turn        int
	Prompt      string
	MessageIDs  []string
	Provider    string
	Model       string
	StartedAt   time.Time
	Ended       bool
	Interrupted bool
	Reason      string
	Wait        *Wait
	Calls       []Call
	// ResumeResponse answers the run's await_input call on re-run.
	ResumeResponse *string
	// TimedOut: the run was re-run after its wait timed out; its pending
	// await_input call is answered with the timeout (SPEC 4).
	TimedOut bool `json:",omitempty"`
	// AutoResumes counts the run.resumed the resume policy logged for
	// the run (by "auto"): at 3 it is left for the operator.
	AutoResumes int `json:",omitempty"`
	// StartCommit is the workspace snapshot taken at the run's start (""
	// without a workspace): a re-run restores it first.
	StartCommit string `json:",omitempty"`
	// InterruptSeq is the seq of the run's latest run.interrupted (it
	// names the interruption: a start's notice about it is sent once).
	InterruptSeq uint64 `json:",omitempty"`
	// StartRef is the line of the turn.start that began the run (a re-run
	// keeps it); EndRef the line that ended it (zero while it is open).
	// They witness the run to a checkpoint's check (verify.go).
	StartRef, EndRef inbox.Ref
}

type Subscription struct {
	ID       string
	Target   string
	From, To string
	Once     bool
}

type Reminder struct {
	ID      string
	Reason  string
	Due     time.Time
	Every   time.Duration
	LastHit time.Time
}

// projection is the durable state of one agent, folded from its log.
type State struct {
	Created      bool
	ID           string
	Name         string
	ParentID     string
	Instructions string
	Cwd          string // working directory ("" = the daemon's)
	// Bootstrap: agent.created says it owes a bootstrap turn (spawned).
	Bootstrap bool   `json:",omitempty"`
	Provider  string // preferred provider (last used)
	Model     string
	// PrefRef is the line that set Provider and Model: agent.created, or
	// the turn.start of the latest run that completed on them.
	PrefRef      inbox.Ref
	Metadata     map[string]string
	Terminated   bool
	Handle       string
	SessProvider string // provider of the recorded provider session
	SessModel    string
	// Suspended says the last session event is suspend.result: only then
	// may a provider blob in session.json be restored (after a restore the
	// blob is stale, even if its clearing had not reached the disk).
	Suspended bool
	// SessRef is the line of the latest session event (session.created,
	// session.restored, context.reset, suspend.result; zero: none).
	SessRef inbox.Ref
	TurnNo  int
	Run     *Run
	// ClaimEpoch is the greatest epoch of the log's agent.claimed entries
	// (0: none, as on the local store): the claim the log is written under.
	ClaimEpoch uint64 `json:",omitempty"`
	Gated      bool
	// GateRef is the line of the latest tool.gate (zero: none).
	GateRef   inbox.Ref
	Subs      map[string]Subscription
	Reminders map[string]*Reminder
	Pending   *inbox.Queue `json:"-"`
	// Enqueued holds the id of every message the log enqueued (compact).
	Enqueued IDSet `json:"-"`
	// Taken counts the enqueued messages delivered since: every enqueued
	// message is pending or taken (len(Enqueued) = pending + Taken).
	Taken     int
	LastError string
	// Usage is the token usage of the agent's completed turns.
	Usage provider.Usage
	// Spent is what the agent's own model requests and turns cost
	// (usage.step entries and completed turns; SPEC 13).
	Spent Spent
	// Budget is the agent's budget, from its latest budget.set (nil: none).
	Budget  *schema.BudgetSetData `json:",omitempty"`
	LastSeq uint64
	// LastOff is the byte offset of the line of LastSeq (-1: unknown).
	LastOff int64
	// Sent holds the messages of the most recent tool calls that sent
	// some, so recovery can deliver one that reached this (the sender's)
	// log but not the recipient's.
	Sent      []SentRef
	CreatedTS time.Time
	// Spawns are the spawn_agent calls made in runs, so recovery can finish
	// a deferred creation a crash cut off.
	Spawns []Spawn
	// lazy is set while recovery replays the log (see lazyInbox).
	lazy *lazyInbox
	// slow makes the fold decode every event with encoding/json (tests
	// compare it with the fast decoders).
	slow bool
	// LastResume is the latest wait answered with a token, so that a
	// repeated resume is answered the same way after a restart.
	LastResume *Resume
	// Workspace is the agent's workspace (nil: none).
	Workspace *Workspace `json:",omitempty"`
	// Sandbox is the agent's sandbox, from agent.created (nil: none).
	Sandbox *schema.SandboxData `json:",omitempty"`
	// Notices are the notices the latest transition that subscriptions
	// matched owes (notices.owed), so recovery can deliver those a crash
	// kept from their subscribers.
	Notices *Notices `json:",omitempty"`
}

// Workspace is an agent's workspace as its log records it.
type Workspace struct {
	Repo, Path, Branch, Base string
	// LastEnd is the snapshot of the latest turn's end ("" before any):
	// what a child spawned now branches from. Last is the latest snapshot,
	// start or end: the next one's parent in the chain.
	LastEnd string `json:",omitempty"`
	Last    string `json:",omitempty"`
	// Closed: workspace.closed (the directory is gone, the branch kept);
	// Head is the branch head it recorded.
	Closed bool   `json:",omitempty"`
	Head   string `json:",omitempty"`
}

// Notices is a notices.owed entry (the transition from -> to that key
// names, and the subscriptions it owes a notice), logged at Seq.
type Notices struct {
	Seq uint64
	schema.NoticesOwedData
}

// Resume is a consumed resume token and how its run ended.
type Resume struct {
	TokenID    string
	RunID      string
	SecretHash string
	Response   string // the human's response that consumed the token
	Result     string // the run's turn.complete response
	Completed  bool
}

// Spawn is a spawn_agent call a run recorded. Its arguments (the
// child's instructions and metadata, up to the message limit each) stay in
// the log: Ref is the tool.call line to read them back from.
type Spawn struct {
	ChildID string
	RunID   string
	Ref     inbox.Ref
}

// maxSentKept bounds Sent.
const maxSentKept = 32

func New() *State {
	return &State{
		Metadata:  map[string]string{},
		Subs:      map[string]Subscription{},
		Reminders: map[string]*Reminder{},
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
// Each event has its own fold method (projectionFolds).
func (p *State) Apply(e eventlog.Entry) error {
	p.LastSeq, p.LastOff = e.Seq, entryOff(e)
	if fold := projectionFolds[e.Event]; fold != nil {
		return fold(p, e)
	}
	return nil
}

// runFor returns the latest run if it has the given id.
func (p *State) RunFor(runID string) *Run {
	if p.Run != nil && p.Run.RunID == runID {
		return p.Run
	}
	return nil
}

// openRun returns the latest run if it has not ended.
func (p *State) OpenRun() *Run {
	if p.Run != nil && !p.Run.Ended {
		return p.Run
	}
	return nil
}

// Replaying reports whether the state is in replay mode (between
// BeginReplay and EndReplay, or decoded from a checkpoint and not yet
// ended): its inbox is then not in Pending, and it cannot be encoded.
func (p *State) Replaying() bool { return p.lazy != nil }

// DecodeWithJSON makes the fold decode every event with encoding/json
// instead of the fast decoders; tests use it to hold the fast decoders to
// encoding/json on whole logs.
func (p *State) DecodeWithJSON() { p.slow = true }

// Spent is an agent's spend (SPEC 13): the tokens (input plus output) and
// dollars of its usage.step entries, how many of them had no price, and
// its completed turns.
type Spent struct {
	Tokens   int64   `json:"tokens"`
	USD      float64 `json:"usd"`
	Unpriced int     `json:"unpriced,omitempty"`
	Steps    int     `json:"steps"`
	Turns    int     `json:"turns"`
}

// AddStep counts one model request (a usage.step).
func (s *Spent) AddStep(d schema.UsageStepData) {
	s.Tokens += int64(d.InputTokens) + int64(d.OutputTokens)
	s.Steps++
	if d.USD != nil {
		s.USD += *d.USD
	} else {
		s.Unpriced++
	}
}

// Add returns the sum of two spends.
func (s Spent) Add(o Spent) Spent {
	return Spent{Tokens: s.Tokens + o.Tokens, USD: s.USD + o.USD, Unpriced: s.Unpriced + o.Unpriced, Steps: s.Steps + o.Steps, Turns: s.Turns + o.Turns}
}
