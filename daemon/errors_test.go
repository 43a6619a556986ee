package daemon

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/warren-dev/warren/engine"
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
		{"not found", failf(engine.ErrNotFound, "agent %q not found", "x"), protocol.CodeNotFound},
		{"invalid", failf(engine.ErrInvalid, "message is too long"), protocol.CodeInvalid},
		{"wrong state", failf(engine.ErrWrongState, "agent a is mid-turn"), protocol.CodeInvalid},
		{"token rejected", failf(engine.ErrTokenRejected, "token rejected"), protocol.CodeTokenRejected},
		{"unavailable", failf(engine.ErrUnavailable, "try again"), protocol.CodeUnavailable},
		{"shutting down", failf(engine.ErrShuttingDown, "daemon is shutting down"), protocol.CodeUnavailable},
		{"no slot", failf(engine.ErrNoSlot, "no provider slot became free in time"), protocol.CodeUnavailable},
		{"wrapped twice", fmt.Errorf("outer: %w", failf(engine.ErrNotFound, "inner")), protocol.CodeNotFound},
		// The condition wins over a cause in the chain.
		{"condition over cause", failf(engine.ErrInvalid, "bad model: %w", context.DeadlineExceeded), protocol.CodeInvalid},
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

// TestCoreErrorsThroughEdge: the core returns errors matching the
// sentinels, and the edge (Handle) gives their codes.
func TestCoreErrorsThroughEdge(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.c.Resolve("nobody"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Resolve(unknown) = %v, want ErrNotFound", err)
	}
	id := h.create("a", "", "echo")
	if _, err := h.c.Resume(ctx, id, "tok_x.AAAA", "yes"); !errors.Is(err, engine.ErrTokenRejected) {
		t.Fatalf("Resume(no wait) = %v, want ErrTokenRejected", err)
	}
	if err := h.c.Cancel(ctx, id); !errors.Is(err, engine.ErrWrongState) {
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

// failf builds a domain error the way the engine's failf does (its text is
// the formatted message; its chain holds the condition and any %w cause),
// so the table above reads like the core's own errors.
func failf(kind error, format string, args ...any) error {
	return &domainErr{kind: kind, err: fmt.Errorf(format, args...)}
}

type domainErr struct{ kind, err error }

func (e *domainErr) Error() string   { return e.err.Error() }
func (e *domainErr) Unwrap() []error { return []error{e.kind, e.err} }
