package engine

import (
	"sync"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tree"
)

// Room reserved in the inboxes (issue 16, "memory bounded by design"): a
// message is checked against the limits (checkEnqueueN) some time before
// its message.enqueued is appended (appendEnqueue): a tool call checks it,
// logs the call in the sender's log and the message in the recipient's at
// the same time. Without a reservation, concurrent sends that all passed
// the check before any append landed took an inbox, or the daemon's total,
// past its limit. The check now counts the messages checked and not yet in
// their recipient's inbox and reserves the room of the message it passes,
// under one lock, so the limits hold exactly under concurrency. The
// reservation ends when the append returns (the message is then in the
// inbox, or failed) or when the caller drops the message
// (toolexec.Unreserver).

// reservations are the messages checked and not yet appended.
type reservations struct {
	mu sync.Mutex
	m  map[string]reserved // by message id
}

type reserved struct {
	recipient string
	size      int64
}

// landed reports whether the message id is already in recipient's inbox
// (its append applied, its reservation not yet released). The caller holds
// c.resv.mu.
func (c *Core) landed(recipient, id string) bool {
	if recipient == tree.User {
		return c.user.Has(id)
	}
	a, ok := c.agent(recipient)
	if !ok {
		return true // gone: its reservation no longer holds room anywhere
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.p.Enqueued.Has(id)
}

// reserveRoom checks that m fits in its recipient's inbox and in the
// daemon's totals, counting the other messages reserved and not yet landed;
// when it fits, it reserves m's room until unreserve(m.ID). inboxView
// returns, in one consistent view (under the inbox's lock), the inbox's
// count and payload bytes and those of the reservations for it other than
// m's that have not landed in it (reservedFor).
func (c *Core) reserveRoom(m inbox.Message, inboxView func() (n int, b int64, rn int, rb int64)) error {
	c.resv.mu.Lock()
	defer c.resv.mu.Unlock()
	if _, ok := c.resv.m[m.ID]; ok {
		return nil // checked again (a step's second look): it holds its room
	}
	n, b, rn, rb := inboxView()
	// The totals: every other reservation not landed counts. Landed is read
	// before the totals (checkRoom), so a message landing in between counts
	// twice (a refusal at the very edge), never not at all.
	tn, tb := int64(rn), rb
	for id, r := range c.resv.m {
		if r.recipient != m.Recipient && !c.landed(r.recipient, id) {
			tn++
			tb += r.size
		}
	}
	if err := c.checkRoom(m.Recipient, n+rn, b+rb, len(m.Payload), tn, tb); err != nil {
		return err
	}
	if c.resv.m == nil {
		c.resv.m = map[string]reserved{}
	}
	c.resv.m[m.ID] = reserved{recipient: m.Recipient, size: int64(len(m.Payload))}
	return nil
}

// reservedFor counts the reservations for recipient other than except's
// that have not landed; the caller holds c.resv.mu and the inbox's lock,
// under which landed reads the inbox.
func (c *Core) reservedFor(recipient, except string, landed func(id string) bool) (n int, b int64) {
	for id, r := range c.resv.m {
		if r.recipient == recipient && id != except && !landed(id) {
			n++
			b += r.size
		}
	}
	return n, b
}

// unreserve ends the reservation of message id (a no-op when it has none).
func (c *Core) unreserve(id string) {
	c.resv.mu.Lock()
	delete(c.resv.m, id)
	c.resv.mu.Unlock()
}

// Unreserve gives back the room of checked messages that will not be
// enqueued (toolexec.Unreserver).
func (e *toolEnv) Unreserve(msgs []inbox.Message) {
	for _, m := range msgs {
		e.core().unreserve(m.ID)
	}
}
