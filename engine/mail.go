package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tree"
)

// How a message reaches an inbox (SPEC 5, 6): the checks before it is
// enqueued, the append and the wake, the redelivery of a message its
// sender's log records as sent, SYSTEM's notice to a parent whose child
// failed its turn, and the delivery of messages a turn took
// (message.delivered).
//
// The checks, in order: a message to USER is skipped when the USER inbox
// has it and otherwise needs room there; a message to an agent needs a
// live recipient, is skipped when the recipient has had it enqueued
// already (a message id is enqueued once per recipient: a call run again
// after a crash sends the same ids), is refused when the recipient is
// terminated or its log is damaged, and otherwise needs room in its inbox
// and in the daemon's totals (config.Limits). The room is reserved when
// the check passes (reserve.go) and released when the append returns, in
// the inbox or failed. The append logs message.enqueued in the
// recipient's log (the USER inbox has its own file) and pokes the
// recipient: a new message also retries an agent whose last turn failed.
// A message redelivered (its sender's log records it as sent) passes the
// same checks except the room: the limits refuse new sends, not those
// already made.

// newMessage is a message stamped now, with empty metadata.
func (c *Core) newMessage(id, sender, recipient string, kind inbox.Kind, payload string) inbox.Message {
	return inbox.Message{ID: id, Sender: sender, Recipient: recipient, Kind: kind, Payload: payload,
		Timestamp: c.now().UTC(), Metadata: map[string]string{}}
}

// enqueue checks m and appends it: a message whose id the recipient
// already has is not enqueued again.
func (c *Core) enqueue(m inbox.Message) error {
	skip, err := c.checkSend(m)
	if err != nil || skip {
		return err
	}
	return c.appendMessage(m, nil)
}

// enqueueWith is enqueue with records logged in the recipient's log in
// the same write as m's message.enqueued, so that both are durable or
// neither (a once-subscription's notice and its tool.unsubscribe). dup
// reports that the recipient had m already: nothing is written then.
func (c *Core) enqueueWith(m inbox.Message, with ...eventlog.Record) (dup bool, err error) {
	skip, err := c.checkSend(m)
	if err != nil || skip {
		return skip, err
	}
	return false, c.appendMessage(m, with)
}

// checkSend decides whether m can be enqueued: skip when the recipient
// already has it; an error naming the reason when it cannot take it
// (wrapping errNotFoundAgent or errInboxFull). A message let through
// holds its room until appendMessage.
func (c *Core) checkSend(m inbox.Message) (skip bool, err error) {
	if m.Recipient == tree.User {
		if err := c.user.Damage(); err != nil {
			return false, fmt.Errorf("the USER inbox cannot take messages: %v: %w", err, errNotFoundAgent)
		}
		if c.user.Has(m.ID) {
			return true, nil
		}
		return false, c.reserveUserRoom(m)
	}
	r, ok := c.agent(m.Recipient)
	if !ok {
		return false, fmt.Errorf("recipient %s: %w", m.Recipient, errNotFoundAgent)
	}
	dup, terminated, corrupt := r.Inbox(m.ID)
	switch {
	case dup:
		return true, nil
	case terminated:
		return false, fmt.Errorf("recipient %s is terminated: %w", m.Recipient, errNotFoundAgent)
	case corrupt:
		return false, fmt.Errorf("recipient %s has a damaged log (warren repair): %w", m.Recipient, errNotFoundAgent)
	}
	return false, c.reserveRoom(m, r.Room)
}

// appendMessage logs message.enqueued in the recipient's log, with the
// records with in the same write (an agent recipient only), or puts m in
// the USER inbox, and pokes the recipient; it does not check (checkSend
// did), and it releases m's room, in the inbox now or failed.
func (c *Core) appendMessage(m inbox.Message, with []eventlog.Record) error {
	defer c.unreserve(m.ID)
	if m.Recipient == tree.User {
		if len(with) > 0 {
			return fmt.Errorf("records with a message to %s: the USER inbox has no log for them", tree.User)
		}
		return c.user.Enqueue(m)
	}
	r, ok := c.agent(m.Recipient)
	if !ok {
		return fmt.Errorf("recipient %s: %w", m.Recipient, errNotFoundAgent)
	}
	var err error
	if len(with) == 0 {
		_, err = r.Append(schema.MessageEnqueued, m.EventData())
	} else {
		_, err = r.AppendBatch(append([]eventlog.Record{{Event: schema.MessageEnqueued, Data: m.EventData()}}, with...))
	}
	if err != nil {
		return fmt.Errorf("logging message.enqueued for %s: %w", m.Recipient, err)
	}
	c.poke(r)
	return nil
}

// markDelivered logs message.delivered for msgIDs in agent id's log, in
// one write; id must be a live agent (errNotFoundAgent).
func (c *Core) markDelivered(id string, msgIDs []string) error {
	a, ok := c.agent(id)
	if !ok {
		return errNotFoundAgent
	}
	recs := make([]eventlog.Record, len(msgIDs))
	for i, mid := range msgIDs {
		recs[i] = eventlog.Record{Event: schema.MessageDelivered, Data: schema.MessageDeliveredData{MessageID: mid}}
	}
	_, err := a.AppendBatch(recs)
	return err
}

// redeliverRefs delivers the messages sender's log records as sent (refs:
// each a reference to its tool.call line and its place in it) that their
// recipients lack: each envelope is read back from the sender's log and
// enqueued without the room check. agentsOnly leaves out messages to
// USER (recovery delivers those when the USER inbox is open).
func (c *Core) redeliverRefs(ctx context.Context, sender string, refs []sentRef, agentsOnly bool) {
	for _, s := range refs {
		if !c.lacks(s, agentsOnly) {
			continue
		}
		raw, err := c.sentEnvelope(ctx, sender, s)
		if err != nil {
			c.log.Error("cannot read back a message its sender recorded", "sender", sender, "message", s.ID, "err", err)
			continue
		}
		if agentsOnly {
			c.log.Warn("delivering a message its sender recorded but its recipient never got", "message", s.ID, "to", s.To)
		}
		m, err := inbox.FromEventData(raw)
		if err != nil {
			c.log.Warn("a recorded message is malformed", "err", err)
			continue
		}
		// The limits refuse new sends, not those already made.
		skip, err := c.checkSend(m)
		if errors.Is(err, errInboxFull) {
			err = nil
		}
		if err == nil && !skip {
			err = c.appendMessage(m, nil)
		}
		if err != nil {
			c.log.Warn("redelivering a recorded message", "message", m.ID, "err", err)
		}
	}
}

// sentEnvelope reads the envelope of the message s back from the
// tool.call line of sender's log that sent it.
func (c *Core) sentEnvelope(ctx context.Context, sender string, s sentRef) (json.RawMessage, error) {
	e, err := c.st.ReadSeq(ctx, sender, s.Ref.Seq, s.Ref.Off)
	if err != nil {
		return nil, err
	}
	msgs := fold.SentEnvelopes(e.Data)
	if s.Index >= len(msgs) {
		return nil, fmt.Errorf("the tool.call at seq %d of %s records %d messages, not %d", s.Ref.Seq, sender, len(msgs), s.Index+1)
	}
	return msgs[s.Index], nil
}

// lacks reports whether the recipient of s exists and has not got it (a
// damaged log has nothing redelivered to it); agentsOnly leaves out
// messages to USER, as does a USER inbox not open yet.
func (c *Core) lacks(s sentRef, agentsOnly bool) bool {
	if s.To == tree.User {
		return !agentsOnly && c.user != nil && !c.user.Has(s.ID)
	}
	a, ok := c.agent(s.To)
	if !ok {
		return false
	}
	has, _, corrupt := a.Inbox(s.ID)
	return !corrupt && !has
}

// childFailed tells a's parent, from SYSTEM, that a's turn failed: its
// last error and its first pending messages (a root has no one to tell).
func (c *Core) childFailed(a *agent) {
	f := a.Failed(notice.MaxListed)
	if f.Parent == "" {
		return
	}
	pending := f.Pending
	if full, err := c.fillPayloads(c.ctx, f.ID, pending); err == nil {
		pending = full
	}
	listed := make([]notice.Pending, len(pending))
	for i, m := range pending {
		listed[i] = notice.Pending{From: c.displayName(m.Sender), Text: m.Payload}
	}
	// The id names the failed turn: a notice repeated by recovery is
	// enqueued once.
	id := notice.ID("failed", f.ID, a.TransitionKey())
	m := c.newMessage(id, tree.System, f.Parent, inbox.KindError, notice.ChildFailed(f.Name, f.LastErr, f.Total, listed))
	m.Metadata["failed_agent"] = f.ID
	if err := c.enqueue(m); err != nil {
		c.log.Error("notifying parent of a failed turn", "agent", f.ID, "parent", f.Parent, "err", err)
	}
}

// failure is what a failed turn's notice to the parent says of the
// child (agent.Failed).
type failure struct {
	ID, Parent, Name string // the child's; Parent "" for a root
	LastErr          string
	Total            int             // the child's pending messages
	Pending          []inbox.Message // the first of them, payloads possibly not resident
}
