package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/warren-dev/warren/provider"
)

// The door by which a tool call made over the socket
// with an agent's credential (the MCP bridge of an agent CLI) joins the
// attempt of the agent's turn in progress, so that it is logged, routed
// and replayed like the provider's own calls (engine/agentauth.go; the
// call itself runs in the attempt's toolAttempt).
//
// The door is open while an attempt runs (Open, Close). A call that joins
// ends when its request or the attempt ends; Close refuses further calls
// and waits for those in flight, so their tool.call entries precede the
// end of the attempt. A call that suspends the run (await_input) ends the
// attempt through the suspend function the attempt gave; the attempt's
// toolAttempt records the suspension (suspendedBy), as for every call.
//
// # Locks
//
// A callDoor's mutex is a leaf, held only for its bookkeeping, never across
// the call.

// callDoor admits calls into one attempt. The zero value is closed.
type callDoor struct {
	mu       sync.Mutex
	open     bool
	ctx      context.Context         // the attempt's
	suspend  context.CancelCauseFunc // ends the attempt when a call suspends the run
	inflight sync.WaitGroup
}

// Open lets calls join the attempt whose context is ctx until Close;
// suspend ends the attempt.
func (d *callDoor) Open(ctx context.Context, suspend context.CancelCauseFunc) {
	d.mu.Lock()
	d.open, d.ctx, d.suspend = true, ctx, suspend
	d.mu.Unlock()
}

// Close refuses further calls and waits for those in flight.
func (d *callDoor) Close() {
	d.mu.Lock()
	d.open = false
	d.mu.Unlock()
	d.inflight.Wait()
}

// doorStatus says how a call through the door went.
type doorStatus int

const (
	// Joined: the call ran in the attempt (its own error, if any, is
	// returned as it is).
	doorJoined doorStatus = iota
	// Closed: no attempt takes calls; the call did not run.
	doorClosed
	// Suspended: the call suspended the run (the error wraps
	// provider.ErrRunSuspended); the attempt ends now.
	doorSuspended
	// Ended: the call failed because the attempt ended during it.
	doorEnded
)

// Call runs call as the attempt's next call, with a context that ends
// when ctx (the request) or the attempt ends.
func (d *callDoor) Call(ctx context.Context, call func(ctx context.Context) (map[string]any, error)) (map[string]any, doorStatus, error) {
	d.mu.Lock()
	if !d.open {
		d.mu.Unlock()
		return nil, doorClosed, nil
	}
	d.inflight.Add(1)
	actx, suspend := d.ctx, d.suspend
	d.mu.Unlock()
	defer d.inflight.Done()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(actx, cancel)
	defer stop()
	res, err := call(cctx)
	switch {
	case errors.Is(err, provider.ErrRunSuspended):
		suspend(err)
		return nil, doorSuspended, err
	case err != nil && actx.Err() != nil:
		return nil, doorEnded, err
	}
	return res, doorJoined, err
}
