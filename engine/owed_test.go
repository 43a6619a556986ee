package engine

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// open says every run is open in the log; healthy that it takes appends.
func open(string) bool { return true }

func healthy() bool { return false }

// An end owed for a run the log holds ended, or never started (an append
// a cluster stored although its answer was lost, handed over when the
// log healed), is dropped unwritten, and the aftermath still runs.
func TestFlushSkipsARunNotOpen(t *testing.T) {
	var o owedEnd
	o.Owe("r1", "turn.failed", 7, errors.New("nats: timeout"))
	var after []string
	err := o.Flush(func(run string) bool { return run != "r1" }, healthy, func(string, any) error { t.Fatal("written for an ended run"); return nil },
		func(run, event string, logged bool) { after = append(after, run, event, strconv.FormatBool(logged)) })
	if err != nil || strings.Join(after, " ") != "r1 turn.failed false" {
		t.Fatalf("flush: %v, aftermath %v", err, after)
	}
	if _, _, _, ok := o.Owed(); ok {
		t.Fatal("still owed")
	}
}

// An owed end is written once, by the first flush whose write succeeds;
// a failed write keeps it owed; concurrent flushes return after the
// writer's aftermath.
func TestFlushWritesOnce(t *testing.T) {
	var o owedEnd
	if err := o.Flush(open, healthy, func(string, any) error { t.Fatal("nothing owed, yet written"); return nil }, nil); err != nil {
		t.Fatal(err)
	}
	o.Owe("r1", "turn.failed", 7, errors.New("ENOSPC"))
	if d := o.Describe(); !strings.Contains(d, "run r1") || !strings.Contains(d, "turn.failed") || !strings.Contains(d, "ENOSPC") {
		t.Fatalf("Describe: %q", d)
	}
	err := o.Flush(open, healthy, func(string, any) error { return errors.New("still full") }, func(string, string, bool) { t.Fatal("aftermath of a failed write") })
	if err == nil || !strings.Contains(err.Error(), "run r1 (turn.failed) is still not logged") {
		t.Fatalf("failed write: %v", err)
	}
	if _, _, _, ok := o.Owed(); !ok {
		t.Fatal("a failed write cleared the owed end")
	}
	var mu sync.Mutex
	writes, afters := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := o.Flush(open, healthy, func(ev string, data any) error {
				if ev != "turn.failed" || data != 7 {
					t.Errorf("wrote %s %v", ev, data)
				}
				mu.Lock()
				writes++
				mu.Unlock()
				return nil
			}, func(string, string, bool) { mu.Lock(); afters++; mu.Unlock() })
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			if afters != 1 {
				t.Errorf("a flush returned before the writer's aftermath (afters %d)", afters)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if writes != 1 || o.Describe() != "" {
		t.Fatalf("%d writes, describe %q; want 1 and nothing owed", writes, o.Describe())
	}
}

// A flush that finds nothing owed because another is writing returns only
// after that writer's aftermath (the notices of the run's end) is done.
func TestConcurrentFlushWaitsForTheAftermath(t *testing.T) {
	var o owedEnd
	o.Owe("r1", "turn.cancelled", nil, errors.New("EROFS"))
	inAfter, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	done := false
	go func() {
		_ = o.Flush(open, healthy, func(string, any) error { return nil }, func(string, string, bool) {
			close(inAfter)
			<-release
			mu.Lock()
			done = true
			mu.Unlock()
		})
	}()
	<-inAfter
	// The writer holds the flush lock across its aftermath: every other
	// flush waits for it (no sleep can show a wait; the lock itself can).
	if o.flush.TryLock() {
		t.Fatal("the flush lock is free while the writer's aftermath runs")
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = o.Flush(open, healthy, func(string, any) error { t.Error("written twice"); return nil }, func(string, string, bool) {})
			mu.Lock()
			defer mu.Unlock()
			if !done {
				t.Error("a flush returned while the writer's aftermath still ran")
			}
		}()
	}
	close(release)
	wg.Wait()
}

// An unconfirmed end (the run's turn.start failed) waits while the log is
// degraded, is dropped without aftermath when the healed log does not
// hold the run, and is written when it does (the start was stored).
func TestFlushUnconfirmed(t *testing.T) {
	var o owedEnd
	o.OweUnconfirmed("r1", "turn.failed", 7, errors.New("nats: timeout"))
	degraded := true
	isDegraded := func() bool { return degraded }
	written, afters := 0, 0
	write := func(string, any) error { written++; return nil }
	after := func(string, string, bool) { afters++ }
	if err := o.Flush(open, isDegraded, write, after); err == nil || written != 0 {
		t.Fatalf("flush on a degraded log: %v, %d written; want it kept owed", err, written)
	}
	degraded = false
	if err := o.Flush(func(string) bool { return false }, isDegraded, write, after); err != nil || written != 0 || afters != 0 {
		t.Fatalf("the healed log does not hold the run: %v, %d written, %d aftermaths; want dropped quietly", err, written, afters)
	}
	o.OweUnconfirmed("r2", "turn.failed", 7, errors.New("nats: timeout"))
	if err := o.Flush(open, isDegraded, write, after); err != nil || written != 1 || afters != 1 {
		t.Fatalf("the healed log holds the run: %v, %d written, %d aftermaths; want the end written", err, written, afters)
	}
}
