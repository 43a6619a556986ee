package notify

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/internal/textcut"
	"github.com/warren-dev/warren/schema"
)

// Notification is what a sink gets (doc.go).
type Notification struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	AgentID  string `json:"agent_id,omitempty"`
	Path     string `json:"path,omitempty"`
	TS       string `json:"ts"`
	Text     string `json:"text"`
	WaitKind string `json:"wait_kind,omitempty"`
	TokenID  string `json:"token_id,omitempty"`
	Command  string `json:"command,omitempty"`
}

// The kinds not made from a log entry.
const (
	KindMessage = "message"
	KindDropped = "notify.dropped"
	KindTest    = "test"
)

// userLog is the id of the USER inbox's log.
const userLog = "USER"

// Names is what a notification needs of the tree.
type Names interface {
	// Path is an agent's path ("" when unknown).
	Path(id string) string
	// IsRoot reports whether an agent is a root (it reports to USER).
	IsRoot(id string) bool
}

// maxText bounds a notification's text.
const maxText = 300

// classify makes the notification of entry e of log logID, if it is one
// that is notified; home ends its commands ("" or " --home H").
func classify(logID string, e eventlog.Entry, names Names, home string) (Notification, bool) {
	n := Notification{ID: fmt.Sprintf("%s:%d", logID, e.Seq), Kind: e.Event, AgentID: logID,
		Path: names.Path(logID), TS: e.TS.UTC().Format("2006-01-02T15:04:05.000Z")}
	if logID == userLog {
		if e.Event != inbox.EventEnqueued {
			return n, false
		}
		m, err := inbox.FromEventData(e.Data)
		if err != nil || m.Sender == userLog || m.Sender == "SYSTEM" || !names.IsRoot(m.Sender) {
			return n, false
		}
		n.Kind, n.AgentID, n.Path, n.Text = KindMessage, m.Sender, names.Path(m.Sender), textcut.Line(m.Payload, maxText)
		return n, true
	}
	ref := n.Path
	if ref == "" {
		ref = logID
	}
	switch e.Event {
	case schema.RunWaiting:
		var d schema.RunWaitingData
		if json.Unmarshal(e.Data, &d) != nil {
			return n, false
		}
		n.Text, n.WaitKind, n.TokenID = textcut.Line(d.Prompt, maxText), d.WaitKind, d.TokenID
		n.Command = fmt.Sprintf("warren agent resume %s --token-id %s RESPONSE%s", ref, d.TokenID, home)
	case schema.TurnFailed:
		var d schema.TurnFailedData
		if json.Unmarshal(e.Data, &d) != nil {
			return n, false
		}
		n.Text = textcut.Line(d.Error, maxText)
		n.Command = fmt.Sprintf("warren logs %s%s", ref, home)
	case schema.RunInterrupted:
		var d schema.RunInterruptedData
		if json.Unmarshal(e.Data, &d) != nil {
			return n, false
		}
		n.Text = "its run was interrupted (" + d.Reason + ")"
		n.Command = fmt.Sprintf("warren agent resume %s%s", ref, home)
	default:
		return n, false
	}
	return n, true
}

// HomeArg is the " --home H" a command needs for home H, shell-quoted
// when it must be.
func HomeArg(home string) string {
	if home != "" && strings.Trim(home, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-=:") == "" {
		return " --home " + home
	}
	return " --home '" + strings.ReplaceAll(home, "'", `'\''`) + "'"
}
