package multiplexer

// Lease is a caller's hold on a live session. The session cannot be evicted
// until the lease is released or discarded. The first of Release and Discard
// takes effect; later calls do nothing.
type Lease[S any] struct {
	m    *Mux[S]
	e    *entry[S]
	done bool // guarded by m.mu
}

// ID returns the session id.
func (l *Lease[S]) ID() string { return l.e.id }

// Value returns the live session.
func (l *Lease[S]) Value() S { return l.e.value }

// Release returns the session to its pool as the most recently used idle
// session and wakes the pool's head waiter. If the pool was shrunk below its
// live count, Release evicts the surplus before returning.
func (l *Lease[S]) Release() {
	l.m.mu.Lock()
	trims := l.releaseLocked()
	l.m.mu.Unlock()
	l.m.runTrims(trims)
}

func (l *Lease[S]) releaseLocked() []*entry[S] {
	m := l.m
	if l.done {
		return nil
	}
	l.done = true
	e := l.e
	p := e.pool
	if m.entries[e.id] != e || e.state != stateHeld {
		return nil
	}
	e.state = stateIdle
	p.held--
	e.elem = p.lru.PushBack(e)
	return m.settleLocked(p)
}

// Discard drops the session from its pool without evicting it (its process
// died, or it was suspended for a wait); the caller stops it. The slot is
// free on return.
func (l *Lease[S]) Discard() {
	m := l.m
	m.mu.Lock()
	if l.done {
		m.mu.Unlock()
		return
	}
	l.done = true
	e := l.e
	p := e.pool
	if m.entries[e.id] != e || e.state != stateHeld {
		m.mu.Unlock()
		return
	}
	delete(m.entries, e.id)
	e.state = stateGone
	p.held--
	p.used--
	trims := m.settleLocked(p)
	m.mu.Unlock()
	m.runTrims(trims)
}
