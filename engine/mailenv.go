package engine

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/gate"
	"github.com/warren-dev/warren/engine/internal/mail"
	"github.com/warren-dev/warren/engine/internal/redeliver"
	"github.com/warren-dev/warren/engine/internal/reminders"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/toolexec"
)

// mailEnv is the Core as the environment of packages mail (enqueue and
// its checks, the parent's failure notice), subs (subscribing and the
// transition notices), reminders, gate and redeliver; what they do to one
// agent goes to its record (package agentrec) directly. Each method is
// one step under the Core's locks, the roster's and an agent's a.mu taken
// one after the other, never together, and neither held across a log
// append.
// The one callback under a lock is the record's WithReminder's, which
// arms the reminder's timer (Arm) under a.mu (a.mu -> c.sched's mutex,
// as the order allows).
type mailEnv struct{ c *Core }

var (
	_ mail.Env[*agent]      = mailEnv{}
	_ subs.Env[*agent]      = mailEnv{}
	_ reminders.Env[*agent] = mailEnv{}
	_ gate.Env[*agent]      = mailEnv{}
	_ redeliver.Env         = mailEnv{}
)

func (c *Core) mail() mailEnv { return mailEnv{c} }

func (e mailEnv) Agent(id string) (*agent, bool) { return e.c.agent(id) }
func (e mailEnv) Now() time.Time                 { return e.c.now() }
func (e mailEnv) NewID() string                  { return newID() }
func (e mailEnv) Logger() hclog.Logger           { return e.c.log }
func (e mailEnv) Poke(a *agent)                  { e.c.poke(a) }
func (e mailEnv) Release(id string)              { e.c.unreserve(id) }
func (e mailEnv) UserHas(id string) bool         { return e.c.user.Has(id) }
func (e mailEnv) AppendUser(m inbox.Message) error {
	return e.c.user.Enqueue(m)
}
func (e mailEnv) Enqueue(m inbox.Message) error { return e.c.enqueue(m) }
func (e mailEnv) EnqueueWith(m inbox.Message, with ...eventlog.Record) (bool, error) {
	return mail.SendWith[*agent](e, m, with...)
}
func (e mailEnv) DisplayName(id string) string { return e.c.displayName(id) }
func (e mailEnv) FillPayloads(owner string, msgs []inbox.Message) ([]inbox.Message, error) {
	return e.c.fillPayloads(owner, msgs)
}

func (e mailEnv) Reserve(r *agent, m inbox.Message) error { return e.c.reserveRoom(m, r.Room) }

func (e mailEnv) ReserveUser(m inbox.Message) error {
	u := e.c.user
	return e.c.reserveRoom(m, func(reserved func(has func(id string) bool) (int, int64)) (n int, b int64, rn int, rb int64) {
		u.View(func(count int, bytes int64, has func(id string) bool) {
			n, b = count, bytes
			rn, rb = reserved(has)
		})
		return n, b, rn, rb
	})
}

// Subscriptions.

func (e mailEnv) Index(sub subscriptionRec, subscriber string) bool {
	return e.c.indexSubscription(sub, subscriber)
}

func (e mailEnv) Unindex(sub subscriptionRec) { e.c.agents.Unindex(sub) }

// Reminders.

func (e mailEnv) Arm(a *agent, name string, t time.Time, fire func()) {
	e.c.sched.Arm(a.ID(), name, t, fire)
}
func (e mailEnv) Disarm(a *agent, name string) { e.c.sched.Cancel(a.ID(), name) }

// Gates.

func (e mailEnv) Wake(a *agent) { e.c.wake(a) }

// Redelivery.

func (e mailEnv) Lacks(s sentRef, agentsOnly bool) bool { return mail.Lacks[*agent](e, s, agentsOnly) }
func (e mailEnv) UserOpen() bool                        { return e.c.user != nil }

func (e mailEnv) ReadSeq(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error) {
	return e.c.st.ReadSeq(ctx, id, seq, hint)
}

func (e mailEnv) Deliver(m inbox.Message) error { return mail.Redeliver[*agent](e, m) }

// redeliverRefs enqueues messages the sender's log records whose
// recipient lacks them (package redeliver). agentsOnly leaves out messages
// to USER (recovery's rule).
func (c *Core) redeliverRefs(sender string, refs []sentRef, agentsOnly bool) {
	redeliver.Refs(c.mail(), c.log, sender, refs, agentsOnly)
}

// The Core's side of mail (package mail decides; mailEnv above is the
// Core as its environment).

// enqueue makes a message durable in the recipient's log (or user.jsonl)
// and wakes the recipient. A message whose id the recipient already has is
// not enqueued again.
func (c *Core) enqueue(m inbox.Message) error { return mail.Send[*agent](c.mail(), m) }

// Sentinels the tools turn into tool-level errors.
var (
	errInboxFull     = toolexec.ErrInboxFull
	errNotFoundAgent = toolexec.ErrNoAgent
)

func (c *Core) newMessage(id, sender, recipient string, kind inbox.Kind, payload string) inbox.Message {
	return toolexec.NewMessage(c.env(), id, sender, recipient, kind, payload)
}

// The core's side of reminders and subscriptions (package toolexec holds
// the tools remind_me, cancel_reminder, subscribe and unsubscribe;
// packages reminders and subs the steps, against the Core as mailEnv).

// indexSubscription adds a subscription whose target is alive.
func (c *Core) indexSubscription(sub subscriptionRec, subscriber string) bool {
	return c.agents.Index(sub, subscriber)
}

// noticesFor is the notices.owed record a's transition from -> to (named
// key, subs.Key) is logged with: what it owes the subscriptions to a that
// match it (subs.Owed; none when none does).
func (c *Core) noticesFor(a *agent, from, to, key string) []eventlog.Record {
	return subs.Owed(c.agents.Watchers(a.ID()), from, to, key)
}

// notify delivers the notices a's logged transitions owe that it has not
// delivered (after a transition's write; by recovery, the latest, for what
// a crash kept back).
func (c *Core) notify(a *agent) {
	for _, n := range a.TakeNotices() {
		subs.Deliver[*agent](c.mail(), a.Name(), n)
	}
}
