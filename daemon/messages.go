package daemon

import (
	"errors"
	"fmt"
	"strings"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

var errInboxFull = errors.New("inbox full")

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

// checkEnqueueN is checkEnqueue for a message that follows n messages of b
// payload bytes to the same recipient not yet in its inbox (the earlier
// sends of one model step).
func (c *Core) checkEnqueueN(m inbox.Message, n int, b int64) (skip bool, err error) {
	if m.Recipient == tree.User {
		return c.user.checkRoom(m, n, b)
	}
	r, ok := c.agent(m.Recipient)
	if !ok {
		return false, fmt.Errorf("recipient %s: %w", m.Recipient, errNotFoundAgent)
	}
	r.mu.Lock()
	dup := r.p.Enqueued.has(m.ID)
	terminated := r.p.Terminated
	count, bytes := r.p.Pending.Len(), r.p.Pending.Bytes()
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
	return false, c.checkRoom(m.Recipient, count+n, bytes+b, len(m.Payload))
}

// appendEnqueue logs message.enqueued in the recipient's log and wakes it.
func (c *Core) appendEnqueue(m inbox.Message) error {
	if m.Recipient == tree.User {
		return c.user.enqueue(m)
	}
	r, ok := c.agent(m.Recipient)
	if !ok {
		return fmt.Errorf("recipient %s: %w", m.Recipient, errNotFoundAgent)
	}
	if _, err := r.log.Append(evMsgEnqueued, m.EventData()); err != nil {
		return fmt.Errorf("logging message.enqueued for %s: %w", m.Recipient, err)
	}
	c.poke(r) // a new message also retries an agent whose last turn failed
	return nil
}

var errNotFoundAgent = errors.New("agent not found")

func (c *Core) newMessage(id, sender, recipient string, kind inbox.Kind, payload string) inbox.Message {
	return inbox.Message{ID: id, Sender: sender, Recipient: recipient, Kind: kind, Payload: payload,
		Timestamp: c.now().UTC(), Metadata: map[string]string{}}
}

// sendOutcome turns an enqueue error into a tool outcome.
func deliveryErr(err error) (toolOutcome, error) {
	if errors.Is(err, errInboxFull) || errors.Is(err, errNotFoundAgent) {
		return toolErr("%v", err), nil
	}
	return toolOutcome{}, err
}

func (c *Core) toolSendMessage(a *agent, v tools.SendMessage, cc callCtx) (toolOutcome, error) {
	to := tree.User
	if v.Recipient != tree.User {
		id, err := c.tree.Lookup(a.id, v.Recipient)
		if err != nil {
			return toolErr("%v", err), nil
		}
		to = id
	}
	if err := c.tree.CheckRoute(a.id, to); err != nil {
		return toolErr("%v", err), nil
	}
	m := c.newMessage(cc.derivedID("msg", to), a.id, to, inbox.KindRequest, v.Text)
	out := toolOutcome{result: map[string]any{"status": "sent", "message_id": m.ID},
		messages: []map[string]any{m.EventData()}}
	return c.deliver(out, m)
}

// deliver adds a message to a tool outcome: it is checked now and logged
// in its recipient's log while the call is logged in the sender's (both are
// durable before the call returns; recovery reconciles a crash between).
func (c *Core) deliver(out toolOutcome, m inbox.Message) (toolOutcome, error) {
	skip, err := c.checkEnqueue(m)
	if err != nil {
		return deliveryErr(err)
	}
	if !skip {
		out.deliver = append(out.deliver, m)
	}
	return out, nil
}

func (c *Core) toolBroadcast(a *agent, v tools.Broadcast, cc callCtx) (toolOutcome, error) {
	targets, err := c.tree.BroadcastTargets(a.id)
	if err != nil {
		return toolErr("%v", err), nil
	}
	bid := cc.derivedID("broadcast", "")
	out := toolOutcome{}
	for _, to := range targets {
		m := c.newMessage(cc.derivedID("msg", to), a.id, to, inbox.KindRequest, v.Text)
		m.Metadata["broadcast_id"] = bid
		out.messages = append(out.messages, m.EventData())
		var err error
		if out, err = c.deliver(out, m); err != nil || out.toolErr != "" {
			// A refused recipient refuses the whole broadcast: nothing
			// has been written yet.
			out.deliver, out.messages = nil, nil
			return out, err
		}
	}
	out.result = map[string]any{"status": "sent", "message_id": bid, "recipient_count": len(targets)}
	return out, nil
}

func (c *Core) toolCheckInbox(a *agent, v tools.CheckInbox) (toolOutcome, error) {
	sender := ""
	if v.Sender != "" {
		switch v.Sender {
		case tree.User, tree.System:
			sender = v.Sender
		default:
			id, err := c.tree.Lookup(a.id, v.Sender)
			if err != nil {
				return toolErr("%v", err), nil
			}
			sender = id
		}
	}
	a.mu.Lock()
	shown := map[string]bool{}
	if a.cur != nil {
		if r := a.p.runFor(a.cur.runID); r != nil {
			for _, id := range r.MessageIDs {
				shown[id] = true
			}
		}
	}
	var take []inbox.Message
	var size int64
	more := 0
	for _, m := range a.p.Pending.Peek() {
		if shown[m.ID] || (sender != "" && m.Sender != sender) || (v.Kind != "" && string(m.Kind) != string(v.Kind)) {
			continue
		}
		// One call takes what one result carries; the rest waits for the
		// next call.
		if size += int64(m.Size()); len(take) >= maxWakeBatch || (len(take) > 0 && size > pageBytes) {
			more++
			continue
		}
		take = append(take, m)
	}
	a.mu.Unlock()
	// Read the payloads back before the messages count as delivered.
	take, err := c.fillPayloads(a.id, take)
	if err != nil {
		return toolOutcome{}, err
	}
	list := make([]any, 0, len(take))
	if len(take) > 0 {
		recs := make([]eventlog.Record, 0, len(take))
		for _, m := range take {
			recs = append(recs, eventlog.Record{Event: evMsgDelivered, Data: messageDeliveredData{MessageID: m.ID}})
		}
		if _, err := a.log.AppendBatch(recs); err != nil {
			return toolOutcome{}, fmt.Errorf("logging message.delivered: %w", err)
		}
	}
	for _, m := range take {
		list = append(list, map[string]any{"from": c.displayName(m.Sender), "text": m.Payload, "message_id": m.ID})
	}
	if more > 0 {
		return ok(map[string]any{"messages": list, "more": more}), nil
	}
	return ok(map[string]any{"messages": list}), nil
}

// maxNoticeListed bounds the pending messages a failure notice lists.
const maxNoticeListed = 20

// notifyParentOfFailure sends SYSTEM's error message about a failed child
// turn to the parent; the child's inbox is kept.
func (c *Core) notifyParentOfFailure(a *agent) {
	a.mu.Lock()
	parent, name, lastErr := a.p.ParentID, a.p.Name, a.p.LastError
	total := a.p.Pending.Len()
	pending := a.p.Pending.PeekFirst(maxNoticeListed, 0)
	a.mu.Unlock()
	if parent == "" {
		return
	}
	if full, err := c.fillPayloads(a.id, pending); err == nil {
		pending = full
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Agent %s failed its turn: %s.", name, lastErr)
	if len(pending) > 0 {
		fmt.Fprintf(&b, " Its %d pending message(s) are kept:", total)
		for _, m := range pending {
			fmt.Fprintf(&b, "\n- from %s: %s", c.displayName(m.Sender), truncate(m.Payload, 200))
		}
		if total > len(pending) {
			fmt.Fprintf(&b, "\n- and %d more", total-len(pending))
		}
	}
	fmt.Fprintf(&b, "\nUse poke(agent_name=%q) to retry, or terminate it.", name)
	m := c.newMessage(derivedNoticeID("failed", a.id, a.transitionKey()), tree.System, parent, inbox.KindError, b.String())
	m.Metadata["failed_agent"] = a.id
	if err := c.enqueue(m); err != nil {
		c.log.Error("notifying parent of a failed turn", "agent", a.id, "parent", parent, "err", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
