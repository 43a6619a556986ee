package engine

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/warren-dev/warren/tree"

	"github.com/warren-dev/warren/engine/internal/claims"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/userinbox"
)

// openUserInbox opens the operator's inbox (package userinbox) under this
// Core's claim on it, standing by on a cluster store until it can (package
// claims: Open). A USER log damaged in the middle does not stop the
// daemon (SPEC 9): the inbox is served damaged (userinbox.Damaged), it
// refuses messages and drains with the cause and the repair, and
// daemon.status shows it; every agent is served as usual.
func (c *Core) openUserInbox(ctx context.Context) error {
	sb := claims.Standby{Clustered: c.clustered(), Limit: claimTimeout, Every: c.opts.TakeoverEvery, Clock: c.opts.Clock,
		Pause: func() error { return c.opts.Sleep(c.ctx, time.Second) }, Waiting: c.standby.Store}
	return c.claims.Open(store.UserID, sb, func(lease store.Lease) error {
		u, err := userinbox.Open(ctx, c.st, userinbox.Options{Lease: lease, Totals: &c.pending, Logger: c.log,
			Cluster: c.clustered(),
			Path:    filepath.Join(c.opts.Home, "user.jsonl"),
			Publish: func(es []eventlog.Entry) { c.bus.Publish("USER", es) }})
		if err == nil {
			c.user = u
		}
		if errors.Is(err, userinbox.ErrDamaged) && !c.clustered() {
			c.log.Error("the USER inbox's log is damaged; the daemon serves every agent and refuses USER's messages until it is repaired", "err", err)
			c.user = userinbox.Damaged(err)
			return nil
		}
		return err
	})
}

// StandingBy reports whether the Core stands by for the USER inbox,
// which another daemon of the cluster holds (Recover waits meanwhile).
func (c *Core) StandingBy() bool { return c.standby.Load() }

// UserLost is closed when this Core may no longer write the USER inbox
// (its lease was lost to another daemon's claim): the daemon stops
// serving and stands by (daemon/run.go).
func (c *Core) UserLost() <-chan struct{} { return c.userLost }

// maxDrain bounds the messages one inbox.list returns.
const maxDrain = 1000

// UserMessage is one message of the USER inbox as inbox.list shows it.
type UserMessage struct {
	// From names the sender as messages name agents: a path, or SYSTEM.
	From, Text, MessageID string
	Timestamp             time.Time
}

// DrainUserInbox returns and marks delivered the messages in the USER
// inbox, oldest first: all of them, or as many as one reply carries (at
// most maxDrain, about pageBytes of text); the rest stay for the next call.
func (c *Core) DrainUserInbox(ctx context.Context) ([]UserMessage, error) {
	return c.userPage(ctx, c.user.Drain)
}

// PeekUserInbox is DrainUserInbox leaving the messages in the inbox
// (inbox.list's peek).
func (c *Core) PeekUserInbox(ctx context.Context) ([]UserMessage, error) {
	return c.userPage(ctx, c.user.Show)
}

// userPage reads one page of the USER inbox with read (Drain or Show).
func (c *Core) userPage(ctx context.Context, read func(int, int64, userinbox.Fill, func(string) string) ([]userinbox.Message, error)) ([]UserMessage, error) {
	if err := c.user.Damage(); err != nil {
		return nil, failf(ErrWrongState, "%w", err)
	}
	msgs, err := read(maxDrain, pageBytes, c.filler(ctx), c.displayName)
	if err != nil {
		return nil, err
	}
	out := make([]UserMessage, len(msgs))
	for i, m := range msgs {
		out[i] = UserMessage(m)
	}
	return out, nil
}

// WaitUserMessage returns once the USER inbox holds a message, or when
// ctx ends (with its error): inbox.list's wait_s.
func (c *Core) WaitUserMessage(ctx context.Context) error {
	ch, cancel := c.bus.Subscribe(tree.User)
	defer cancel()
	for c.user.Len() == 0 {
		select {
		case _, open := <-ch:
			if !open {
				return failf(ErrShuttingDown, "the daemon is stopping")
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// UserPending lists the USER inbox without draining it, payloads read
// back (when one cannot be read, the references stay).
func (c *Core) UserPending(ctx context.Context) []inbox.Message { return c.user.Pending(c.filler(ctx)) }

// filler is fillPayloads bound to ctx.
func (c *Core) filler(ctx context.Context) func(owner string, msgs []inbox.Message) ([]inbox.Message, error) {
	return func(owner string, msgs []inbox.Message) ([]inbox.Message, error) {
		return c.fillPayloads(ctx, owner, msgs)
	}
}

// UserPendingCount is the number of messages in the USER inbox.
func (c *Core) UserPendingCount() int { return c.user.Len() }
