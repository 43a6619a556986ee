package schedule

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestFakeFiresInDueOrder: whatever the delays and however the time is
// advanced, timers fire in order of due time, ties in the order they were
// armed, each seeing Now equal to its due time, and only once due.
func TestFakeFiresInDueOrder(t *testing.T) {
	params := gopter.DefaultTestParameters()
	params.MinSuccessfulTests = 300
	props := gopter.NewProperties(params)
	props.Property("due order", prop.ForAll(
		func(delays []int, steps []int) bool {
			f := NewFake(t0)
			type fired struct {
				i   int
				now time.Time
			}
			var got []fired
			for i, d := range delays {
				f.AfterFunc(time.Duration(d)*time.Second, func() { got = append(got, fired{i, f.Now()}) })
			}
			for _, s := range steps {
				before := len(got)
				f.Advance(time.Duration(s) * time.Second)
				for _, g := range got[before:] {
					if g.now.After(f.Now()) {
						return false // fired before it was due
					}
				}
			}
			f.Advance(time.Hour) // everything
			want := make([]int, len(delays))
			for i := range want {
				want[i] = i
			}
			sort.SliceStable(want, func(a, b int) bool { return max(delays[want[a]], 0) < max(delays[want[b]], 0) })
			if len(got) != len(want) {
				return false
			}
			for k := range want {
				if got[k].i != want[k] || !got[k].now.Equal(t0.Add(time.Duration(max(delays[want[k]], 0))*time.Second)) {
					return false
				}
			}
			return f.Pending() == 0
		},
		gen.SliceOf(gen.IntRange(-2, 20)),
		gen.SliceOf(gen.IntRange(0, 7)),
	))
	props.TestingRun(t)
}

func TestFakeAdvanceTable(t *testing.T) {
	cases := []struct {
		name    string
		delays  []time.Duration
		advance time.Duration
		want    []int
	}{
		{"nothing due", []time.Duration{time.Second}, 999 * time.Millisecond, nil},
		{"due exactly at the new time", []time.Duration{time.Second}, time.Second, []int{0}},
		{"past and zero delays fire on Advance(0)", []time.Duration{-time.Second, 0, time.Nanosecond}, 0, []int{0, 1}},
		{"ties fire in arming order", []time.Duration{2 * time.Second, time.Second, 2 * time.Second, time.Second}, 2 * time.Second, []int{1, 3, 0, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := NewFake(t0)
			var got []int
			for i, d := range c.delays {
				f.AfterFunc(d, func() { got = append(got, i) })
			}
			f.Advance(c.advance)
			if len(got) != len(c.want) {
				t.Fatalf("fired %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("fired %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestFakeFiresTimersArmedByCallbacksWithinTheAdvance(t *testing.T) {
	f := NewFake(t0)
	var at []time.Time
	var tick func()
	tick = func() {
		at = append(at, f.Now())
		f.AfterFunc(time.Second, tick)
	}
	f.AfterFunc(time.Second, tick)
	f.Advance(3500 * time.Millisecond)
	if len(at) != 3 || !at[2].Equal(t0.Add(3*time.Second)) {
		t.Fatalf("a repeating timer fired at %v within 3.5s, want 1s, 2s, 3s", at)
	}
	if !f.Now().Equal(t0.Add(3500 * time.Millisecond)) {
		t.Fatalf("Now after Advance = %v", f.Now())
	}
	if next, ok := f.Next(); !ok || !next.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("Next = %v %v, want the 4s re-arm", next, ok)
	}
}

func TestFakeStoppedTimerNeverFires(t *testing.T) {
	f := NewFake(t0)
	fired := false
	tm := f.AfterFunc(time.Second, func() { fired = true })
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if tm.Stop() {
		t.Fatal("a second Stop reported true")
	}
	f.Advance(time.Hour)
	if fired {
		t.Fatal("a stopped timer fired")
	}
	f.Set(t0) // never backwards
	if !f.Now().Equal(t0.Add(time.Hour)) {
		t.Fatalf("Set to an earlier time moved the clock back to %v", f.Now())
	}
}

func TestSleepOnFakeClock(t *testing.T) {
	f := NewFake(t0)
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), f, time.Minute) }()
	f.BlockUntil(1)
	f.Advance(59 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("Sleep(1m) returned after 59s: %v", err)
	default:
	}
	f.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Sleep: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- Sleep(ctx, f, time.Minute) }()
	f.BlockUntil(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep after cancel = %v, want context.Canceled", err)
	}
	if n := f.Pending(); n != 0 {
		t.Fatalf("a cancelled Sleep left %d timers armed", n)
	}
}

// TestConcurrentAdvancesAddUp: Advance moves the clock by d from where the
// previous Advance left it, even one still firing callbacks when it was
// called.
func TestConcurrentAdvancesAddUp(t *testing.T) {
	f := NewFake(t0)
	entered, release := make(chan struct{}), make(chan struct{})
	f.AfterFunc(time.Second, func() { close(entered); <-release })
	first := make(chan struct{})
	go func() { f.Advance(10 * time.Second); close(first) }()
	<-entered // the first Advance holds at t0+1s on its way to t0+10s
	second := make(chan struct{})
	go func() { f.Advance(time.Second); close(second) }()
	// No event says the second Advance has been called and is waiting; give
	// it time to (the result must not depend on it).
	time.Sleep(10 * time.Millisecond)
	close(release)
	<-first
	<-second
	if got := f.Now().Sub(t0); got != 11*time.Second {
		t.Fatalf("Advance(10s) then, during it, Advance(1s): clock at t0+%v, want t0+11s", got)
	}
}
