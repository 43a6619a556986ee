// Package userinbox is the operator's inbox (SPEC 5, "USER"): the messages
// root agents send to the operator, durable in <home>/user.jsonl as
// message.enqueued and message.delivered entries (the same events as an
// agent's inbox in its log), folded into a queue with enqueue-once by
// message id. The engine decides what goes in (routing, limits) and shows
// what comes out (inbox.list); this package keeps the queue and its log.
//
// A USER log damaged in the middle (not a torn tail) does not stop the
// daemon (SPEC 9): Open reports it wrapping ErrDamaged, and the owner
// serves a Damaged inbox instead, which holds nothing and refuses every
// write and every drain with the cause and the repair (`warren repair
// USER` keeps a copy and cuts it).
//
// Locks: Inbox.mu guards the queue and the ids seen; it is a leaf, never
// held across a log append (the append's commit folds the entry, taking
// it).
package userinbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

// ErrDamaged marks a USER log that cannot be read back (damaged in the
// middle): a repair is needed, nothing was lost by the daemon.
var ErrDamaged = errors.New("the USER inbox's log is damaged")

// Inbox is the USER inbox. Safe for concurrent use.
type Inbox struct {
	// damage, when set, is why the inbox is not served (Damaged): its
	// log is not open.
	damage error
	log    store.Log
	mu     sync.Mutex
	queue  *inbox.Queue
	seen   map[string]struct{}
}

// Options are what Open needs from its owner.
type Options struct {
	// Lease is the claim on the USER log (store.UserID).
	Lease store.Lease
	// Totals counts the pending messages of the whole daemon (limits).
	Totals *inbox.Totals
	// Publish gets each committed group of entries (the live event bus).
	Publish func([]eventlog.Entry)
	Logger  hclog.Logger
	// Path names the log in errors (<home>/user.jsonl).
	Path string
	// Cluster says the log is in a cluster store: an error opening it
	// gives no advice of `warren repair`, which cuts a home's files.
	Cluster bool
}

// Open opens (creating) the USER log of st and folds it. A log damaged in
// the middle, or holding an entry that cannot be folded, is an error
// wrapping ErrDamaged (and eventlog.ErrCorrupt when the log said so).
func Open(ctx context.Context, st store.Store, opts Options) (*Inbox, error) {
	u := &Inbox{queue: inbox.NewQueue(0), seen: map[string]struct{}{}}
	var foldErr error
	lg, err := st.UserLog(ctx, store.LogOptions{Lease: opts.Lease,
		Replay: func(e eventlog.Entry) error {
			if foldErr == nil {
				foldErr = u.apply(e)
			}
			return nil
		},
		OnAppend: func(es []eventlog.Entry) {
			for _, e := range es {
				if err := u.apply(e); err != nil {
					opts.Logger.Error("applying a user inbox event", "seq", e.Seq, "err", err)
				}
			}
			opts.Publish(es)
		}})
	if err != nil {
		if errors.Is(err, eventlog.ErrCorrupt) || errors.Is(err, faultfs.ErrSymlink) {
			err = fmt.Errorf("%w: %w", ErrDamaged, err)
		}
		if opts.Cluster {
			return nil, fmt.Errorf("opening the USER inbox: %w", err)
		}
		return nil, fmt.Errorf("opening the USER inbox: %w; with the daemon stopped, `warren repair USER` keeps a copy and cuts it", err)
	}
	if foldErr != nil {
		_ = lg.Close()
		return nil, fmt.Errorf("%w: %s: %w; with the daemon stopped, `warren repair USER` keeps a copy and cuts it", ErrDamaged, opts.Path, foldErr)
	}
	u.log = lg
	u.queue.Attach(opts.Totals)
	return u, nil
}

// Damaged is the inbox served in place of a USER log that cannot be read
// (cause wraps ErrDamaged): it holds nothing, and every write and drain
// is refused with cause.
func Damaged(cause error) *Inbox {
	return &Inbox{damage: cause, queue: inbox.NewQueue(0), seen: map[string]struct{}{}}
}

// Damage is why the inbox is not served (nil when it is).
func (u *Inbox) Damage() error { return u.damage }

// Has reports whether message id was ever enqueued (enqueue-once).
func (u *Inbox) Has(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.seen[id]
	return ok
}

// View is what a check of room for one more message needs, in one
// consistent view under the inbox's lock: f gets the pending messages,
// their payload bytes, and has, which reports whether a message id was
// ever enqueued (a reservation that has landed). f must not call u.
func (u *Inbox) View(f func(n int, bytes int64, has func(id string) bool)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f(u.queue.Len(), u.queue.Bytes(), func(id string) bool { _, ok := u.seen[id]; return ok })
}

// Len is the number of pending messages.
func (u *Inbox) Len() int { return u.queue.Len() }

// Peek returns the pending messages, oldest first (payloads may be
// references).
func (u *Inbox) Peek() []inbox.Message {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.queue.Peek()
}

// PeekFirst returns at most n pending messages and about b payload bytes,
// oldest first (at least one when any is pending).
func (u *Inbox) PeekFirst(n int, b int64) []inbox.Message {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.queue.PeekFirst(n, b)
}

// Deliver logs message.delivered for msgs, in one write.
func (u *Inbox) Deliver(msgs []inbox.Message) error {
	if u.damage != nil {
		return u.damage
	}
	recs := make([]eventlog.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = eventlog.Record{Event: schema.MessageDelivered, Data: schema.MessageDeliveredData{MessageID: m.ID}}
	}
	if _, err := u.log.AppendBatch(recs); err != nil {
		return fmt.Errorf("logging the delivery of the USER inbox: %w", err)
	}
	return nil
}

// Message is one message of the inbox as inbox.list shows it: who sent
// it (as the engine names agents: a path, or SYSTEM), the text, its id and
// when it was sent.
type Message struct {
	From, Text, MessageID string
	Timestamp             time.Time
}

// Fill returns msgs with every payload resident, reading back those the
// queue keeps as references (the engine's, over the store).
type Fill func(owner string, msgs []inbox.Message) ([]inbox.Message, error)

// Drain returns and marks delivered the oldest pending messages, as many
// as one reply carries: at most n and, beyond the first, about b payload
// bytes; the rest stay for the next call. name names each sender.
func (u *Inbox) Drain(n int, b int64, fill Fill, name func(id string) string) ([]Message, error) {
	return u.take(n, b, fill, name, true)
}

// Show is Drain without marking anything delivered: the messages stay in
// the inbox (inbox.list's peek).
func (u *Inbox) Show(n int, b int64, fill Fill, name func(id string) string) ([]Message, error) {
	return u.take(n, b, fill, name, false)
}

// take is Drain, or Show when deliver is false.
func (u *Inbox) take(n int, b int64, fill Fill, name func(id string) string, deliver bool) ([]Message, error) {
	if u.damage != nil {
		return nil, u.damage
	}
	msgs := u.PeekFirst(n, b)
	if len(msgs) == 0 {
		return []Message{}, nil
	}
	msgs, err := fill(inbox.User, msgs)
	if err != nil {
		return nil, err
	}
	if deliver {
		if err := u.Deliver(msgs); err != nil {
			return nil, err
		}
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = Message{From: name(m.Sender), Text: m.Payload, MessageID: m.ID, Timestamp: m.Timestamp}
	}
	return out, nil
}

// Pending lists the inbox without draining it, payloads read back (when
// one cannot be read, the list keeps the references).
func (u *Inbox) Pending(fill Fill) []inbox.Message {
	msgs := u.Peek()
	if full, err := fill(inbox.User, msgs); err == nil {
		return full
	}
	return msgs
}

// Degraded says why the USER log refuses appends (nil when it accepts
// them): its damage, or its log's refusal.
func (u *Inbox) Degraded() error {
	if u.damage != nil {
		return u.damage
	}
	return u.log.Degraded()
}

// Close closes the log.
func (u *Inbox) Close() error {
	if u.log == nil {
		return nil
	}
	return u.log.Close()
}

// Abandon drops the log without touching the disk (simulated crashes).
func (u *Inbox) Abandon() {
	if u.log != nil {
		u.log.Abandon()
	}
}

func (u *Inbox) apply(e eventlog.Entry) error {
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
		u.queue.Push(projection.Queued(m, e))
	case schema.MessageDelivered:
		var d schema.MessageDeliveredData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return fmt.Errorf("event %s at seq %d: bad data: %w", e.Event, e.Seq, err)
		}
		u.queue.Take([]string{d.MessageID})
	}
	return nil
}

// Enqueue logs message.enqueued for m, unless it was enqueued before.
func (u *Inbox) Enqueue(m inbox.Message) error {
	if u.damage != nil {
		return u.damage
	}
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
