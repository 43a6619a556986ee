package toolexec

import (
	"errors"
	"fmt"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// deliveryErr turns an enqueue error into an outcome: a full inbox or a
// missing recipient is the tool's error; anything else fails the call.
func deliveryErr(err error) (Outcome, error) {
	if errors.Is(err, ErrInboxFull) || errors.Is(err, ErrNoAgent) {
		return failed("%v", err), nil
	}
	return Outcome{}, err
}

// deliver adds a message to an outcome: it is checked now and logged in
// its recipient's log while the call is logged in the sender's (both are
// durable before the call returns; recovery reconciles a crash between).
func (x exec) deliver(out Outcome, m inbox.Message) (Outcome, error) {
	skip, err := x.env.CheckEnqueue(m, 0, 0)
	if err != nil {
		return deliveryErr(err)
	}
	if !skip {
		out.Deliver = append(out.Deliver, m)
	}
	return out, nil
}

func (x exec) sendMessage(v tools.SendMessage) (Outcome, error) {
	to := tree.User
	if v.Recipient != tree.User {
		id, err := x.env.Lookup(x.self, v.Recipient)
		if err != nil {
			return failed("%v", err), nil
		}
		to = id
	}
	if err := x.env.CheckRoute(x.self, to); err != nil {
		return failed("%v", err), nil
	}
	m := x.newMessage(x.derivedID("msg", to), to, inbox.KindRequest, v.Text)
	out := Outcome{Result: tools.SendMessageResult(m.ID), Messages: []map[string]any{m.EventData()}}
	return x.deliver(out, m)
}

func (x exec) broadcast(v tools.Broadcast) (Outcome, error) {
	targets, err := x.env.BroadcastTargets(x.self)
	if err != nil {
		return failed("%v", err), nil
	}
	bid := x.derivedID("broadcast", "")
	out := Outcome{}
	for _, to := range targets {
		m := x.newMessage(x.derivedID("msg", to), to, inbox.KindRequest, v.Text)
		m.Metadata["broadcast_id"] = bid
		out.Messages = append(out.Messages, m.EventData())
		var err error
		checked := out.Deliver
		if out, err = x.deliver(out, m); err != nil || out.Err != "" {
			// A refused recipient refuses the whole broadcast: nothing
			// has been written yet, and the room checked is given back.
			unreserve(x.env, checked)
			out.Deliver, out.Messages = nil, nil
			return out, err
		}
	}
	out.Result = tools.BroadcastResult(bid, len(targets))
	return out, nil
}

func (x exec) checkInbox(v tools.CheckInbox) (Outcome, error) {
	sender := ""
	if v.Sender != "" {
		switch v.Sender {
		case tree.User, tree.System:
			sender = v.Sender
		default:
			id, err := x.env.Lookup(x.self, v.Sender)
			if err != nil {
				return failed("%v", err), nil
			}
			sender = id
		}
	}
	pending, shownIDs := x.env.Inbox(x.self)
	shown := make(map[string]bool, len(shownIDs))
	for _, id := range shownIDs {
		shown[id] = true
	}
	lim := x.env.Limits()
	var take []inbox.Message
	var size int64
	more := 0
	for _, m := range pending {
		if shown[m.ID] || (sender != "" && m.Sender != sender) || (v.Kind != "" && m.Kind != v.Kind) {
			continue
		}
		// One call takes what one result carries; the rest waits for the
		// next call.
		if size += int64(m.Size()); len(take) >= lim.TakeCount || (len(take) > 0 && size > lim.TakeBytes) {
			more++
			continue
		}
		take = append(take, m)
	}
	// Read the payloads back before the messages count as delivered.
	take, err := x.env.FillPayloads(x.self, take)
	if err != nil {
		return Outcome{}, err
	}
	if len(take) > 0 {
		ids := make([]string, len(take))
		for i, m := range take {
			ids[i] = m.ID
		}
		if err := x.env.MarkDelivered(x.self, ids); err != nil {
			return Outcome{}, fmt.Errorf("logging message.delivered: %w", err)
		}
	}
	return done(tools.CheckInboxResult(x.items(take), more)), nil
}

// items are messages as results list them.
func (x exec) items(msgs []inbox.Message) []tools.InboxItem {
	out := make([]tools.InboxItem, len(msgs))
	for i, m := range msgs {
		out[i] = tools.InboxItem{From: x.env.DisplayName(m.Sender), Text: m.Payload, MessageID: m.ID}
	}
	return out
}

func (x exec) complete(v tools.Complete) (Outcome, error) {
	self, _ := x.env.Agent(x.self)
	parent := self.ParentID
	if parent == "" {
		return failed("root agent cannot complete — no parent"), nil
	}
	if len(x.env.Children(x.self)) > 0 {
		return failed("agent has children; terminate them first"), nil
	}
	m := x.newMessage(x.derivedID("msg", parent), parent, inbox.KindResponse, v.Result)
	out, err := x.deliver(Outcome{Result: tools.CompleteResult(m.ID), Messages: []map[string]any{m.EventData()}}, m)
	if err == nil && out.Err == "" {
		env, self := x.env, x.self
		out.After = func() { env.MarkCompleting(self) }
	}
	return out, err
}
