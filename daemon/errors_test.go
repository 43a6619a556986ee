package daemon

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/protocol"
)

// TestWireCodes: each domain condition, wrapped with context as the core
// wraps it, gets its code at the edge with the message unchanged.
func TestWireCodes(t *testing.T) {
	cases := []struct {
		name string
		err  error
		code int
	}{
		{"not found", failf(ErrNotFound, "agent %q not found", "x"), protocol.CodeNotFound},
		{"invalid", failf(ErrInvalid, "message is too long"), protocol.CodeInvalid},
		{"wrong state", failf(ErrWrongState, "agent a is mid-turn"), protocol.CodeInvalid},
		{"token rejected", failf(ErrTokenRejected, "token rejected"), protocol.CodeTokenRejected},
		{"unavailable", failf(ErrUnavailable, "try again"), protocol.CodeUnavailable},
		{"shutting down", failf(ErrShuttingDown, "daemon is shutting down"), protocol.CodeUnavailable},
		{"no slot", failf(ErrNoSlot, "no provider slot became free in time"), protocol.CodeUnavailable},
		{"wrapped twice", fmt.Errorf("outer: %w", failf(ErrNotFound, "inner")), protocol.CodeNotFound},
		// The condition wins over a cause in the chain.
		{"condition over cause", failf(ErrInvalid, "bad model: %w", context.DeadlineExceeded), protocol.CodeInvalid},
		{"param error", protocol.Errorf(protocol.CodeInvalid, "param x: missing"), protocol.CodeInvalid},
		{"deadline", fmt.Errorf("waiting: %w", context.DeadlineExceeded), protocol.CodeUnavailable},
		{"canceled", context.Canceled, protocol.CodeUnavailable},
		{"poisoned log", fmt.Errorf("append: %w", eventlog.ErrPoisoned), protocol.CodeUnavailable},
		{"other", errors.New("disk on fire"), protocol.CodeInternal},
	}
	for _, tc := range cases {
		pe := toRPCError(tc.err)
		if pe.Code != tc.code {
			t.Errorf("%s: code %d (%s), want %d (%s)", tc.name, pe.Code, protocol.CodeName(pe.Code), tc.code, protocol.CodeName(tc.code))
		}
		if pe.Message != tc.err.Error() {
			t.Errorf("%s: message %q, want the error's text %q", tc.name, pe.Message, tc.err.Error())
		}
	}
}

// TestFailfKeepsChain: failf's error matches its condition and the %w
// cause, and reads as formatted.
func TestFailfKeepsChain(t *testing.T) {
	err := failf(ErrShuttingDown, "stopping: %w", context.Canceled)
	if !errors.Is(err, ErrShuttingDown) || !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("chain lost: %v", err)
	}
	if errors.Is(err, ErrInvalid) {
		t.Fatal("matches a condition it does not hold")
	}
	if err.Error() != "stopping: context canceled" {
		t.Fatalf("text = %q", err.Error())
	}
}

// TestCoreErrorsThroughEdge: the core returns errors matching the
// sentinels, and the edge (Handle) gives their codes.
func TestCoreErrorsThroughEdge(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.c.Resolve("nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Resolve(unknown) = %v, want ErrNotFound", err)
	}
	id := h.create("a", "", "echo")
	if _, err := h.c.Resume(ctx, id, "tok_x.AAAA", "yes"); !errors.Is(err, ErrTokenRejected) {
		t.Fatalf("Resume(no wait) = %v, want ErrTokenRejected", err)
	}
	if err := h.c.Cancel(ctx, id); !errors.Is(err, ErrWrongState) {
		t.Fatalf("Cancel(idle) = %v, want ErrWrongState", err)
	}
	rpc := &handler{c: h.c}
	for _, tc := range []struct {
		method string
		params protocol.Params
		code   int
	}{
		{"agent.inspect", protocol.Params{"agent_id": "nobody"}, protocol.CodeNotFound},
		{"agent.resume", protocol.Params{"agent_id": id, "token": "tok_x.AAAA", "response": "y"}, protocol.CodeTokenRejected},
		{"agent.cancel", protocol.Params{"agent_id": id}, protocol.CodeInvalid},
	} {
		_, err := rpc.Handle(ctx, &protocol.Request{Method: tc.method, Params: tc.params}, nil)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != tc.code {
			t.Errorf("%s: %v, want code %d", tc.method, err, tc.code)
		}
	}
}

// inspectMap is agent.inspect's reply for an agent, as the edge builds it.
func inspectMap(c *Core, id string) (map[string]any, error) {
	d, err := c.Inspect(id)
	if err != nil {
		return nil, err
	}
	return detailMap(d), nil
}
