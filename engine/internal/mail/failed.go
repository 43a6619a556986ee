package mail

import (
	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/toolexec"
	"github.com/warren-dev/warren/tree"
)

// Failure is what a parent is told of its child's failed turn.
type Failure struct {
	ID, Parent, Name string // the child's; Parent "" for a root
	LastErr          string
	Total            int             // the child's pending messages
	Pending          []inbox.Message // the first of them, payloads possibly not resident
}

// ChildFailed sends SYSTEM's error message about a's failed turn to its
// parent (none for a root), listing the first of its pending messages; the
// child's inbox is kept. Its id derives from the child and the transition,
// so the notice is sent once per failed turn. A failure to send is logged.
func ChildFailed[A Agent](env Env[A], a A) {
	f := a.Failed(notice.MaxListed)
	if f.Parent == "" {
		return
	}
	pending := f.Pending
	if full, err := env.FillPayloads(f.ID, pending); err == nil {
		pending = full
	}
	listed := make([]notice.Pending, len(pending))
	for i, m := range pending {
		listed[i] = notice.Pending{From: env.DisplayName(m.Sender), Text: m.Payload}
	}
	id := notice.ID("failed", f.ID, a.TransitionKey())
	m := toolexec.NewMessage(env, id, tree.System, f.Parent, inbox.KindError, notice.ChildFailed(f.Name, f.LastErr, f.Total, listed))
	m.Metadata["failed_agent"] = f.ID
	if err := Send(env, m); err != nil {
		env.Logger().Error("notifying parent of a failed turn", "agent", f.ID, "parent", f.Parent, "err", err)
	}
}
