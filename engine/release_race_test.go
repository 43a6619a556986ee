package engine

import (
	"errors"
	"github.com/warren-dev/warren/schema"
	"testing"
)

// TestReleaseBetweenClaimAndTurnStopsTheTurn: an agent released (its log
// fenced or its lease lost) after a turn claimed it but before the turn
// set its cancel function runs no turn: nothing is logged for it and the
// caller is told the agent is no longer run here. Before the fix the
// release found no turn to cancel and the turn ran to its end.
func TestReleaseBetweenClaimAndTurnStopsTheTurn(t *testing.T) {
	h := newHarness(t)
	id := h.create("solo", "", "echo")
	a, _ := h.c.agent(id)
	if err := a.Claim(); err != nil {
		t.Fatal(err)
	}
	h.c.releaseAgent(id, errors.New("the lease was lost (test)"))
	res := <-h.c.startTurn(a, TurnRequest{Prompt: "hello"})
	if !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("turn after a release: err %v, response %q; want ErrUnavailable", res.Err, res.Response)
	}
	if n := h.count(id, schema.TurnStart); n != 0 {
		t.Fatalf("%d turn.start logged for a released agent; want 0", n)
	}
	l := look(a, func(_ *projection, l liveFlags) liveFlags { return l })
	if l.Busy || l.Running {
		t.Fatalf("agent left busy=%v cur=%v after the refused turn", l.Busy, l.Running)
	}
}
