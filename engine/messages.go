package engine

import (
	"fmt"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/toolexec"
	"github.com/warren-dev/warren/tree"
)

// enqueue makes a message durable in the recipient's log (or user.jsonl)
// and wakes the recipient. A message whose id the recipient already has is
// not enqueued again.
func (c *Core) enqueue(m inbox.Message) error {
	skip, err := c.checkEnqueue(m)
	if err != nil || skip {
		return err
	}
	return c.appendEnqueue(m)
}

// checkEnqueue decides whether m can be enqueued: skip when the recipient
// already has it; an error naming the reason when it cannot take it.
func (c *Core) checkEnqueue(m inbox.Message) (skip bool, err error) {
	return c.checkEnqueueN(m, 0, 0)
}

// checkEnqueueN decides as checkEnqueue and reserves the room of a message
// it lets through until it is appended (reserve.go). n and b, the messages
// of one model step to the same recipient checked before this one, are
// already counted by their reservations.
func (c *Core) checkEnqueueN(m inbox.Message, n int, b int64) (skip bool, err error) {
	if m.Recipient == tree.User {
		return c.checkUserRoom(m)
	}
	r, ok := c.agent(m.Recipient)
	if !ok {
		return false, fmt.Errorf("recipient %s: %w", m.Recipient, errNotFoundAgent)
	}
	r.mu.Lock()
	dup := r.p.Enqueued.Has(m.ID)
	terminated := r.p.Terminated
	corrupt := r.corrupt != nil
	r.mu.Unlock()
	switch {
	case dup:
		return true, nil
	case terminated:
		return false, fmt.Errorf("recipient %s is terminated: %w", m.Recipient, errNotFoundAgent)
	case corrupt:
		return false, fmt.Errorf("recipient %s has a damaged log (warren repair): %w", m.Recipient, errNotFoundAgent)
	}
	return false, c.reserveRoom(m, func(reserved func(has func(id string) bool) (int, int64)) (int, int64, int, int64) {
		r.mu.Lock()
		defer r.mu.Unlock()
		rn, rb := reserved(r.p.Enqueued.Has)
		return r.p.Pending.Len(), r.p.Pending.Bytes(), rn, rb
	})
}

// appendEnqueue logs message.enqueued in the recipient's log and wakes it.
func (c *Core) appendEnqueue(m inbox.Message) error {
	defer c.unreserve(m.ID) // in the inbox now, or failed
	if m.Recipient == tree.User {
		return c.user.Enqueue(m)
	}
	r, ok := c.agent(m.Recipient)
	if !ok {
		return fmt.Errorf("recipient %s: %w", m.Recipient, errNotFoundAgent)
	}
	if _, err := r.log.Append(schema.MessageEnqueued, m.EventData()); err != nil {
		return fmt.Errorf("logging message.enqueued for %s: %w", m.Recipient, err)
	}
	c.poke(r) // a new message also retries an agent whose last turn failed
	return nil
}

// Sentinels the tools turn into tool-level errors.
var (
	errInboxFull     = toolexec.ErrInboxFull
	errNotFoundAgent = toolexec.ErrNoAgent
)

func (c *Core) newMessage(id, sender, recipient string, kind inbox.Kind, payload string) inbox.Message {
	return toolexec.NewMessage(c.env(), id, sender, recipient, kind, payload)
}

// notifyParentOfFailure sends SYSTEM's error message about a failed child
// turn to the parent; the child's inbox is kept.
func (c *Core) notifyParentOfFailure(a *agent) {
	a.mu.Lock()
	parent, name, lastErr := a.p.ParentID, a.p.Name, a.p.LastError
	total := a.p.Pending.Len()
	pending := a.p.Pending.PeekFirst(notice.MaxListed, 0)
	a.mu.Unlock()
	if parent == "" {
		return
	}
	if full, err := c.fillPayloads(a.id, pending); err == nil {
		pending = full
	}
	listed := make([]notice.Pending, len(pending))
	for i, m := range pending {
		listed[i] = notice.Pending{From: c.displayName(m.Sender), Text: m.Payload}
	}
	m := c.newMessage(notice.ID("failed", a.id, a.transitionKey()), tree.System, parent, inbox.KindError,
		notice.ChildFailed(name, lastErr, total, listed))
	m.Metadata["failed_agent"] = a.id
	if err := c.enqueue(m); err != nil {
		c.log.Error("notifying parent of a failed turn", "agent", a.id, "parent", parent, "err", err)
	}
}
