package claims

import (
	"context"
	"fmt"
	"time"

	"github.com/warren-dev/warren/store"
)

// The grace of a lapsed lease. A daemon whose owners bucket elects a new
// leader cannot renew its leases meanwhile; the new leader may expire
// keys whose last renewal is older than the TTL before the holder's next
// attempt reaches it. Nothing then tells a standby from a holder that is
// alive and retrying: both find the key free. So an id this Set has
// found held by another daemon is claimed only once it has been seen
// lapsed for Options.Grace: the holder, retrying every fraction of a
// second, writes it back first and keeps its agents; a dead holder's
// agents move Grace later. An id never found held (a new agent, the
// agents of a daemon that died before this one started) is claimed at
// once, and so is one its holder released (a clean stop deletes its keys).
// Safety never rests on this: the log's fence does.

// inGrace returns an error wrapping store.ErrOwned while id, found held
// before, has not stayed lapsed for Grace. The caller holds s.mu.
func (s *Set) inGrace(ctx context.Context, id string) error {
	since, seen := s.seenHeld[id]
	if !seen || s.opts.Holder == nil || s.opts.Grace <= 0 {
		return nil
	}
	node, released, err := s.opts.Holder(ctx, id)
	if err != nil {
		return fmt.Errorf("reading who holds %s: %w", id, err)
	}
	if released {
		return nil // given up by its holder (a clean stop): claimed at once
	}
	if node != "" {
		s.seenHeld[id] = time.Time{}
		return fmt.Errorf("%s is held by node %s: %w", id, node, store.ErrOwned)
	}
	now := s.opts.Now()
	if since.IsZero() {
		s.seenHeld[id] = now
		since = now
	}
	if left := s.opts.Grace - now.Sub(since); left > 0 {
		return fmt.Errorf("the lease on %s lapsed %s ago; it is claimed once it has stayed lapsed %s (its holder may be riding out a leader election): %w",
			id, now.Sub(since).Round(time.Millisecond), s.opts.Grace, store.ErrOwned)
	}
	return nil
}
