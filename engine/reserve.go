package engine

import (
	"github.com/warren-dev/warren/engine/internal/reserve"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tree"
)

// The room of messages checked and not yet appended is held in c.resv
// (package reserve says why): mail.Check reserves it, mail.Append
// and toolexec.Unreserver give it back.

// landed reports whether the message id is already in recipient's inbox
// (its append applied, its reservation not yet released). It runs under
// c.resv's lock.
func (c *Core) landed(recipient, id string) bool {
	if recipient == tree.User {
		return c.user.Has(id)
	}
	a, ok := c.agent(recipient)
	if !ok {
		return true // gone: its reservation no longer holds room anywhere
	}
	has, _, _ := a.Inbox(id)
	return has
}

// reserveRoom checks that m fits in its recipient's inbox and in the
// daemon's totals (checkRoom), counting the messages reserved and not yet
// landed, and reserves its room until unreserve(m.ID).
func (c *Core) reserveRoom(m inbox.Message, view reserve.View) error {
	return c.resv.Reserve(m, view, c.landed, func(n int, b int64, tn, tb int64) error {
		return c.checkRoom(m.Recipient, n, b, len(m.Payload), tn, tb)
	})
}

// unreserve ends the reservation of message id (a no-op when it has none).
func (c *Core) unreserve(id string) { c.resv.Release(id) }

// Unreserve gives back the room of checked messages that will not be
// enqueued (toolexec.Unreserver).
func (e *toolEnv) Unreserve(msgs []inbox.Message) {
	for _, m := range msgs {
		e.core().unreserve(m.ID)
	}
}
