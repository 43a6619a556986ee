package daemon

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
)

// userInbox holds the messages root agents send to the operator, durable in
// <home>/user.jsonl (message.enqueued / message.delivered).
type userInbox struct {
	c     *Core
	log   *eventlog.Log
	mu    sync.Mutex
	queue *inbox.Queue
	seen  map[string]struct{}
}

func (c *Core) openUserInbox() error {
	path := filepath.Join(c.opts.Home, "user.jsonl")
	u := &userInbox{c: c, queue: inbox.NewQueue(0), seen: map[string]struct{}{}}
	var foldErr error
	opts := c.logOptions("USER")
	opts.OnHeal = nil
	lg, err := eventlog.Open(c.fs, path, eventlog.Options{Logger: opts.Logger, Now: opts.Now,
		PendingIdle: opts.PendingIdle, HealBackoff: opts.HealBackoff, Files: opts.Files,
		Replay: func(e eventlog.Entry) error {
			if foldErr == nil {
				foldErr = u.apply(e)
			}
			return nil
		},
		OnAppend: func(es []eventlog.Entry) {
			for _, e := range es {
				if err := u.apply(e); err != nil {
					c.log.Error("applying a user inbox event", "seq", e.Seq, "err", err)
				}
			}
			c.bus.publish("USER", es)
		}})
	if err != nil {
		return fmt.Errorf("opening the USER inbox: %w; if it is damaged, `warren repair USER` keeps a copy and cuts it", err)
	}
	if foldErr != nil {
		_ = lg.Close()
		return fmt.Errorf("%s: %w", path, foldErr)
	}
	u.log = lg
	c.user = u
	return nil
}

func (u *userInbox) apply(e eventlog.Entry) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch e.Event {
	case evMsgEnqueued:
		m, err := inbox.FromEventData(e.Data)
		if err != nil {
			return fmt.Errorf("seq %d: %w", e.Seq, err)
		}
		if _, dup := u.seen[m.ID]; dup {
			return nil
		}
		u.seen[m.ID] = struct{}{}
		u.queue.Push(m)
	case evMsgDelivered:
		var d messageDeliveredData
		if err := decode(e, &d); err != nil {
			return err
		}
		u.queue.Take([]string{d.MessageID})
	}
	return nil
}

func (u *userInbox) enqueue(m inbox.Message) error {
	u.mu.Lock()
	_, dup := u.seen[m.ID]
	u.mu.Unlock()
	if dup {
		return nil
	}
	if _, err := u.log.Append(evMsgEnqueued, m.EventData()); err != nil {
		return fmt.Errorf("logging a message to USER: %w", err)
	}
	return nil
}

// Drain returns and marks delivered every message in the USER inbox.
func (c *Core) DrainUserInbox() ([]map[string]any, error) {
	u := c.user
	u.mu.Lock()
	msgs := u.queue.Peek()
	u.mu.Unlock()
	if len(msgs) == 0 {
		return []map[string]any{}, nil
	}
	recs := make([]eventlog.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = eventlog.Record{Event: evMsgDelivered, Data: messageDeliveredData{MessageID: m.ID}}
	}
	if _, err := u.log.AppendBatch(recs); err != nil {
		return nil, fmt.Errorf("logging the delivery of the USER inbox: %w", err)
	}
	out := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		out[i] = map[string]any{"from": c.displayName(m.Sender), "text": m.Payload, "message_id": m.ID,
			"timestamp": m.Timestamp.UTC().Format(time.RFC3339Nano)}
	}
	return out, nil
}

// UserPending lists the USER inbox without draining it.
func (c *Core) UserPending() []inbox.Message {
	c.user.mu.Lock()
	defer c.user.mu.Unlock()
	return c.user.queue.Peek()
}
