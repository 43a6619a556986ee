package engine

import (
	"bytes"
	"encoding/json"
	fold "github.com/warren-dev/warren/projection"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
)

// goneInfo is what agent.list (all) shows of a terminated agent beyond its
// path: read once from its log, which no longer changes.
type goneInfo struct {
	Provider, Model                     string
	CreatedAt, LastTurnAt, TerminatedAt time.Time
	Usage                               provider.Usage
	// Spent is what it spent (SPEC 13): it stays in its ancestors'
	// subtree spend after its termination.
	Spent fold.Spent
}

// goneAgent is one terminated agent. Info is nil until it is known.
type goneAgent struct {
	ID, Name, ParentID string
	Info               *goneInfo
}

// Fold takes what the list shows from one entry.
func (in *goneInfo) Fold(e eventlog.Entry) {
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
	case schema.UsageStep:
		var d schema.UsageStepData
		if json.Unmarshal(e.Data, &d) == nil {
			in.Spent.AddStep(d)
		}
	case schema.TurnComplete:
		in.Spent.Turns++
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
