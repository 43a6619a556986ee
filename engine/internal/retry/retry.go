// Package retry runs the attempts of one turn (SPEC 7): a transient
// provider error (provider.IsTransient, or the turn timeout) is retried
// with exponential backoff and jitter, at least the delay the provider
// asked for (Retry-After), up to Policy.MaxRetries retries, and never once
// output of the turn reached a client. It also says when the provider
// session must not be kept for the next turn (Outcome.Discard): after a
// suspension, a cancellation, a timeout, a transient error given up on, or
// a call whose tool.call could not be logged.
//
// The engine gives it the attempt (one send on the live session) and what
// to do before each retry (log turn.retry, tell the client); the loop runs
// on the turn's goroutine and takes no lock.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/warren-dev/warren/provider"
)

// Policy is how a turn's attempts are retried.
type Policy struct {
	MaxRetries int
	// Base is the first delay (500 ms when not positive), doubled per retry,
	// scaled by a jitter factor in [0.5, 1.5) and capped at 5 min.
	Base time.Duration
	// Timeout is the turn timeout, named in the error of an attempt it
	// ended.
	Timeout time.Duration
	Jitter  func() float64
	Sleep   func(ctx context.Context, d time.Duration) error
}

// Try is how one attempt ended.
type Try struct {
	Response string
	Err      error
	// TimedOut: the turn timeout ended it.
	TimedOut bool
	// DrainFailed: a call's tool.call could not be logged (Err says why);
	// the provider session counts the turn as done, the log does not.
	DrainFailed bool
}

// Outcome is how the attempts ended.
type Outcome struct {
	Response string
	Attempts int
	Err      error
	// Discard: the provider session must not be kept.
	Discard bool
}

// Run runs attempt until it succeeds or fails for good. delivered reports
// whether output of the turn reached a client (no retry then); before
// each retry, retrying is called with the attempt that failed, its error
// and the delay (its error ends the loop).
func (p Policy) Run(ctx context.Context, attempt func() Try, delivered func() bool,
	retrying func(attempt int, err error, delay time.Duration) error) Outcome {
	discard := false
	for n := 1; ; n++ {
		t := attempt()
		if t.DrainFailed {
			discard = true
		}
		err := t.Err
		if err == nil {
			return Outcome{Response: t.Response, Attempts: n, Discard: discard}
		}
		if errors.Is(err, provider.ErrRunSuspended) {
			return Outcome{Attempts: n, Err: err, Discard: true}
		}
		if ctx.Err() != nil {
			return Outcome{Attempts: n, Err: ctx.Err(), Discard: true}
		}
		transient, retryAfter := provider.IsTransient(err)
		if t.TimedOut {
			transient = true
			err = fmt.Errorf("turn timed out after %s: %w", p.Timeout, err)
			discard = true
		}
		if !transient || delivered() || n > p.MaxRetries {
			return Outcome{Attempts: n, Err: err, Discard: discard || transient}
		}
		delay := Backoff(p.Base, n, p.Jitter())
		if retryAfter > delay {
			delay = retryAfter
		}
		if rerr := retrying(n, err, delay); rerr != nil {
			return Outcome{Attempts: n, Err: rerr, Discard: discard}
		}
		if serr := p.Sleep(ctx, delay); serr != nil {
			return Outcome{Attempts: n, Err: serr, Discard: discard}
		}
	}
}

// Backoff is base*2^(attempt-1), scaled by a jitter factor in [0.5, 1.5),
// capped at 5 min; base is 500 ms when not positive.
func Backoff(base time.Duration, attempt int, jitter float64) time.Duration {
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	d := float64(base) * math.Pow(2, float64(attempt-1))
	d *= 0.5 + jitter
	if d > float64(5*time.Minute) {
		d = float64(5 * time.Minute)
	}
	return time.Duration(d)
}
