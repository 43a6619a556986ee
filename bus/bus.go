// Package bus fans an agent's logged entries, and the response text of its
// turns as it streams, out to live subscribers (events.subscribe,
// agent.stream, tests), and signals changes of live state to waiters.
//
// A subscriber that does not keep up loses its subscription (its channel
// is closed) rather than slowing the logs down.
//
// Locks: Bus.mu is held while one batch is fanned out, and the secret
// function (SetSecret) runs under it; the engine's takes its roster's lock
// (the agent table's), then the agent's a.mu. So Publish must not be called with either held (the
// engine publishes from the log's OnAppend, after the entry is applied and
// a.mu released). Signal.mu is a leaf.
package bus

import (
	"encoding/json"
	"sync"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
)

// Event is one logged entry as events.subscribe streams it.
type Event struct {
	AgentID string
	Entry   eventlog.Entry
	// Token is set on a live run.waiting: the resume secret, shown once.
	Token string
	// Delta, when set, is streamed response text of run RunID (not a log
	// entry: Entry is zero). Only subscribers that asked for deltas get it.
	Delta string
	RunID string
}

// Bus fans logged entries out to subscribers.
type Bus struct {
	mu     sync.Mutex
	subs   map[int]*busSub
	next   int
	closed bool
	secret func(agentID, runID string) string
}

type busSub struct {
	agent  string // "" = all
	ch     chan Event
	deltas bool
}

const busBuffer = 4096

// New returns a bus with no subscribers.
func New() *Bus { return &Bus{subs: map[int]*busSub{}} }

// SetSecret sets the function that gives a live run.waiting's resume
// secret (shown once, to the subscribers of that moment); nil: none.
func (b *Bus) SetSecret(secret func(agentID, runID string) string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.secret = secret
}

func (b *Bus) Subscribe(agentID string) (<-chan Event, func()) {
	return b.SubscribeWith(agentID, false)
}

// SubscribeWith subscribes to logged entries and, with deltas, to the
// response text of turns as it streams.
func (b *Bus) SubscribeWith(agentID string, deltas bool) (<-chan Event, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan Event, busBuffer)
	if b.closed {
		close(ch)
		return ch, func() {}
	}
	id := b.next
	b.next++
	b.subs[id] = &busSub{agent: agentID, ch: ch, deltas: deltas}
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if s, ok := b.subs[id]; ok {
			delete(b.subs, id)
			close(s.ch)
		}
	}
}

// Publish sends entries just made durable in agentID's log.
func (b *Bus) Publish(agentID string, es []eventlog.Entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs) == 0 {
		return
	}
	for _, e := range es {
		ev := Event{AgentID: agentID, Entry: e}
		if e.Event == schema.RunWaiting && b.secret != nil {
			ev.Token = b.secret(agentID, runIDOf(e))
		}
		for id, s := range b.subs {
			if s.agent != "" && s.agent != agentID {
				continue
			}
			select {
			case s.ch <- ev:
			default:
				delete(b.subs, id)
				close(s.ch)
			}
		}
	}
}

// Close ends every subscription; later ones end at once.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for id, s := range b.subs {
		delete(b.subs, id)
		close(s.ch)
	}
}

func runIDOf(e eventlog.Entry) string {
	var d struct {
		RunID string `json:"run_id"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return ""
	}
	return d.RunID
}

// Signal lets waiters learn that live state changed (a turn ended, an
// agent was terminated): Wait returns a channel closed by the next Fire.
// The zero value is ready to use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns a channel closed by the next Fire.
func (s *Signal) Wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Fire closes the channel Wait returned.
func (s *Signal) Fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// PublishDelta sends streamed response text to the subscribers that asked
// for deltas. A subscriber that does not keep up loses its subscription.
func (b *Bus) PublishDelta(agentID, runID, text string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, s := range b.subs {
		if !s.deltas || (s.agent != "" && s.agent != agentID) {
			continue
		}
		select {
		case s.ch <- Event{AgentID: agentID, Delta: text, RunID: runID}:
		default:
			delete(b.subs, id)
			close(s.ch)
		}
	}
}
