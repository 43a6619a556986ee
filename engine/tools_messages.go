package engine

import (
	"errors"
	"fmt"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// The message tools: send_message, broadcast, check_inbox and complete.

// deliveryErr turns an enqueue error into an outcome: a full inbox or a
// missing recipient is the tool's error; anything else fails the call.
func deliveryErr(err error) (toolOutcome, error) {
	if errors.Is(err, errInboxFull) || errors.Is(err, errNotFoundAgent) {
		return toolFailed("%v", err), nil
	}
	return toolOutcome{}, err
}

// deliver adds a message to an outcome: it is checked now (its room
// reserved) and logged in its recipient's log while the call is logged in
// the sender's (both are durable before the call returns; recovery
// reconciles a crash between).
func (x toolExec) deliver(out toolOutcome, m inbox.Message) (toolOutcome, error) {
	skip, err := x.c.checkSend(m)
	if err != nil {
		return deliveryErr(err)
	}
	if !skip {
		out.Deliver = append(out.Deliver, m)
	}
	return out, nil
}

func (x toolExec) sendMessage(v tools.SendMessage) (toolOutcome, error) {
	to := tree.User
	if v.Recipient != tree.User {
		id, err := x.c.tree.Lookup(x.self, v.Recipient)
		if err != nil {
			return toolFailed("%v", err), nil
		}
		to = id
	}
	if err := x.c.tree.CheckRoute(x.self, to); err != nil {
		return toolFailed("%v", err), nil
	}
	m := x.newMessage(x.derivedID("msg", to), to, inbox.KindRequest, v.Text)
	out := toolOutcome{Result: tools.SendMessageResult(m.ID), Messages: []map[string]any{m.EventData()}}
	return x.deliver(out, m)
}

func (x toolExec) broadcast(v tools.Broadcast) (toolOutcome, error) {
	targets, err := x.c.tree.BroadcastTargets(x.self)
	if err != nil {
		return toolFailed("%v", err), nil
	}
	bid := x.derivedID("broadcast", "")
	out := toolOutcome{}
	for _, to := range targets {
		m := x.newMessage(x.derivedID("msg", to), to, inbox.KindRequest, v.Text)
		m.Metadata["broadcast_id"] = bid
		out.Messages = append(out.Messages, m.EventData())
		var err error
		checked := out.Deliver
		if out, err = x.deliver(out, m); err != nil || out.Err != "" {
			// A refused recipient refuses the whole broadcast: nothing
			// has been written yet, and the room checked is given back.
			x.c.unreserveAll(checked)
			out.Deliver, out.Messages = nil, nil
			return out, err
		}
	}
	out.Result = tools.BroadcastResult(bid, len(targets))
	return out, nil
}

func (x toolExec) checkInbox(v tools.CheckInbox) (toolOutcome, error) {
	sender := ""
	if v.Sender != "" {
		switch v.Sender {
		case tree.User, tree.System:
			sender = v.Sender
		default:
			id, err := x.c.tree.Lookup(x.self, v.Sender)
			if err != nil {
				return toolFailed("%v", err), nil
			}
			sender = id
		}
	}
	var pending []inbox.Message
	var shownIDs []string
	if a, ok := x.c.agent(x.self); ok {
		pending, shownIDs = a.Pending()
	}
	shown := make(map[string]bool, len(shownIDs))
	for _, id := range shownIDs {
		shown[id] = true
	}
	var take []inbox.Message
	var size int64
	more := 0
	for _, m := range pending {
		if shown[m.ID] || (sender != "" && m.Sender != sender) || (v.Kind != "" && m.Kind != v.Kind) {
			continue
		}
		// One call takes what one result carries; the rest waits for the
		// next call.
		if size += int64(m.Size()); len(take) >= takeCount || (len(take) > 0 && size > takeBytes) {
			more++
			continue
		}
		take = append(take, m)
	}
	// Read the payloads back before the messages count as delivered.
	take, err := x.c.fillPayloads(x.ctx, x.self, take)
	if err != nil {
		return toolOutcome{}, err
	}
	if len(take) > 0 {
		ids := make([]string, len(take))
		for i, m := range take {
			ids[i] = m.ID
		}
		if err := x.c.markDelivered(x.self, ids); err != nil {
			return toolOutcome{}, fmt.Errorf("logging message.delivered: %w", err)
		}
	}
	return toolDone(tools.CheckInboxResult(x.items(take), more)), nil
}

// items are messages as results list them.
func (x toolExec) items(msgs []inbox.Message) []tools.InboxItem {
	out := make([]tools.InboxItem, len(msgs))
	for i, m := range msgs {
		out[i] = tools.InboxItem{From: x.c.displayName(m.Sender), Text: m.Payload, MessageID: m.ID}
	}
	return out
}

func (x toolExec) complete(v tools.Complete) (toolOutcome, error) {
	self, _ := x.c.toolView(x.self)
	parent := self.ParentID
	if parent == "" {
		return toolFailed("root agent cannot complete — no parent"), nil
	}
	if len(x.c.tree.Children(x.self)) > 0 {
		return toolFailed("agent has children; terminate them first"), nil
	}
	m := x.newMessage(x.derivedID("msg", parent), parent, inbox.KindResponse, v.Result)
	out, err := x.deliver(toolOutcome{Result: tools.CompleteResult(m.ID), Messages: []map[string]any{m.EventData()}}, m)
	if err == nil && out.Err == "" {
		c, self := x.c, x.self
		out.After = func() { c.markCompleting(self) }
	}
	return out, err
}
