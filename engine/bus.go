package engine

import (
	"sync"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
)

// LiveEvent is one logged entry as events.subscribe streams it.
type LiveEvent struct {
	AgentID string
	Entry   eventlog.Entry
	// Token is set on a live run.waiting: the resume secret, shown once.
	Token string
	// Delta, when set, is streamed response text of run RunID (not a log
	// entry: Entry is zero). Only subscribers that asked for deltas get it.
	Delta string
	RunID string
}

// eventBus fans logged entries out to subscribers. A subscriber that does
// not keep up loses its subscription (its channel is closed) rather than
// slowing the logs down.
type eventBus struct {
	mu     sync.Mutex
	subs   map[int]*busSub
	next   int
	closed bool
	secret func(agentID, runID string) string
}

type busSub struct {
	agent  string // "" = all
	ch     chan LiveEvent
	deltas bool
}

const busBuffer = 4096

func newEventBus() *eventBus { return &eventBus{subs: map[int]*busSub{}} }

func (b *eventBus) subscribe(agentID string) (<-chan LiveEvent, func()) {
	return b.subscribeWith(agentID, false)
}

// subscribeWith subscribes to logged entries and, with deltas, to the
// response text of turns as it streams.
func (b *eventBus) subscribeWith(agentID string, deltas bool) (<-chan LiveEvent, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan LiveEvent, busBuffer)
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

func (b *eventBus) publish(agentID string, es []eventlog.Entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs) == 0 {
		return
	}
	for _, e := range es {
		ev := LiveEvent{AgentID: agentID, Entry: e}
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

func (b *eventBus) close() {
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
	if decode(e, &d) != nil {
		return ""
	}
	return d.RunID
}

// changeSignal lets waiters learn that live state changed (a turn ended, an
// agent was terminated): wait returns a channel closed by the next fire.
type changeSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *changeSignal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *changeSignal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// publishDelta sends streamed response text to the subscribers that asked
// for deltas. A subscriber that does not keep up loses its subscription.
func (b *eventBus) publishDelta(agentID, runID, text string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, s := range b.subs {
		if !s.deltas || (s.agent != "" && s.agent != agentID) {
			continue
		}
		select {
		case s.ch <- LiveEvent{AgentID: agentID, Delta: text, RunID: runID}:
		default:
			delete(b.subs, id)
			close(s.ch)
		}
	}
}
