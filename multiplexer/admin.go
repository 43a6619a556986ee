package multiplexer

import (
	"context"
	"errors"
	"fmt"
)

// Remove drops a released (idle) session from its pool without evicting it
// and returns it so the caller can stop it (termination). It reports false
// if the session is not idle in any pool.
func (m *Mux[S]) Remove(id string) (S, bool) {
	m.mu.Lock()
	e := m.entries[id]
	if e == nil || e.state != stateIdle {
		m.mu.Unlock()
		var zero S
		return zero, false
	}
	p := e.pool
	p.lru.Remove(e.elem)
	e.elem = nil
	delete(m.entries, id)
	e.state = stateGone
	p.used--
	trims := m.settleLocked(p)
	m.mu.Unlock()
	m.runTrims(trims)
	return e.value, true
}

// Evict forces the eviction of a released session through the EvictFunc.
// It fails with ErrBusy if the session is held, being opened or already
// being evicted, and with ErrNotLive if it is not live. An EvictFunc error is
// returned; the session is dropped from its pool either way.
func (m *Mux[S]) Evict(ctx context.Context, id string) error {
	m.mu.Lock()
	e := m.entries[id]
	if e == nil {
		m.mu.Unlock()
		return fmt.Errorf("multiplexer: evict session %s: %w", id, ErrNotLive)
	}
	if e.state != stateIdle {
		m.mu.Unlock()
		return fmt.Errorf("multiplexer: evict session %s: %w: it is held or already being evicted", id, ErrBusy)
	}
	m.markTrimLocked(e)
	m.mu.Unlock()
	return m.evictOne(ctx, e, true)
}

func (m *Mux[S]) markTrimLocked(e *entry[S]) {
	e.pool.lru.Remove(e.elem)
	e.elem = nil
	e.state = stateEvicting
	e.pool.trimming++
}

// EvictAll evicts every released session of every pool (shutdown: save the
// provider state of each). Held sessions are left alone; release them first.
// It returns the EvictFunc errors joined.
func (m *Mux[S]) EvictAll(ctx context.Context) error {
	m.mu.Lock()
	var victims []*entry[S]
	for _, p := range m.pools {
		for p.lru.Len() > 0 {
			e := p.lru.Front().Value.(*entry[S])
			m.markTrimLocked(e)
			victims = append(victims, e)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, v := range victims {
		if err := m.evictOne(ctx, v, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetConfig applies new pools and provider mappings live. Shrinking a pool
// evicts released sessions beyond the new limit before SetConfig returns;
// growing one grants the new slots to waiters.
func (m *Mux[S]) SetConfig(cfg Config) {
	m.mu.Lock()
	m.applyConfigLocked(cfg)
	var trims []*entry[S]
	for _, p := range m.pools {
		trims = append(trims, m.settleLocked(p)...)
	}
	m.mu.Unlock()
	m.runTrims(trims)
}

// Config returns a copy of the config in force.
func (m *Mux[S]) Config() Config {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.clone()
}

// Stats describes every pool that is configured or still holds sessions.
func (m *Mux[S]) Stats() map[string]PoolStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]PoolStats, len(m.pools))
	for name, p := range m.pools {
		if _, ok := m.cfg.Pools[name]; !ok && p.used == 0 && p.waiters.Len() == 0 {
			continue
		}
		out[name] = PoolStats{Slots: p.limit, Live: p.used, Held: p.held, Waiting: p.waiters.Len()}
	}
	return out
}

// Live reports whether the session is live in a pool (held or idle).
func (m *Mux[S]) Live(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[id]
	return e != nil && (e.state == stateHeld || e.state == stateIdle)
}

// PoolOf reports the pool the live session occupies.
func (m *Mux[S]) PoolOf(id string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[id]
	if e == nil {
		return "", false
	}
	return e.pool.name, true
}
