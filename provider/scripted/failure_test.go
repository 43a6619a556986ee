package scripted

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
)

// histScript uses the helper library: it reports its pid (tool "pid") on
// every live turn, then acts on the message; the response counts the turns
// it has seen, including replayed ones.
const histScript = `import os, sys, time
from warren_script import read_turn, call_tool, done, replaying
seen = 0
while True:
    msg = read_turn()
    seen += 1
    if not replaying():
        call_tool("pid", pid=os.getpid())
    if msg == "crash":
        sys.stderr.write("boom: the agent fell over\n")
        sys.stderr.flush()
        sys.exit(3)
    if msg == "sigkill":
        os.kill(os.getpid(), 9)
    if msg == "raise":
        raise ValueError("the bot has a bug")
    if msg == "hang":
        time.sleep(3600)
    if msg == "suspend":
        call_tool("await_input", kind="text", prompt="?")
    if msg == "flood":
        sys.stdout.write("x" * (3 << 20))
        sys.stdout.flush()
        time.sleep(3600)
    if msg == "garbage-exit":
        print("not json at all")
        sys.stdout.flush()
        sys.exit(0)
    done("seen=%d" % seen)
`

// pidTools records the pid reported by the script's "pid" call and
// signals it on started (when not nil).
func pidTools(started chan<- int, more func(ctx context.Context, tool string) (map[string]any, error)) *fakeTools {
	return &fakeTools{fn: func(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
		if tool == "pid" {
			if started != nil {
				started <- int(args["pid"].(float64))
			}
			return map[string]any{}, nil
		}
		if more != nil {
			return more(ctx, tool)
		}
		return map[string]any{"ok": true}, nil
	}}
}

func lastPID(t *testing.T, tools *fakeTools) int {
	t.Helper()
	seen := tools.seen()
	for i := len(seen) - 1; i >= 0; i-- {
		if seen[i].Tool == "pid" {
			return int(seen[i].Args["pid"].(float64))
		}
	}
	t.Fatal("the script never reported its pid")
	return 0
}

func TestCrashMidTurnIsTransientAndNextTurnReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("agent.py", histScript)))
	tools := pidTools(nil, nil)
	if resp := send(t, s, "one", tools); resp != "seen=1" {
		t.Fatalf("resp = %q", resp)
	}
	pid := lastPID(t, tools)
	// Killed by a signal (as the OOM killer does): transient.
	_, err := s.Send(context.Background(), "sigkill", provider.TurnIO{Tools: tools})
	tr, _ := provider.IsTransient(err)
	if !tr || !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "signal: killed") {
		t.Fatalf("err = %v, want transient ErrExited naming the signal", err)
	}
	assertGone(t, pid)
	// A fresh process replays "one" (the crashed turn is not history).
	if resp := send(t, s, "two", tools); resp != "seen=2" {
		t.Fatalf("after crash resp = %q, want seen=2", resp)
	}
	if newPID := lastPID(t, tools); newPID == pid {
		t.Fatal("the crashed process was reused")
	}
}

// A script that exits non-zero during a turn (sys.exit(3), an uncaught
// Python exception) failed on its own: permanent, with its stderr, and the
// next turn starts a fresh process (issue 14).
func TestScriptErrorMidTurnIsPermanent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("agent.py", histScript)))
	tools := pidTools(nil, nil)
	cases := []struct{ msg, status, stderr string }{
		{"crash", "exit status 3", "boom: the agent fell over"},
		{"raise", "exit status 1", "ValueError: the bot has a bug"},
	}
	for _, tc := range cases {
		_, err := s.Send(context.Background(), tc.msg, provider.TurnIO{Tools: tools})
		if tr, _ := provider.IsTransient(err); tr || !strings.Contains(err.Error(), "permanent provider error") || !errors.Is(err, ErrExited) {
			t.Fatalf("%s: err = %v, want a permanent ErrExited", tc.msg, err)
		}
		for _, want := range []string{"scripted agent exited unexpectedly (" + tc.status + ")", tc.stderr} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: error %q lacks %q", tc.msg, err, want)
			}
		}
	}
	if resp := send(t, s, "after", tools); resp != "seen=1" {
		t.Fatalf("after the script errors resp = %q, want seen=1 (a fresh process)", resp)
	}
}

func TestTurnTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("agent.py", histScript)))
	tools := pidTools(nil, nil)
	send(t, s, "warm", tools) // interpreter startup is not what this test times
	s.opts.TurnTimeout = 300 * time.Millisecond
	_, err := s.Send(context.Background(), "hang", provider.TurnIO{Tools: tools})
	tr, _ := provider.IsTransient(err)
	if !tr || !errors.Is(err, ErrTurnTimeout) || !strings.Contains(err.Error(), "300ms") {
		t.Fatalf("err = %v, want transient ErrTurnTimeout naming 300ms", err)
	}
	assertGone(t, lastPID(t, tools))
	if s.pid() != 0 {
		t.Fatal("timed-out process still attached")
	}
	s.opts.TurnTimeout = 0
	if resp := send(t, s, "next", tools); resp != "seen=2" {
		t.Fatalf("after timeout resp = %q (the hung turn must not be history)", resp)
	}
}

func TestToolTimeDoesNotCountAgainstTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Python startup plus a slow tool call would exceed the budget if tool
	// time counted; the script itself is quick.
	slow := func(ctx context.Context, tool string) (map[string]any, error) {
		timer := time.NewTimer(400 * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]any{}, nil
	}
	s := e.create(e.provider(Options{TurnTimeout: 30 * time.Second}), e.spec(e.script("agent.py", histScript)))
	s.opts.TurnTimeout = 0 // first turn: warm the interpreter without a limit
	send(t, s, "warm", pidTools(nil, nil))
	s.opts.TurnTimeout = 300 * time.Millisecond
	resp, err := s.Send(context.Background(), "suspend", provider.TurnIO{Tools: pidTools(nil, slow)})
	if err != nil || resp != "seen=2" {
		t.Fatalf("Send = %q, %v", resp, err)
	}
}

func TestContextCancelKills(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("agent.py", histScript)))
	started := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := s.Send(ctx, "hang", provider.TurnIO{Tools: pidTools(started, nil)})
		errc <- err
	}()
	pid := <-started
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	assertGone(t, pid)
}

func TestRunSuspendedKillsAndReturns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("agent.py", histScript)))
	suspend := func(context.Context, string) (map[string]any, error) {
		return nil, errors.Join(errors.New("await_input"), provider.ErrRunSuspended)
	}
	tools := pidTools(nil, suspend)
	send(t, s, "one", tools)
	_, err := s.Send(context.Background(), "suspend", provider.TurnIO{Tools: tools})
	if !errors.Is(err, provider.ErrRunSuspended) {
		t.Fatalf("err = %v, want ErrRunSuspended", err)
	}
	assertGone(t, lastPID(t, tools))
	if h := s.History(); len(h) != 1 {
		t.Fatalf("suspended turn recorded: %+v", h)
	}
	if resp := send(t, s, "two", tools); resp != "seen=2" {
		t.Fatalf("resp = %q", resp)
	}
}

func TestFloodOverMaxLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{MaxLine: 1 << 20}), e.spec(e.script("agent.py", histScript)))
	tools := pidTools(nil, nil)
	_, err := s.Send(context.Background(), "flood", provider.TurnIO{Tools: tools})
	if !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), strconv.Itoa(1<<20)) {
		t.Fatalf("err = %v, want ErrLineTooLong naming the limit", err)
	}
	assertGone(t, lastPID(t, tools))
}

func TestGarbageThenExit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("agent.py", histScript)))
	_, err := s.Send(context.Background(), "garbage-exit", provider.TurnIO{Tools: pidTools(nil, nil)})
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exited unexpectedly (exit status 0)") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(e.logs.String(), "not json at all") {
		t.Fatal("the garbage line was not logged")
	}
}

func TestExitBetweenTurnsRestartsWithHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The script exits after every live turn.
	path := e.script("oneshot.py", `from warren_script import read_turn, done, replaying
n = 0
while True:
    read_turn()
    n += 1
    live = not replaying()
    done("n=%d" % n)
    if live:
        break
`)
	s := e.create(e.provider(Options{}), e.spec(path))
	if resp := send(t, s, "a", nil); resp != "n=1" {
		t.Fatalf("resp = %q", resp)
	}
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	<-proc.exited // the script ended after its turn
	if resp := send(t, s, "b", nil); resp != "n=2" {
		t.Fatalf("resp = %q, want n=2 (history replayed into a fresh process)", resp)
	}
	if !strings.Contains(e.logs.String(), "program exited between turns") {
		t.Fatal("the restart was not logged")
	}
}
