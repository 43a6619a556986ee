package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/warren-dev/warren/provider"
)

// A closed door runs nothing; an open one runs the call; a call that
// suspends the run ends the attempt (the attempt's toolAttempt records
// the suspension: TestSuspensionByACredentialCallEndsTheAttempt); a call
// the attempt's end cut off says so; Close does not return while a call
// is in flight.
func TestDoor(t *testing.T) {
	var d callDoor
	ran := false
	if _, st, _ := d.Call(context.Background(), func(context.Context) (map[string]any, error) { ran = true; return nil, nil }); st != doorClosed || ran {
		t.Fatalf("closed door: status %v, ran %v", st, ran)
	}
	actx, suspend := context.WithCancelCause(context.Background())
	d.Open(actx, suspend)
	res, st, err := d.Call(context.Background(), func(context.Context) (map[string]any, error) { return map[string]any{"ok": true}, nil })
	if st != doorJoined || err != nil || res["ok"] != true {
		t.Fatalf("joined call: %v %v %v", res, st, err)
	}
	plain := errors.New("tool failed")
	if _, st, err := d.Call(context.Background(), func(context.Context) (map[string]any, error) { return nil, plain }); st != doorJoined || err != plain {
		t.Fatalf("a call's own error: %v %v", st, err)
	}
	susp := fmt.Errorf("await_input: %w", provider.ErrRunSuspended)
	if _, st, _ := d.Call(context.Background(), func(context.Context) (map[string]any, error) { return nil, susp }); st != doorSuspended {
		t.Fatalf("suspending call: status %v", st)
	}
	if !errors.Is(context.Cause(actx), provider.ErrRunSuspended) {
		t.Fatal("the attempt was not ended by the suspending call")
	}
	if _, st, _ := d.Call(context.Background(), func(ctx context.Context) (map[string]any, error) { <-ctx.Done(); return nil, ctx.Err() }); st != doorEnded {
		t.Fatalf("call cut off by the attempt's end: status %v", st)
	}
	started, release := make(chan struct{}), make(chan struct{})
	d2 := &callDoor{}
	d2.Open(context.Background(), func(error) {})
	go d2.Call(context.Background(), func(context.Context) (map[string]any, error) { close(started); <-release; return nil, nil })
	<-started
	closed := make(chan struct{})
	go func() { d2.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a call was in flight")
	default:
	}
	close(release)
	<-closed
}
