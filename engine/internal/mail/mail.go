// Package mail is how a message reaches an inbox (SPEC 5, 6): the checks
// before it is enqueued, the append and the wake, the redelivery of a
// message its sender's log records as sent, and SYSTEM's notice to a
// parent whose child failed its turn; and the delivery of messages a
// turn took (message.delivered).
//
// The checks, in order: a message to USER is skipped when the USER inbox
// has it and otherwise needs room there; a message to an agent needs a
// live recipient, is skipped when the recipient has had it enqueued
// already (a message id is enqueued once per recipient: a call run again
// after a crash sends the same ids), is refused when the recipient is
// terminated or its log is damaged, and otherwise needs room in its inbox
// and in the daemon's totals (config.Limits). The room is reserved when
// the check passes (package reserve, with package limits' CheckRoom) and
// released when the append returns, in the inbox or failed. The append
// logs message.enqueued in the recipient's log (the USER inbox has its
// own file) and pokes the recipient: a new message also retries an agent
// whose last turn failed. A message redelivered (its sender's log records
// it as sent, package redeliver) passes the same checks except the room:
// the limits refuse new sends, not those already made.
//
// What the steps do to the agents and the engine goes through Env.
//
// # Locks
//
// None of its own. Env's and Agent's methods take the engine's locks one
// after the other, never across another method; Reserve holds the reservation set's
// lock across its view of the inbox (package reserve).
package mail

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/toolexec"
	"github.com/warren-dev/warren/tree"
)

// Agent is what the mail steps need of an agent: the engine's record of
// it (agentrec.Agent), each method taking its lock itself.
type Agent interface {
	// Inbox reads whether it has had message id enqueued, whether it is
	// terminated and whether its log is damaged.
	Inbox(id string) (has, terminated, corrupt bool)
	// Append logs one entry in its log, AppendBatch several in one write
	// (store.Log's).
	Append(event string, data any) (eventlog.Entry, error)
	AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error)
	// Failed reads what its parent is told of its failed turn, listing at
	// most max pending messages.
	Failed(max int) Failure
	// TransitionKey names its current transition (its latest run and
	// turn, or its id) for notice ids.
	TransitionKey() string
}

// Env is what the mail steps need of the engine, for agents of type A.
type Env[A Agent] interface {
	// Agent returns a live agent.
	Agent(id string) (A, bool)
	// Reserve checks that m fits in a's inbox and in the daemon's totals,
	// counting the messages reserved and not yet landed, and reserves its
	// room until Release(m.ID); the error wraps toolexec.ErrInboxFull.
	// ReserveUser does the same for the USER inbox.
	Reserve(a A, m inbox.Message) error
	ReserveUser(m inbox.Message) error
	Release(id string)
	// UserHas reports whether the USER inbox has had message id; UserOpen
	// whether it is open yet.
	UserHas(id string) bool
	UserOpen() bool
	// AppendUser makes m durable in the USER inbox.
	AppendUser(m inbox.Message) error
	// Poke wakes a, even after a failed turn.
	Poke(a A)
	// FillPayloads returns msgs with every payload read back from the
	// owner's log (the notice of a failed turn).
	FillPayloads(owner string, msgs []inbox.Message) ([]inbox.Message, error)
	// DisplayName is how a sender appears in a notice.
	DisplayName(id string) string
	Now() time.Time
	Logger() hclog.Logger
}

// Check decides whether m can be enqueued: skip when the recipient already
// has it; an error naming the reason when it cannot take it (wrapping
// toolexec.ErrNoAgent or toolexec.ErrInboxFull). A message let through
// holds its room until Append.
func Check[A Agent](env Env[A], m inbox.Message) (skip bool, err error) {
	if m.Recipient == tree.User {
		if env.UserHas(m.ID) {
			return true, nil
		}
		return false, env.ReserveUser(m)
	}
	r, ok := env.Agent(m.Recipient)
	if !ok {
		return false, fmt.Errorf("recipient %s: %w", m.Recipient, toolexec.ErrNoAgent)
	}
	dup, terminated, corrupt := r.Inbox(m.ID)
	switch {
	case dup:
		return true, nil
	case terminated:
		return false, fmt.Errorf("recipient %s is terminated: %w", m.Recipient, toolexec.ErrNoAgent)
	case corrupt:
		return false, fmt.Errorf("recipient %s has a damaged log (warren repair): %w", m.Recipient, toolexec.ErrNoAgent)
	}
	return false, env.Reserve(r, m)
}

// Append logs message.enqueued in the recipient's log (or puts m in the
// USER inbox) and pokes the recipient; it does not check (Check did), and
// it releases m's room, in the inbox now or failed.
func Append[A Agent](env Env[A], m inbox.Message) error { return appendWith(env, m, nil) }

// appendWith is Append with records logged in the same write as
// message.enqueued (an agent recipient only).
func appendWith[A Agent](env Env[A], m inbox.Message, with []eventlog.Record) error {
	defer env.Release(m.ID)
	if m.Recipient == tree.User {
		if len(with) > 0 {
			return fmt.Errorf("records with a message to %s: the USER inbox has no log for them", tree.User)
		}
		return env.AppendUser(m)
	}
	r, ok := env.Agent(m.Recipient)
	if !ok {
		return fmt.Errorf("recipient %s: %w", m.Recipient, toolexec.ErrNoAgent)
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
	env.Poke(r)
	return nil
}

// Send checks m and appends it: a message whose id the recipient already
// has is not enqueued again.
func Send[A Agent](env Env[A], m inbox.Message) error {
	skip, err := Check(env, m)
	if err != nil || skip {
		return err
	}
	return Append(env, m)
}

// SendWith is Send with records logged in the recipient's log in the same
// write as m's message.enqueued, so that both are durable or neither (a
// once-subscription's notice and its tool.unsubscribe). dup reports that
// the recipient had m already: nothing is written then.
func SendWith[A Agent](env Env[A], m inbox.Message, with ...eventlog.Record) (dup bool, err error) {
	skip, err := Check(env, m)
	if err != nil || skip {
		return skip, err
	}
	return false, appendWith(env, m, with)
}

// Redeliver enqueues a message its sender's log records as sent unless
// its recipient has it; the limits do not refuse it.
func Redeliver[A Agent](env Env[A], m inbox.Message) error {
	skip, err := Check(env, m)
	if errors.Is(err, toolexec.ErrInboxFull) {
		err = nil
	}
	if err == nil && !skip {
		err = Append(env, m)
	}
	return err
}

// Delivered logs message.delivered for msgIDs in id's log, in one write;
// id must be a live agent (toolexec.ErrNoAgent).
func Delivered[A Agent](env Env[A], id string, msgIDs []string) error {
	a, ok := env.Agent(id)
	if !ok {
		return toolexec.ErrNoAgent
	}
	recs := make([]eventlog.Record, len(msgIDs))
	for i, mid := range msgIDs {
		recs[i] = eventlog.Record{Event: schema.MessageDelivered, Data: schema.MessageDeliveredData{MessageID: mid}}
	}
	_, err := a.AppendBatch(recs)
	return err
}

// Lacks reports whether the recipient of s exists and has not got it (a
// damaged log has nothing redelivered to it); agentsOnly leaves out
// messages to USER, as does a USER inbox not open yet.
func Lacks[A Agent](env Env[A], s projection.SentRef, agentsOnly bool) bool {
	if s.To == tree.User {
		return !agentsOnly && env.UserOpen() && !env.UserHas(s.ID)
	}
	a, ok := env.Agent(s.To)
	if !ok {
		return false
	}
	has, _, corrupt := a.Inbox(s.ID)
	return !corrupt && !has
}
