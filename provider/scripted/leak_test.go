package scripted

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
)

func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestNoDescriptorLeaks runs every way a turn can end and checks that all
// pipes are closed afterwards. It is not parallel, so no other test opens
// descriptors meanwhile.
func TestNoDescriptorLeaks(t *testing.T) {
	e := newEnv(t)
	path := e.script("agent.py", histScript)
	p := e.provider(Options{MaxLine: 1 << 20})
	before := openFDs(t)

	s := e.create(p, e.spec(path))
	tools := pidTools(nil, func(context.Context, string) (map[string]any, error) {
		return nil, fmt.Errorf("wait: %w", provider.ErrRunSuspended)
	})
	send(t, s, "ok", tools)
	for _, msg := range []string{"crash", "flood", "garbage-exit", "suspend"} {
		if _, err := s.Send(context.Background(), msg, provider.TurnIO{Tools: tools}); err == nil {
			t.Fatalf("%s: no error", msg)
		}
	}
	send(t, s, "ok", tools)
	s.opts.TurnTimeout = 200 * time.Millisecond
	if _, err := s.Send(context.Background(), "hang", provider.TurnIO{Tools: tools}); !errors.Is(err, ErrTurnTimeout) {
		t.Fatalf("hang: %v", err)
	}
	s.opts.TurnTimeout = 0
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan int, 1)
	go func() { <-started; cancel() }()
	if _, err := s.Send(ctx, "hang", provider.TurnIO{Tools: pidTools(started, nil)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	send(t, s, "ok", tools)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d descriptors open before, %d after", before, after)
	}
}

// TestSoak runs many turns with random crashes, timeouts and
// suspensions, checking after each success that the script's replayed
// state matches the history: 20 turns (a fixed seed) in the quick
// profile, 150 under WARREN_LONG=1.
func TestSoak(t *testing.T) {
	turns := 20
	if os.Getenv("WARREN_LONG") == "1" {
		turns = 150
	}
	e := newEnv(t)
	path := e.script("agent.py", histScript)
	p := e.provider(Options{})
	s := e.create(p, e.spec(path))
	tools := pidTools(nil, func(context.Context, string) (map[string]any, error) {
		return nil, provider.ErrRunSuspended
	})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range turns {
		msg := "ok"
		switch rng.IntN(10) {
		case 0:
			msg = "crash"
		case 1:
			msg = "suspend"
		case 2:
			msg = "hang"
		}
		if msg == "hang" {
			send(t, s, "warm", tools) // a live process, so the limit times the hang
			s.opts.TurnTimeout = 100 * time.Millisecond
		}
		resp, err := s.Send(context.Background(), msg, provider.TurnIO{Tools: tools})
		s.opts.TurnTimeout = 0
		if msg != "ok" {
			if err == nil {
				t.Fatalf("turn %d (%s) succeeded", i, msg)
			}
			continue
		}
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		if want := fmt.Sprintf("seen=%d", len(s.History())); resp != want {
			t.Fatalf("turn %d: %q, want %q", i, resp, want)
		}
	}
}
