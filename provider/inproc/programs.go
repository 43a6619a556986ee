package inproc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/warren-dev/warren/provider"
)

// ErrInjected is wrapped by the errors FailTransient and FailPermanent
// produce, so tests can tell injected failures from real ones.
var ErrInjected = errors.New("inproc injected failure")

// Echo is the built-in "echo" program: it responds "echo: <prompt>".
func Echo(_ context.Context, t *Turn) (string, error) {
	return "echo: " + t.Prompt, nil
}

// The programs below (Reply, FailTransient, FailPermanent, Delay, Block,
// Signal, Sequence) are kept for tests: the daemon's tests script turns
// with them; the daemon's own registry serves only Echo.

// Reply returns a program that always responds text.
func Reply(text string) Program {
	return func(context.Context, *Turn) (string, error) { return text, nil }
}

// FailTransient returns a program whose first n calls fail with a transient
// provider error (with the given Retry-After, 0 for none) and whose later
// calls run prog. The count is shared by every session running the program.
func FailTransient(n int, retryAfter time.Duration, prog Program) Program {
	var mu sync.Mutex
	calls := 0
	return func(ctx context.Context, t *Turn) (string, error) {
		mu.Lock()
		calls++
		k := calls
		mu.Unlock()
		if k <= n {
			return "", provider.Transient(fmt.Errorf("%w: transient failure %d of %d", ErrInjected, k, n), retryAfter)
		}
		return run(ctx, t, prog)
	}
}

// FailPermanent returns a program that runs prog (when not nil) for its side
// effects (tool calls, chunks) and then fails the turn with a permanent
// provider error, discarding prog's response. An error from prog is
// returned as the permanent error's cause.
func FailPermanent(prog Program) Program {
	return func(ctx context.Context, t *Turn) (string, error) {
		if prog != nil {
			if _, err := prog(ctx, t); err != nil {
				return "", provider.Permanent(fmt.Errorf("%w: %w", ErrInjected, err))
			}
		}
		return "", provider.Permanent(fmt.Errorf("%w: permanent failure of model %q", ErrInjected, t.Model))
	}
}

// Delay returns a program that waits d (or until ctx is done, returning an
// error wrapping ctx.Err()) and then runs prog.
func Delay(d time.Duration, prog Program) Program {
	return func(ctx context.Context, t *Turn) (string, error) {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return "", fmt.Errorf("inproc delay interrupted: %w", ctx.Err())
		}
		return run(ctx, t, prog)
	}
}

// Block returns a program that waits until release yields a value or is
// closed (or until ctx is done, returning an error wrapping ctx.Err()) and
// then runs prog. Closing release lets every blocked turn through; sending
// one value lets one turn through.
func Block(release <-chan struct{}, prog Program) Program {
	return func(ctx context.Context, t *Turn) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return "", fmt.Errorf("inproc block interrupted: %w", ctx.Err())
		}
		return run(ctx, t, prog)
	}
}

// Signal returns a program that sends the turn on started (waiting for a
// receiver, or until ctx is done) and then runs prog: tests use it to know
// a turn has begun, for example before cancelling it or evicting others.
func Signal(started chan<- *Turn, prog Program) Program {
	return func(ctx context.Context, t *Turn) (string, error) {
		select {
		case started <- t:
		case <-ctx.Done():
			return "", fmt.Errorf("inproc signal interrupted: %w", ctx.Err())
		}
		return run(ctx, t, prog)
	}
}

// Sequence returns a program whose k-th call runs progs[k-1]. Calls beyond
// the last program fail with a permanent error, so an unexpected extra turn
// is visible. The position is shared by every session running the program.
func Sequence(progs ...Program) Program {
	var mu sync.Mutex
	next := 0
	return func(ctx context.Context, t *Turn) (string, error) {
		mu.Lock()
		k := next
		next++
		mu.Unlock()
		if k >= len(progs) {
			return "", provider.Permanent(fmt.Errorf("inproc sequence for model %q exhausted: call %d, only %d programs", t.Model, k+1, len(progs)))
		}
		return run(ctx, t, progs[k])
	}
}

// run runs prog, treating nil as Echo.
func run(ctx context.Context, t *Turn, prog Program) (string, error) {
	if prog == nil {
		return Echo(ctx, t)
	}
	return prog(ctx, t)
}
