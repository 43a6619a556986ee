package multiplexer

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// Errors callers test with errors.Is.
var (
	// ErrNoSlot: every slot of the pool stayed held until the caller's
	// context was done (the daemon maps it to error code 6).
	ErrNoSlot = errors.New("no free session slot")
	// ErrBusy: the session is held by another caller (mid-turn) or is being
	// opened.
	ErrBusy = errors.New("session is busy")
	// ErrNotLive: the session has no live slot in any pool.
	ErrNotLive = errors.New("session is not live")
	// ErrUnknownPool: the provider maps to a pool that is not configured.
	ErrUnknownPool = errors.New("unknown session pool")
)

// Config names the pools and maps providers to them.
type Config struct {
	// Pools maps a pool name to its slot limit.
	Pools map[string]int
	// ProviderPools maps a provider name to a pool name.
	ProviderPools map[string]string
	// DefaultPool is the pool of providers not in ProviderPools.
	DefaultPool string
}

// PoolOf returns the pool name the provider uses under this config.
func (c Config) PoolOf(provider string) string {
	if p, ok := c.ProviderPools[provider]; ok {
		return p
	}
	return c.DefaultPool
}

func (c Config) clone() Config {
	return Config{Pools: maps.Clone(c.Pools), ProviderPools: maps.Clone(c.ProviderPools), DefaultPool: c.DefaultPool}
}

// EvictFunc evicts a live session: save its state, log, stop it. It must
// stop the session even when it returns an error; the mux forgets the
// session either way.
type EvictFunc[S any] func(ctx context.Context, id string, s S) error

// PoolStats describes one pool.
type PoolStats struct {
	Slots   int // the limit
	Live    int // occupied slots: opening, held, idle and being evicted
	Held    int // sessions being opened or leased (not evictable)
	Waiting int // Acquire calls queued for a slot
}

type entryState int

const (
	stateOpening entryState = iota
	stateHeld
	stateIdle
	stateEvicting
	stateGone
)

type entry[S any] struct {
	id    string
	pool  *pool[S]
	state entryState
	value S
	elem  *list.Element // in pool.lru while idle
	done  chan struct{} // closed when an eviction finishes
}

type waiter[S any] struct {
	id     string
	ch     chan struct{} // closed when woken
	woken  bool
	entry  *entry[S] // reserved entry when a slot was granted
	victim *entry[S] // idle session to evict for that slot, if any
	elem   *list.Element
}

type pool[S any] struct {
	name     string
	limit    int
	used     int // occupied slots (see PoolStats.Live), plus granted reservations
	held     int
	trimming int        // evictions in flight that free a slot (not handed over)
	lru      *list.List // of *entry[S], front = least recently released
	waiters  *list.List // of *waiter[S], FIFO
}

// Mux is a set of LRU pools of live sessions. Safe for concurrent use.
type Mux[S any] struct {
	mu      sync.Mutex
	cfg     Config
	pools   map[string]*pool[S]
	entries map[string]*entry[S]
	evict   EvictFunc[S]
	logger  hclog.Logger

	// Test hooks, run without the lock when set: hookQueued after an
	// Acquire joined a pool's wait queue, hookEvictWait before it waits for
	// the eviction of its session, hookWoken after a queued Acquire was
	// woken or its context ended.
	hookQueued    func(pool, id string)
	hookEvictWait func(id string)
	hookWoken     func(id string)
}

// New returns a mux with the given pools. evict may be nil (sessions are
// then dropped without any action); logger may be nil.
func New[S any](cfg Config, evict EvictFunc[S], logger hclog.Logger) *Mux[S] {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	m := &Mux[S]{
		pools:   make(map[string]*pool[S]),
		entries: make(map[string]*entry[S]),
		evict:   evict,
		logger:  logger,
	}
	m.applyConfigLocked(cfg)
	return m
}

func (m *Mux[S]) applyConfigLocked(cfg Config) {
	m.cfg = cfg.clone()
	for name, p := range m.pools {
		if _, ok := m.cfg.Pools[name]; !ok {
			p.limit = 0
		}
	}
	for name, n := range m.cfg.Pools {
		p := m.pools[name]
		if p == nil {
			p = &pool[S]{name: name, lru: list.New(), waiters: list.New()}
			m.pools[name] = p
		}
		p.limit = max(n, 0)
	}
}

// poolForLocked resolves the provider's pool.
func (m *Mux[S]) poolForLocked(provider string) (*pool[S], error) {
	name := m.cfg.PoolOf(provider)
	if _, ok := m.cfg.Pools[name]; !ok {
		return nil, fmt.Errorf("%w: provider %q uses pool %q, which is not configured; add it to \"pools\" in the config", ErrUnknownPool, provider, name)
	}
	return m.pools[name], nil
}

func (m *Mux[S]) newEntryLocked(id string, p *pool[S]) *entry[S] {
	e := &entry[S]{id: id, pool: p, state: stateOpening, done: make(chan struct{})}
	m.entries[id] = e
	p.held++
	return e
}

// Acquire leases the live session id, opening it (with open, called outside
// the mux lock) in a slot of the provider's pool if it is not live. See the
// package documentation for the waiting and eviction rules.
func (m *Mux[S]) Acquire(ctx context.Context, id, providerName string, open func(ctx context.Context) (S, error)) (*Lease[S], error) {
	if open == nil {
		return nil, errors.New("multiplexer: Acquire needs an open function")
	}
	m.mu.Lock()
	for {
		if e := m.entries[id]; e != nil {
			switch e.state {
			case stateIdle:
				e.pool.lru.Remove(e.elem)
				e.elem = nil
				e.state = stateHeld
				e.pool.held++
				m.mu.Unlock()
				return &Lease[S]{m: m, e: e}, nil
			case stateEvicting:
				done := e.done
				hook := m.hookEvictWait
				m.mu.Unlock()
				if hook != nil {
					hook(id)
				}
				select {
				case <-done:
				case <-ctx.Done():
					return nil, fmt.Errorf("%w: session %s is being evicted: %w", ErrNoSlot, id, ctx.Err())
				}
				m.mu.Lock()
				continue
			default:
				m.mu.Unlock()
				return nil, fmt.Errorf("%w: session %s is in use by another turn; retry when it finishes", ErrBusy, id)
			}
		}
		p, err := m.poolForLocked(providerName)
		if err != nil {
			m.mu.Unlock()
			return nil, fmt.Errorf("multiplexer: acquire session %s: %w", id, err)
		}
		if p.waiters.Len() == 0 {
			if p.used < p.limit {
				p.used++
				e := m.newEntryLocked(id, p)
				m.mu.Unlock()
				return m.fill(ctx, e, nil, open)
			}
			if victim := m.takeVictimLocked(p); victim != nil {
				e := m.newEntryLocked(id, p)
				m.mu.Unlock()
				return m.fill(ctx, e, victim, open)
			}
		}
		w := &waiter[S]{id: id, ch: make(chan struct{})}
		w.elem = p.waiters.PushBack(w)
		hook := m.hookQueued
		m.mu.Unlock()
		if hook != nil {
			hook(p.name, id)
		}
		select {
		case <-w.ch:
		case <-ctx.Done():
		}
		if m.hookWoken != nil {
			m.hookWoken(id)
		}
		m.mu.Lock()
		if !w.woken {
			p.waiters.Remove(w.elem)
			n := p.limit
			m.mu.Unlock()
			return nil, fmt.Errorf("%w: all %d slots of pool %q stayed held (retry later, or raise pools.%s in the config): %w", ErrNoSlot, n, p.name, p.name, ctx.Err())
		}
		if w.entry == nil {
			continue // the session became live meanwhile: look again
		}
		if err := ctx.Err(); err != nil {
			m.returnGrantLocked(w)
			trims := m.settleLocked(p)
			m.mu.Unlock()
			m.runTrims(trims)
			return nil, fmt.Errorf("%w: pool %q: %w", ErrNoSlot, p.name, err)
		}
		m.mu.Unlock()
		return m.fill(ctx, w.entry, w.victim, open)
	}
}

// takeVictimLocked takes the least recently released idle session of p for
// a slot hand-over, if the pool is not over its limit.
func (m *Mux[S]) takeVictimLocked(p *pool[S]) *entry[S] {
	if p.used-p.trimming > p.limit || p.lru.Len() == 0 {
		return nil
	}
	v := p.lru.Remove(p.lru.Front()).(*entry[S])
	v.elem = nil
	v.state = stateEvicting
	return v
}

// returnGrantLocked gives back what settle granted to a waiter that gave up.
func (m *Mux[S]) returnGrantLocked(w *waiter[S]) {
	p := w.entry.pool
	delete(m.entries, w.entry.id)
	w.entry.state = stateGone
	p.held--
	if v := w.victim; v != nil {
		v.state = stateIdle
		v.elem = p.lru.PushFront(v)
		// Acquire calls waiting for its eviction look again.
		close(v.done)
		v.done = make(chan struct{})
	} else {
		p.used--
	}
}

// fill evicts the victim (if any) whose slot e takes over, then opens the
// session into e.
func (m *Mux[S]) fill(ctx context.Context, e *entry[S], victim *entry[S], open func(context.Context) (S, error)) (*Lease[S], error) {
	if victim != nil {
		_ = m.evictOne(context.WithoutCancel(ctx), victim, false)
	}
	v, err := callOpen(ctx, open)
	m.mu.Lock()
	p := e.pool
	if err != nil {
		delete(m.entries, e.id)
		e.state = stateGone
		p.held--
		p.used--
		trims := m.settleLocked(p)
		m.mu.Unlock()
		m.runTrims(trims)
		return nil, fmt.Errorf("multiplexer: open session %s: %w", e.id, err)
	}
	e.value = v
	e.state = stateHeld
	m.mu.Unlock()
	return &Lease[S]{m: m, e: e}, nil
}

func callOpen[S any](ctx context.Context, open func(context.Context) (S, error)) (v S, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("open callback panicked: %v", r)
		}
	}()
	return open(ctx)
}

// evictOne runs the EvictFunc for a victim already in stateEvicting, then
// forgets it. freeSlot says whether its slot becomes free (a trim or a forced
// eviction) or was handed to a reserved entry.
func (m *Mux[S]) evictOne(ctx context.Context, v *entry[S], freeSlot bool) error {
	err := m.callEvict(ctx, v)
	if err != nil {
		m.logger.Error("evicting session failed; it is dropped from its pool", "session", v.id, "pool", v.pool.name, "error", err)
		err = fmt.Errorf("multiplexer: evict session %s: %w", v.id, err)
	} else {
		m.logger.Debug("evicted session", "session", v.id, "pool", v.pool.name)
	}
	m.mu.Lock()
	p := v.pool
	if m.entries[v.id] == v {
		delete(m.entries, v.id)
	}
	v.state = stateGone
	close(v.done)
	var trims []*entry[S]
	if freeSlot {
		p.used--
		p.trimming--
		trims = m.settleLocked(p)
	}
	m.mu.Unlock()
	m.runTrims(trims)
	return err
}

func (m *Mux[S]) callEvict(ctx context.Context, v *entry[S]) (err error) {
	if m.evict == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("evict callback panicked: %v", r)
		}
	}()
	return m.evict(ctx, v.id, v.value)
}

// settleLocked restores the pool's invariants after a change: it picks idle
// sessions to evict while the pool is over its limit (returned; the caller
// evicts them outside the lock with runTrims) and grants capacity to waiters
// in FIFO order.
func (m *Mux[S]) settleLocked(p *pool[S]) []*entry[S] {
	var trims []*entry[S]
	for p.used-p.trimming > p.limit && p.lru.Len() > 0 {
		v := p.lru.Remove(p.lru.Front()).(*entry[S])
		v.elem = nil
		v.state = stateEvicting
		p.trimming++
		trims = append(trims, v)
	}
	for p.waiters.Len() > 0 {
		w := p.waiters.Front().Value.(*waiter[S])
		switch {
		case m.entries[w.id] != nil:
			// Its session became live (or busy) meanwhile; it looks again.
		case p.used < p.limit:
			p.used++
			w.entry = m.newEntryLocked(w.id, p)
		default:
			v := m.takeVictimLocked(p)
			if v == nil {
				return trims
			}
			w.victim = v
			w.entry = m.newEntryLocked(w.id, p)
		}
		p.waiters.Remove(w.elem)
		w.woken = true
		close(w.ch)
	}
	return trims
}

// runTrims evicts sessions picked by settleLocked, freeing their slots.
func (m *Mux[S]) runTrims(trims []*entry[S]) {
	for _, v := range trims {
		_ = m.evictOne(context.Background(), v, true)
	}
}
