// Package multiplexer keeps live provider sessions in named pools of bounded
// size (SPEC section 5). It is generic over the session value S and knows
// nothing about providers: the daemon supplies an open function per
// acquisition and one EvictFunc (save the provider blob in session.json, log
// suspend.result, stop the provider session).
//
// # Model
//
// Every pool has a slot limit. A slot is occupied by a session that is being
// opened, held (mid-turn, leased to a caller), idle (released, on the pool's
// LRU list) or being evicted. Provider names map to pools through
// Config.ProviderPools; unmapped providers use Config.DefaultPool.
//
//   - Acquire of an idle session takes it off the LRU list and leases it.
//     Acquire of a session that is held or being opened fails with ErrBusy.
//     Acquire of a session that is being evicted waits for the eviction to
//     finish and then opens it again.
//   - Otherwise a slot is reserved: a free one if the pool is below its limit,
//     else the least recently released idle session of that pool is evicted
//     and its slot is handed directly to the caller (nobody else can take it
//     in between). Eviction and open run outside the mux lock; the number of
//     occupied slots never exceeds the limit.
//   - If every slot is held the caller waits in FIFO order (per pool) until a
//     slot can be reserved for it or its context is done; then the error
//     wraps ErrNoSlot and ctx.Err(). Capacity is granted to the head waiter
//     directly, so a newcomer never overtakes a waiter. A waiter whose own
//     session became live meanwhile is woken without a slot and looks again
//     (taking it if idle, ErrBusy if held), joining the queue's tail if it
//     must wait once more.
//   - Held sessions are never evicted. Pools evict independently.
//
// # Eviction failures
//
// An EvictFunc must release the session's resources (stop it) even when it
// returns an error: whatever happens, the mux stops tracking the victim. An
// eviction error is logged (and returned by Evict/EvictAll); the victim's slot
// counts as free only after the EvictFunc has returned. Evictions that make
// room for an Acquire run with context.WithoutCancel of the caller's context:
// saving a session's state is not abandoned because the requester gave up.
//
// # Resizing
//
// SetConfig applies new limits at once. Shrinking evicts idle sessions
// (least recently released first) until the pool is within its limit; held
// sessions above the limit are evicted when they are released (Release then
// blocks for that eviction). Growing grants the new slots to waiters. A pool
// missing from the new config gets limit 0: its sessions drain as they are
// released and new acquisitions for it fail with ErrUnknownPool.
//
// A panicking open or evict callback is turned into an error; the mux stays
// consistent. The mux starts no goroutines.
package multiplexer
