// Package claims holds the store leases (store.Lease) a daemon's engine
// holds, one per agent log it writes and one for the USER inbox, and the
// rules by which it claims agents on a cluster store (docs/DECISIONS.md,
// "Failover between daemons"): a claim it holds is reused while it is not
// lost; a lease that can be lost is watched, and its loss is reported
// (the engine then releases the agent: no turn of it runs here again); a
// daemon that finds the USER inbox held stands by until it can claim and
// open it (StandBy, Open: standby.go); a takeover
// scan claims the agents nobody holds, leaving a subtree to its parent's
// daemon (Claimable, which learns parents through ParentOf). An append
// the store fences (store.ErrFenced: another daemon claimed the agent
// first) reports the claim lost as a lapsed lease does (Fenced).
//
// On the local store every claim is the home lock's and none is lost; the
// engine calls Own all the same, so one path serves both stores.
//
// # Goroutines and locks
//
// A Set's mutex is a leaf, held across a claim request to the store (so
// two claims of one id never race) and for its bookkeeping; Lost and the
// functions Claimable is given are called without it. Each lease that can
// be lost is watched by a goroutine of the Set's own, which calls Lost at
// most once and ends with the Set's context (the engine cancels it after
// its turns have stopped, at Close).
package claims

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/store"
)

// Owner makes claims (store.Store has it).
type Owner interface {
	Own(ctx context.Context, id string) (store.Lease, error)
}

// Options configures a Set. Owner and Ctx are required.
type Options struct {
	Owner Owner
	// Ctx bounds every claim request and ends the watches of leases.
	Ctx context.Context
	// Lost is told, once per lease, that the claim on id was lost.
	Lost   func(id string)
	Logger hclog.Logger
	// Holder, when set, names the node holding id's lease ("" when it
	// lapsed; released when its holder gave it up): an id this Set found
	// held by another daemon is claimed only once it has stayed lapsed
	// for Grace, or at once when it was released (grace.go).
	Holder func(ctx context.Context, id string) (node string, released bool, err error)
	Grace  time.Duration
	// Now is the clock of the grace (default time.Now).
	Now func() time.Time
}

// Set is the claims a daemon holds, by agent id.
type Set struct {
	opts Options
	mu   sync.Mutex
	m    map[string]held
	// seenHeld are the ids a claim found held by another daemon, with
	// when their lease was first seen lapsed since (zero: not yet).
	seenHeld map[string]time.Time
	// leases mirrors m's leases for Expired, which a turn and a tool call
	// ask without waiting on mu (held across claim requests to the store).
	leases sync.Map // id -> store.Lease
}

// held is a claim the Set holds: its lease and the end of its watch.
type held struct {
	lease store.Lease
	stop  context.CancelFunc // ends the watch of a lease that can be lost
}

// New returns an empty Set.
func New(opts Options) *Set {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Lost == nil {
		opts.Lost = func(string) {}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Set{opts: opts, seenHeld: map[string]time.Time{}}
}

// Own claims id, reusing a claim the Set holds that is not lost; limit
// bounds the claim request (0: none). A lease that can be lost is
// watched: losing it calls Options.Lost.
func (s *Set) Own(id string, limit time.Duration) (store.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.m[id]; ok {
		select {
		case <-h.lease.Lost():
			h.stop()
		default:
			return h.lease, nil
		}
	}
	ctx := s.opts.Ctx
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	if err := s.inGrace(ctx, id); err != nil {
		return nil, err
	}
	l, err := s.opts.Owner.Own(ctx, id)
	if errors.Is(err, store.ErrOwned) {
		s.seenHeld[id] = time.Time{}
	}
	if err != nil {
		return nil, err
	}
	delete(s.seenHeld, id)
	if s.m == nil {
		s.m = map[string]held{}
	}
	wctx, stop := context.WithCancel(s.opts.Ctx)
	s.m[id] = held{lease: l, stop: stop}
	s.leases.Store(id, l)
	if lost := l.Lost(); lost != nil {
		go func() {
			select {
			case <-lost:
				s.opts.Lost(id)
			case <-wctx.Done(): // dropped, released, or the Set's context ended
			}
		}()
	}
	return l, nil
}

// Expired reports whether the claim on id is past its expiry at now
// without a renewal (paused), or lost. An id not held, or held for good
// (the local store), is neither.
func (s *Set) Expired(id string, now time.Time) (paused, lost bool) {
	v, ok := s.leases.Load(id)
	if !ok {
		return false, false
	}
	l := v.(store.Lease)
	select {
	case <-l.Lost():
		return false, true
	default:
	}
	exp := l.Expires()
	return !exp.IsZero() && now.After(exp), false
}

// Holds reports whether the Set holds a claim on id (lost or not).
func (s *Set) Holds(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, held := s.m[id]
	return held
}

// Drop gives up the claim on id, if held (another daemon may claim it at
// once), waiting at most 5 s for the store.
func (s *Set) Drop(ctx context.Context, id string) {
	s.mu.Lock()
	h, ok := s.m[id]
	delete(s.m, id)
	s.leases.Delete(id)
	s.mu.Unlock()
	if !ok {
		return
	}
	h.stop()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := h.lease.Release(ctx); err != nil {
		s.opts.Logger.Warn("releasing the claim on an agent", "agent", id, "err", err)
	}
}

// ReleaseAll gives up every claim (the engine's Close, after the logs are
// closed), so that another daemon may claim the agents at once.
func (s *Set) ReleaseAll(ctx context.Context) {
	s.mu.Lock()
	m := s.m
	s.m = nil
	s.leases.Clear()
	s.mu.Unlock()
	for id, h := range m {
		h.stop()
		if err := h.lease.Release(ctx); err != nil {
			s.opts.Logger.Warn("releasing the claim on an agent", "agent", id, "err", err)
		}
	}
}

// Claimable claims, of the agents ids of a cluster store, those the
// daemon does not know (known: it runs them, knows they terminated, or
// holds a claim), each within limit. Those held by another daemon are left
// out, and so is a claimed agent whose parent's log exists but is held
// elsewhere (its claim is given back: a subtree goes to its parent's
// daemon, which writes the messages between them); parentOf names an
// agent's parent ("" for a root). An id whose claim fails otherwise (the
// cluster did not answer in time) is left for the next scan. take is in
// the order of ids; elsewhere lists the ids left out: their agents exist
// (another daemon runs them, or will be taken later).
func (s *Set) Claimable(ctx context.Context, ids []string, limit time.Duration, known func(id string) bool, parentOf func(id string) string) (take, elsewhere []string) {
	inStore := make(map[string]bool, len(ids))
	for _, id := range ids {
		inStore[id] = true
	}
	took := map[string]bool{}
	for _, id := range ids {
		if known(id) {
			continue
		}
		if _, err := s.Own(id, limit); err != nil {
			if !errors.Is(err, store.ErrOwned) {
				s.opts.Logger.Warn("claiming an agent failed; the next takeover scan tries again", "agent", id, "err", err)
			}
			elsewhere = append(elsewhere, id)
			continue
		}
		took[id] = true
	}
	parents := parentsOf(took, parentOf)
	for changed := true; changed; {
		changed = false
		for id := range took {
			p := parents[id]
			if p == "" || took[p] || known(p) || !inStore[p] {
				continue
			}
			delete(took, id)
			s.Drop(ctx, id)
			elsewhere = append(elsewhere, id)
			changed = true
		}
	}
	for _, id := range ids {
		if took[id] {
			take = append(take, id)
		}
	}
	return take, elsewhere
}

// parentLookups bounds the parent lookups in flight: each is a request to
// the cluster (a log's first entry), answered in a few milliseconds.
const parentLookups = 16

// parentsOf looks up the parent of every id in ids, concurrently.
func parentsOf(ids map[string]bool, parentOf func(id string) string) map[string]string {
	parents := make(map[string]string, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, parentLookups)
	for id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			p := parentOf(id)
			<-sem
			mu.Lock()
			parents[id] = p
			mu.Unlock()
		}()
	}
	wg.Wait()
	return parents
}
