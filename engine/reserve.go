package engine

import (
	"sync"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tree"
)

// The room of messages checked and not yet appended is held in c.resv
// (reservations, below, says why): checkSend reserves it, appendMessage
// and the tools' unreserve give it back.

// landed reports whether the message id is already in recipient's inbox
// (its append applied, its reservation not yet released). It runs under
// c.resv's lock.
func (c *Core) landed(recipient, id string) bool {
	if recipient == tree.User {
		return c.user.Has(id)
	}
	a, ok := c.agent(recipient)
	if !ok {
		return true // gone: its reservation no longer holds room anywhere
	}
	has, _, _ := a.Inbox(id)
	return has
}

// reserveRoom checks that m fits in its recipient's inbox and in the
// daemon's totals (checkRoom), counting the messages reserved and not yet
// landed, and reserves its room until unreserve(m.ID).
func (c *Core) reserveRoom(m inbox.Message, view roomView) error {
	return c.resv.Reserve(m, view, c.landed, func(n int, b int64, tn, tb int64) error {
		return c.checkRoom(m.Recipient, n, b, len(m.Payload), tn, tb)
	})
}

// reserveUserRoom is reserveRoom for a message to the USER inbox.
func (c *Core) reserveUserRoom(m inbox.Message) error {
	u := c.user
	return c.reserveRoom(m, func(reserved func(has func(id string) bool) (int, int64)) (n int, b int64, rn int, rb int64) {
		u.View(func(count int, bytes int64, has func(id string) bool) {
			n, b = count, bytes
			rn, rb = reserved(has)
		})
		return n, b, rn, rb
	})
}

// unreserve ends the reservation of message id (a no-op when it has none).
func (c *Core) unreserve(id string) { c.resv.Release(id) }

// The reservations hold the room of messages checked against the inbox
// limits and not yet appended (issue 16, "memory bounded by design").
//
// A message is checked against the limits some time before its
// message.enqueued is appended: a tool call checks it, logs the call in the
// sender's log and the message in the recipient's at the same time.
// Without a reservation, concurrent sends that all passed the check before
// any append landed took an inbox, or the daemon's total, past its limit.
// The check (reservations.Reserve) counts the messages checked and not yet in their
// recipient's inbox and reserves the room of the message it passes, under
// one lock, so the limits hold exactly under concurrency. The reservation
// ends (reservations.Release) when the append returns (the message is then in the
// inbox, or failed) or when the caller drops the message.
//
// # Locks
//
// The reservations' mutex is held across Reserve, including its calls of the view,
// landed and check functions the caller passes: those may take the
// caller's locks (the engine's roster lock, the record's lock, the USER inbox's
// lock), never the Set's (so the engine's lock order has reserve's lock
// outside them: resv.mu -> roster.mu | the record's lock | the inbox's lock).

// reservations are the reserved messages by id. The zero value is empty and ready.
type reservations struct {
	mu sync.Mutex
	m  map[string]reserved
}

type reserved struct {
	recipient string
	size      int64
}

// roomView returns, in one consistent view (under the recipient inbox's
// lock), the inbox's count and payload bytes, and what reserved returns
// for it: reserved counts the reservations for the recipient, other than
// the checked message's, that have not landed in it (has says whether a
// message id is in the inbox).
type roomView func(reserved func(has func(id string) bool) (n int, b int64)) (n int, b int64, rn int, rb int64)

// Reserve checks that m fits in its recipient's inbox and in the daemon's
// totals, counting the other messages reserved and not yet landed; when
// it fits, it reserves m's room until Release(m.ID). landed reports
// whether a message id is already in a recipient's inbox (its append
// applied, its reservation not yet released; true for a recipient that is
// gone). check gets the inbox's count and bytes with its reservations,
// then the totals of the reservations for other recipients, and returns
// the limit's error. A message already reserved passes at once (a step's
// second look: it holds its room).
func (s *reservations) Reserve(m inbox.Message, view roomView, landed func(recipient, id string) bool,
	check func(n int, b int64, tn, tb int64) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[m.ID]; ok {
		return nil
	}
	n, b, rn, rb := view(func(has func(id string) bool) (int, int64) {
		return s.reservedFor(m.Recipient, m.ID, has)
	})
	// The totals: every other reservation not landed counts. Landed is read
	// before the totals (check), so a message landing in between counts
	// twice (a refusal at the very edge), never not at all.
	tn, tb := int64(rn), rb
	for id, r := range s.m {
		if r.recipient != m.Recipient && !landed(r.recipient, id) {
			tn++
			tb += r.size
		}
	}
	if err := check(n+rn, b+rb, tn, tb); err != nil {
		return err
	}
	if s.m == nil {
		s.m = map[string]reserved{}
	}
	s.m[m.ID] = reserved{recipient: m.Recipient, size: int64(len(m.Payload))}
	return nil
}

// reservedFor counts the reservations for recipient other than except's
// that have not landed; the caller holds s.mu.
func (s *reservations) reservedFor(recipient, except string, landed func(id string) bool) (n int, b int64) {
	for id, r := range s.m {
		if r.recipient == recipient && id != except && !landed(id) {
			n++
			b += r.size
		}
	}
	return n, b
}

// Release ends the reservation of message id (a no-op when it has none).
func (s *reservations) Release(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// Len is how many messages hold a reservation.
func (s *reservations) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
