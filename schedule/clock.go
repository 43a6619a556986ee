package schedule

import (
	"context"
	"time"
)

// Clock tells the time and runs funcs later on that time.
type Clock interface {
	// Now is the current time on this clock.
	Now() time.Time
	// AfterFunc runs f once d has passed on this clock (as soon as it can
	// for d <= 0), unless the returned Timer is stopped first. f never runs
	// inside AfterFunc or Timer.Stop: their callers may hold locks f takes.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a func armed on a Clock.
type Timer interface {
	// Stop prevents the func from running; it reports whether it did (false:
	// it had started already or the timer was stopped).
	Stop() bool
}

// Real returns the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Sleep waits until d has passed on clock, or until ctx ends (then it
// returns ctx.Err()).
func Sleep(ctx context.Context, clock Clock, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	done := make(chan struct{})
	t := clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}
