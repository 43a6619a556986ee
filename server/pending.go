package server

import (
	"container/list"
	"net"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// pendingConn is an accepted connection whose first request has not
// arrived whole. It holds no slot; it sits in Server.pending (oldest
// first) until it leaves (first request read) or is evicted.
type pendingConn struct {
	c        *net.UnixConn
	el       *list.Element
	accepted time.Time
	gone     bool // left the list: admitted or evicted
	evicted  bool
}

// addPending registers c as pending, evicting the oldest pending
// connection when MaxPending is reached. Nil once shutting down.
func (s *Server) addPending(c *net.UnixConn) *pendingConn {
	p := &pendingConn{c: c, accepted: time.Now()}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	var victim *pendingConn
	if s.pending.Len() >= s.cfg.MaxPending {
		victim = s.pending.Remove(s.pending.Front()).(*pendingConn)
		victim.gone, victim.evicted = true, true
		s.evicted++
	}
	p.el = s.pending.PushBack(p)
	s.wg.Add(1)
	s.conns[c] = nil
	evicted := s.evicted
	s.mu.Unlock()
	if victim != nil {
		victim.c.Close()
		// Logged at the first eviction and then every 1000th, so a flood
		// cannot flood the log.
		if evicted == 1 || evicted%1000 == 0 {
			s.log.Warn("too many connections without a request; closing the oldest ones",
				"max_pending", s.cfg.MaxPending, "closed_so_far", evicted)
		}
	}
	return p
}

// leavePending takes p off the pending list once its first request has
// arrived; false if it was evicted meanwhile (its connection is closed).
func (s *Server) leavePending(p *pendingConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.gone {
		return !p.evicted
	}
	s.pending.Remove(p.el)
	p.gone = true
	return true
}

// dropPending takes p off the pending list when its connection ends before
// its first request arrived.
func (s *Server) dropPending(p *pendingConn) { s.leavePending(p) }

// firstRequestDeadline is when p's whole first request must have arrived
// (zero: no bound).
func (s *Server) firstRequestDeadline(p *pendingConn) time.Time {
	if s.cfg.FirstRequestTimeout <= 0 {
		return time.Time{}
	}
	return p.accepted.Add(s.cfg.FirstRequestTimeout)
}

// earliest returns the earlier of two deadlines, zero meaning none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// takeSlot admits a connection whose first request is method: a slot, or
// for a control method a reserved place when every slot is taken (control
// is then true: the connection serves that one request and ends). It
// returns the release function, or nil when the connection must be
// refused.
func (s *Server) takeSlot(method string) (release func(), control bool) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, false
	default:
	}
	if s.cfg.ControlMethods[method] {
		select {
		case s.control <- struct{}{}:
			return func() { <-s.control }, true
		default:
		}
	}
	return nil, false
}

// refuseBusy answers a connection that found no slot with a code-6 error
// frame (nil id, in its framing) and closes it; at most maxRefusing
// connections are answered at once, further ones are just closed.
func (s *Server) refuseBusy(c *net.UnixConn, native bool) {
	s.log.Warn("connection limit reached; refusing connection", "max_conns", s.cfg.MaxConns)
	select {
	case s.refusing <- struct{}{}:
	default:
		return // the caller closes c
	}
	defer func() { <-s.refusing }()
	s.writeRefusal(c, native, protocol.Errorf(protocol.CodeUnavailable,
		"too many connections to the daemon (limit %d); retry later", s.cfg.MaxConns))
	closeAfterReply(c)
}
