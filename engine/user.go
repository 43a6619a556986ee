package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/userinbox"
)

// openUserInbox opens the operator's inbox (package userinbox) under this
// Core's claim on it.
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
// on failure on a cluster the claim is given up.
func (c *Core) tryOpenUserInbox() error {
	lease, err := c.claimUser()
	if err != nil {
		return fmt.Errorf("claiming the USER inbox: %w", err)
	}
	u, err := userinbox.Open(c.st, userinbox.Options{Lease: lease, Totals: &c.pending, Logger: c.log,
		Cluster: c.clustered(),
		Path:    filepath.Join(c.opts.Home, "user.jsonl"),
		Publish: func(es []eventlog.Entry) { c.bus.Publish("USER", es) }})
	if err != nil {
		if c.clustered() {
			c.dropLease(store.UserID) // another daemon may take it at once
		}
		return err
	}
	c.user = u
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
	msgs := c.user.PeekFirst(maxDrain, pageBytes)
	if len(msgs) == 0 {
		return []UserMessage{}, nil
	}
	msgs, err := c.fillPayloads(inbox.User, msgs)
	if err != nil {
		return nil, err
	}
	if err := c.user.Deliver(msgs); err != nil {
		return nil, err
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
	msgs := c.user.Peek()
	if full, err := c.fillPayloads(inbox.User, msgs); err == nil {
		return full
	}
	return msgs
}

// UserPendingCount is the number of messages in the USER inbox.
func (c *Core) UserPendingCount() int { return c.user.Len() }
