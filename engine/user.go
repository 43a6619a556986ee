package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

// userInbox holds the messages root agents send to the operator, durable in
// <home>/user.jsonl (message.enqueued / message.delivered).
type userInbox struct {
	c     *Core
	log   store.Log
	mu    sync.Mutex
	queue *inbox.Queue
	seen  map[string]struct{}
}

func (c *Core) openUserInbox() error {
	for tries := 0; ; tries++ {
		err := c.tryOpenUserInbox()
		if err == nil || !c.clustered() || !(errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrFenced)) {
			return err
		}
		// On a cluster the servers may still be electing leaders (the
		// daemon that held the inbox took one with it), or another daemon
		// claimed the inbox between our claim and its replay: the claim is
		// given up and the standby goes on.
		if tries%10 == 0 {
			c.log.Warn("opening the USER inbox failed; claiming it again", "err", err)
		}
		if err := c.opts.Sleep(c.ctx, time.Second); err != nil {
			return errors.Join(errors.New("stopped standing by for the USER inbox"), err)
		}
	}
}

// tryOpenUserInbox claims the USER inbox and folds its log into c.user;
// on failure the claim is given up.
func (c *Core) tryOpenUserInbox() error {
	path := filepath.Join(c.opts.Home, "user.jsonl")
	u := &userInbox{c: c, queue: inbox.NewQueue(0), seen: map[string]struct{}{}}
	var foldErr error
	lease, err := c.claimUser()
	if err != nil {
		return fmt.Errorf("claiming the USER inbox: %w", err)
	}
	lg, err := c.st.UserLog(context.Background(), store.LogOptions{Lease: lease,
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
			c.bus.Publish("USER", es)
		}})
	if err != nil {
		if c.clustered() {
			c.dropLease(store.UserID) // another daemon may take it at once
			return fmt.Errorf("opening the USER inbox: %w", err)
		}
		return fmt.Errorf("opening the USER inbox: %w; if it is damaged, `warren repair USER` keeps a copy and cuts it", err)
	}
	if foldErr != nil {
		_ = lg.Close()
		return fmt.Errorf("%s: %w", path, foldErr)
	}
	u.log = lg
	u.queue.Attach(&c.pending)
	c.user = u
	return nil
}

// checkRoom is checkEnqueueN for the USER inbox.
func (u *userInbox) checkRoom(m inbox.Message) (skip bool, err error) {
	u.mu.Lock()
	_, dup := u.seen[m.ID]
	u.mu.Unlock()
	if dup {
		return true, nil
	}
	return false, u.c.reserveRoom(m, func() (int, int64, int, int64) {
		u.mu.Lock()
		defer u.mu.Unlock()
		rn, rb := u.c.reservedFor(inbox.User, m.ID, func(id string) bool { _, ok := u.seen[id]; return ok })
		return u.queue.Len(), u.queue.Bytes(), rn, rb
	})
}

func (u *userInbox) apply(e eventlog.Entry) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch e.Event {
	case schema.MessageEnqueued:
		m, err := inbox.FromEventData(e.Data)
		if err != nil {
			return fmt.Errorf("seq %d: %w", e.Seq, err)
		}
		if _, dup := u.seen[m.ID]; dup {
			return nil
		}
		u.seen[m.ID] = struct{}{}
		u.queue.Push(queued(m, e))
	case schema.MessageDelivered:
		var d schema.MessageDeliveredData
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
	if _, err := u.log.Append(schema.MessageEnqueued, m.EventData()); err != nil {
		return fmt.Errorf("logging a message to USER: %w", err)
	}
	return nil
}

// maxDrain bounds the messages one inbox.list returns.
const maxDrain = 1000

// UserMessage is one message of the USER inbox as inbox.list shows it:
// who sent it (a path, or SYSTEM), the text, its id and when it was sent.
type UserMessage struct {
	From, Text, MessageID string
	Timestamp             time.Time
}

// DrainUserInbox returns and marks delivered the messages in the USER
// inbox, oldest first: all of them, or as many as one reply carries (at
// most maxDrain, about pageBytes of text); the rest stay for the next call.
func (c *Core) DrainUserInbox() ([]UserMessage, error) {
	u := c.user
	u.mu.Lock()
	msgs := u.queue.PeekFirst(maxDrain, pageBytes)
	u.mu.Unlock()
	if len(msgs) == 0 {
		return []UserMessage{}, nil
	}
	msgs, err := c.fillPayloads(inbox.User, msgs)
	if err != nil {
		return nil, err
	}
	recs := make([]eventlog.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = eventlog.Record{Event: schema.MessageDelivered, Data: schema.MessageDeliveredData{MessageID: m.ID}}
	}
	if _, err := u.log.AppendBatch(recs); err != nil {
		return nil, fmt.Errorf("logging the delivery of the USER inbox: %w", err)
	}
	out := make([]UserMessage, len(msgs))
	for i, m := range msgs {
		out[i] = UserMessage{From: c.displayName(m.Sender), Text: m.Payload, MessageID: m.ID, Timestamp: m.Timestamp}
	}
	return out, nil
}

// UserPending lists the USER inbox without draining it, payloads read
// back (a payload that cannot be read is left out).
func (c *Core) UserPending() []inbox.Message {
	c.user.mu.Lock()
	msgs := c.user.queue.Peek()
	c.user.mu.Unlock()
	if full, err := c.fillPayloads(inbox.User, msgs); err == nil {
		return full
	}
	return msgs
}

// UserPendingCount is the number of messages in the USER inbox.
func (c *Core) UserPendingCount() int { return c.user.queue.Len() }
