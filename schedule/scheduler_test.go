package schedule

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestArmReplacesAndCancelStops(t *testing.T) {
	f := NewFake(t0)
	s := New(f)
	var got []string
	s.Arm("a", "r1", t0.Add(time.Second), func() { got = append(got, "first") })
	s.Arm("a", "r1", t0.Add(2*time.Second), func() { got = append(got, "second") })
	s.Arm("a", "r2", t0.Add(time.Second), func() { got = append(got, "r2") })
	s.Arm("b", "r1", t0.Add(time.Second), func() { got = append(got, "b") })
	s.At(t0.Add(time.Second), func() { got = append(got, "anon") })
	if !s.Cancel("a", "r2") {
		t.Fatal("Cancel of a pending timer reported false")
	}
	if s.Cancel("a", "r2") {
		t.Fatal("a second Cancel reported true")
	}
	if n := s.CancelOwner("b"); n != 1 {
		t.Fatalf("CancelOwner(b) = %d, want 1", n)
	}
	if n := s.Pending(); n != 2 {
		t.Fatalf("Pending = %d, want 2 (the re-armed r1 and the anonymous one)", n)
	}
	f.Advance(time.Hour)
	if len(got) != 2 || got[0] != "anon" || got[1] != "second" {
		t.Fatalf("fired %v, want [anon second]", got)
	}
	if s.Cancel("a", "r1") {
		t.Fatal("Cancel of a fired timer reported true")
	}
}

// TestReminderFiresOnceAndRepeatsOnlyWhenReArmed: a one-shot keyed timer
// fires once however far the clock moves; a callback that re-arms itself
// fires once per period.
func TestReminderFiresOnceAndRepeatsOnlyWhenReArmed(t *testing.T) {
	f := NewFake(t0)
	s := New(f)
	once := 0
	s.Arm("agent", "reminder/1", t0.Add(time.Minute), func() { once++ })
	f.Advance(time.Minute)
	f.Advance(time.Hour)
	if once != 1 {
		t.Fatalf("a one-shot timer fired %d times", once)
	}
	var every []time.Duration
	var fire func()
	fire = func() {
		every = append(every, f.Now().Sub(t0))
		s.Arm("agent", "reminder/2", f.Now().Add(10*time.Minute), fire)
	}
	s.Arm("agent", "reminder/2", f.Now().Add(10*time.Minute), fire)
	f.Advance(35 * time.Minute)
	if len(every) != 3 {
		t.Fatalf("a repeating timer fired at %v in 35 minutes, want 3 times", every)
	}
}

func TestNothingArmsOrFiresAfterStop(t *testing.T) {
	f := NewFake(t0)
	s := New(f)
	fired := 0
	s.After(time.Second, func() { fired++ })
	s.Arm("a", "x", t0.Add(time.Second), func() { fired++ })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.After(time.Second, func() { fired++ }) || s.At(t0, func() { fired++ }) || s.Arm("a", "y", t0, func() { fired++ }) {
		t.Fatal("a timer was armed after Close")
	}
	if s.Go(func() { fired++ }) || s.Run(func() { fired++ }) {
		t.Fatal("work started after Close")
	}
	f.Advance(time.Hour)
	if fired != 0 || s.Pending() != 0 || f.Pending() != 0 {
		t.Fatalf("after Close: fired %d, scheduler pending %d, clock pending %d; want 0", fired, s.Pending(), f.Pending())
	}
	if s.Stop() {
		t.Fatal("a second Stop reported true")
	}
}

// TestCloseWaitsForARunningCallback: Close during a callback returns only
// after the callback has returned.
func TestCloseWaitsForARunningCallback(t *testing.T) {
	f := NewFake(t0)
	s := New(f)
	entered, release := make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	s.After(time.Second, func() {
		close(entered)
		<-release
		returned.Store(true)
	})
	advanced := make(chan struct{})
	go func() { f.Advance(time.Second); close(advanced) }()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	for !s.Stopped() { // Stop is the first thing Close does; no event says so
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a callback ran", err)
	default:
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !returned.Load() {
		t.Fatal("Close returned before the callback did")
	}
	<-advanced

	// A bounded Close gives up with the context's error.
	s2 := New(f)
	block := make(chan struct{})
	s2.Go(func() { <-block })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s2.Close(ctx); err != context.Canceled {
		t.Fatalf("Close with an ended context = %v, want context.Canceled", err)
	}
	close(block)
	if err := s2.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCloseRacesFiringTimers (run with -race): real timers fire while Close
// runs; every callback that began is waited for, and none begins after
// Close returns.
func TestCloseRacesFiringTimers(t *testing.T) {
	for round := 0; round < 50; round++ {
		s := New(Real())
		var running, after atomic.Int64
		var closedFlag atomic.Bool
		var wg sync.WaitGroup
		cb := func() {
			if closedFlag.Load() {
				after.Add(1)
			}
			running.Add(1)
			time.Sleep(50 * time.Microsecond) // hold the callback open across Close
			running.Add(-1)
		}
		for i := 0; i < 40; i++ {
			d := time.Duration(i%8) * 50 * time.Microsecond
			s.After(d, cb)
			s.Arm("o", string(rune('a'+i%5)), time.Now().Add(d), cb)
			wg.Add(1)
			go func() { defer wg.Done(); s.Go(cb) }()
		}
		if round%2 == 1 {
			time.Sleep(time.Duration(round) * 10 * time.Microsecond)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		closedFlag.Store(true)
		if n := running.Load(); n != 0 {
			t.Fatalf("round %d: Close returned with %d callbacks running", round, n)
		}
		wg.Wait()
		time.Sleep(time.Millisecond) // let any stray timer goroutine run
		if n := after.Load(); n != 0 {
			t.Fatalf("round %d: %d callbacks began after Close", round, n)
		}
	}
}

func TestRunAndGoAreWaitedFor(t *testing.T) {
	s := New(NewFake(t0))
	release := make(chan struct{})
	var done atomic.Bool
	if !s.Go(func() { <-release; done.Store(true) }) {
		t.Fatal("Go refused before Stop")
	}
	ran := false
	if !s.Run(func() { ran = true }) || !ran {
		t.Fatal("Run did not run f on an open scheduler")
	}
	s.Stop()
	waited := make(chan struct{})
	go func() { _ = s.Wait(context.Background()); close(waited) }()
	close(release)
	<-waited
	if !done.Load() {
		t.Fatal("Wait returned before the work did")
	}
}
