package engine

import (
	"github.com/warren-dev/warren/engine/internal/mail"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/toolexec"
)

// The Core's side of mail (package mail decides; mailenv.go is the Core as
// its environment).

// enqueue makes a message durable in the recipient's log (or user.jsonl)
// and wakes the recipient. A message whose id the recipient already has is
// not enqueued again.
func (c *Core) enqueue(m inbox.Message) error { return mail.Send[*agent](c.mail(), m) }

// Sentinels the tools turn into tool-level errors.
var (
	errInboxFull     = toolexec.ErrInboxFull
	errNotFoundAgent = toolexec.ErrNoAgent
)

func (c *Core) newMessage(id, sender, recipient string, kind inbox.Kind, payload string) inbox.Message {
	return toolexec.NewMessage(c.env(), id, sender, recipient, kind, payload)
}
