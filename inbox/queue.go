package inbox

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Queue is one agent's inbox: a FIFO of messages, safe for concurrent use.
// The zero value is an empty, unbounded queue.
type Queue struct {
	mu     sync.Mutex
	max    int
	msgs   []Message
	ids    map[string]struct{}
	bytes  int64   // payload bytes queued (Message.Size)
	held   int64   // payload bytes held in memory (not spilled)
	totals *Totals // shared counters this queue adds to, if attached
}

// Totals counts the messages and payload bytes of every queue attached to
// it, so that a daemon can bound its pending messages in total. Safe for
// concurrent use; the zero value is ready.
type Totals struct {
	count atomic.Int64
	bytes atomic.Int64
	// held counts the payload bytes the attached queues hold in memory;
	// over heldMax (when set, SetHeldMax), a message pushed with a Ref
	// is kept without its payload (Message.Spill), which is read back
	// from its log when it is shown.
	held    atomic.Int64
	heldMax atomic.Int64
}

// SetHeldMax bounds the payload bytes the attached queues hold in memory
// (0: no bound): a message pushed past it keeps only its envelope.
func (t *Totals) SetHeldMax(n int64) { t.heldMax.Store(n) }

// Held is the payload bytes the attached queues hold in memory.
func (t *Totals) Held() int64 { return t.held.Load() }

// spills reports whether a payload of n bytes pushed now is over the
// bound.
func (t *Totals) spills(n int64) bool {
	if t == nil {
		return false
	}
	max := t.heldMax.Load()
	return max > 0 && t.held.Load()+n > max
}

func (t *Totals) addHeld(n int64) {
	if t != nil {
		t.held.Add(n)
	}
}

// Count is the number of messages in the attached queues.
func (t *Totals) Count() int64 { return t.count.Load() }

// Bytes is the payload bytes of the messages in the attached queues.
func (t *Totals) Bytes() int64 { return t.bytes.Load() }

func (t *Totals) add(n, b int64) {
	if t != nil {
		t.count.Add(n)
		t.bytes.Add(b)
	}
}

// Attach makes q count its messages in t from now on (its current ones
// included); nil detaches it (its messages no longer count).
func (q *Queue) Attach(t *Totals) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.totals == t {
		return
	}
	q.totals.add(-int64(len(q.msgs)), -q.bytes)
	q.totals.addHeld(-q.held)
	q.totals = t
	t.add(int64(len(q.msgs)), q.bytes)
	t.addHeld(q.held)
}

// Bytes returns the payload bytes of the queued messages (Message.Size).
func (q *Queue) Bytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}

// NewQueue returns an empty queue holding at most max messages; max <= 0
// means unbounded.
func NewQueue(max int) *Queue {
	return &Queue{max: max}
}

// Push appends m (without its payload when the attached Totals hold as
// much in memory as they may, SetHeldMax). It fails, leaving the queue unchanged, when m is invalid
// (ErrInvalidMessage), when a message with the same id is already queued
// (ErrDuplicate; replaying a log is then harmless) or when the queue is at
// its bound (ErrFull). Callers that use an unbounded queue and valid,
// unique messages may ignore the result.
func (q *Queue) Push(m Message) error {
	if err := m.Validate(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.ids[m.ID]; ok {
		return fmt.Errorf("%w: message %s is already in the inbox of %s", ErrDuplicate, m.ID, m.Recipient)
	}
	if q.max > 0 && len(q.msgs) >= q.max {
		return fmt.Errorf("%w: the inbox of %s holds %d messages, its limit; it takes more once the agent reads some",
			ErrFull, m.Recipient, q.max)
	}
	if q.ids == nil {
		q.ids = make(map[string]struct{})
	}
	q.ids[m.ID] = struct{}{}
	if !m.Spilled() && q.totals.spills(int64(len(m.Payload))) {
		m = m.Spill() // (a message without a Ref keeps its payload)
	}
	q.msgs = append(q.msgs, m.Clone())
	q.bytes += int64(m.Size())
	q.totals.add(1, int64(m.Size()))
	if !m.Spilled() {
		q.held += int64(len(m.Payload))
		q.totals.addHeld(int64(len(m.Payload)))
	}
	return nil
}

// Peek returns a copy of the queued messages, oldest first, without
// removing them.
func (q *Queue) Peek() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Message, len(q.msgs))
	for i, m := range q.msgs {
		out[i] = m.Clone()
	}
	return out
}

// Len returns the number of queued messages.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

// Has reports whether a message with this id is queued.
func (q *Queue) Has(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.ids[id]
	return ok
}

// Take removes exactly the messages with the given ids and returns them in
// queue order; ids not queued are ignored. The other messages keep their
// order. A turn takes the messages its prompt showed, so messages that
// arrived during the turn stay for the next one.
func (q *Queue) Take(ids []string) []Message {
	if len(ids) == 0 {
		return nil
	}
	want := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		want[id] = struct{}{}
	}
	return q.Collect(func(m Message) bool {
		_, ok := want[m.ID]
		return ok
	})
}

// Collect removes the messages match selects and returns them in queue
// order; the others keep their order. match runs with the queue locked and
// must not call the queue; a nil match selects nothing.
func (q *Queue) Collect(match func(Message) bool) []Message {
	if match == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var taken []Message
	kept := q.msgs[:0]
	for _, m := range q.msgs {
		if match(m) {
			taken = append(taken, m)
			delete(q.ids, m.ID)
			q.bytes -= int64(m.Size())
			q.totals.add(-1, -int64(m.Size()))
			if !m.Spilled() {
				q.held -= int64(len(m.Payload))
				q.totals.addHeld(-int64(len(m.Payload)))
			}
		} else {
			kept = append(kept, m)
		}
	}
	clear(q.msgs[len(kept):])
	q.msgs = kept
	return taken
}

// Drain removes and returns every queued message, oldest first.
func (q *Queue) Drain() []Message {
	return q.Collect(func(Message) bool { return true })
}

// PeekAfter returns copies of up to limit queued messages whose Ref.Seq is
// greater than seq, in queue order (limit <= 0: all of them).
func (q *Queue) PeekAfter(seq uint64, limit int) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []Message
	for _, m := range q.msgs {
		if limit > 0 && len(out) >= limit {
			break
		}
		if m.Ref.Seq > seq {
			out = append(out, m.Clone())
		}
	}
	return out
}

// PeekFirst returns copies of the oldest messages, at most maxCount of them
// and, after the first, only while their payloads total at most maxBytes
// (<= 0: no bound).
func (q *Queue) PeekFirst(maxCount int, maxBytes int64) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []Message
	var total int64
	for _, m := range q.msgs {
		if maxCount > 0 && len(out) >= maxCount {
			break
		}
		total += int64(m.Size())
		if len(out) > 0 && maxBytes > 0 && total > maxBytes {
			break
		}
		out = append(out, m.Clone())
	}
	return out
}
