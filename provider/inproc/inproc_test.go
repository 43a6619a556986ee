package inproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
)

// fakeTools answers tool calls from a function and records them.
type fakeTools struct {
	mu    sync.Mutex
	calls []string
	fn    func(tool string, args map[string]any) (map[string]any, error)
}

func (f *fakeTools) CallTool(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
	f.mu.Lock()
	f.calls = append(f.calls, tool)
	f.mu.Unlock()
	if f.fn == nil {
		return map[string]any{"ok": true}, nil
	}
	return f.fn(tool, args)
}

// chunks collects OnChunk calls.
type chunks struct {
	mu  sync.Mutex
	got []string
}

func (c *chunks) add(s string) { c.mu.Lock(); c.got = append(c.got, s); c.mu.Unlock() }
func (c *chunks) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

func create(t *testing.T, p *Provider, model string) provider.Session {
	t.Helper()
	s, err := p.Create(context.Background(), provider.Spec{AgentID: "a1", Model: model, Instructions: "be nice"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return s
}

func TestEchoStreamsResponseAsOneChunk(t *testing.T) {
	p := New("test", Options{})
	if p.Name() != "test" {
		t.Fatalf("Name = %q", p.Name())
	}
	if c := p.Capabilities(); c.NativeResume || c.StructuredHistory {
		t.Fatalf("Capabilities = %+v, want none", c)
	}
	s := create(t, p, "echo")
	if len(s.Handle()) != 32 {
		t.Fatalf("handle %q is not 32 hex digits", s.Handle())
	}
	var c chunks
	resp, err := s.Send(context.Background(), "hi", provider.TurnIO{OnChunk: c.add})
	if err != nil || resp != "echo: hi" {
		t.Fatalf("Send = %q, %v", resp, err)
	}
	if got := c.list(); len(got) != 1 || got[0] != "echo: hi" {
		t.Fatalf("chunks = %q", got)
	}
	if p.Sends() != 1 || p.Calls("echo") != 1 {
		t.Fatalf("Sends %d Calls %d, want 1 1", p.Sends(), p.Calls("echo"))
	}
}

func TestHandlesAreUnique(t *testing.T) {
	p := New("test", Options{})
	a, b := create(t, p, "echo"), create(t, p, "echo")
	if a.Handle() == b.Handle() {
		t.Fatalf("two sessions share handle %q", a.Handle())
	}
}

func TestUnknownModelIsPermanentAndListsModels(t *testing.T) {
	p := New("test", Options{})
	p.Register("zeta", Reply("z"))
	s := create(t, p, "nope")
	_, err := s.Send(context.Background(), "x", provider.TurnIO{})
	if !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("err = %v, want ErrUnknownModel", err)
	}
	if tr, _ := provider.IsTransient(err); tr {
		t.Fatalf("unknown model error is transient: %v", err)
	}
	for _, want := range []string{`"nope"`, "echo, zeta"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not contain %q", err, want)
		}
	}
	if p.Calls("nope") != 1 {
		t.Fatalf("Calls(nope) = %d", p.Calls("nope"))
	}
}

func TestTurnSeesSpecAndProgramChunks(t *testing.T) {
	p := New("test", Options{})
	p.Register("m", func(_ context.Context, tn *Turn) (string, error) {
		tn.Chunk("a")
		tn.Chunk("b")
		return fmt.Sprintf("%s|%s|%s|%s", tn.AgentID, tn.Model, tn.Instructions, tn.Prompt), nil
	})
	s := create(t, p, "m")
	var c chunks
	resp, err := s.Send(context.Background(), "p", provider.TurnIO{OnChunk: c.add})
	if err != nil || resp != "a1|m|be nice|p" {
		t.Fatalf("Send = %q, %v", resp, err)
	}
	if got := c.list(); strings.Join(got, ",") != "a,b" {
		t.Fatalf("chunks = %q, want the program's own chunks only", got)
	}
}

func TestToolCallsAreRecordedInHistory(t *testing.T) {
	p := New("test", Options{})
	var seen [][]provider.Turn
	p.Register("tools", func(_ context.Context, tn *Turn) (string, error) {
		seen = append(seen, tn.History)
		r, err := tn.Call("good", map[string]any{"n": 1})
		if err != nil || r["v"] != "ok" {
			return "", fmt.Errorf("good call: %v %v", r, err)
		}
		r, err = tn.Call("bad", nil)
		if err != nil || r["error"] != "nope" {
			return "", fmt.Errorf("bad call: %v %v", r, err)
		}
		if _, err := tn.Call("broken", nil); err == nil {
			return "", errors.New("broken call succeeded")
		}
		return "done " + tn.Prompt, nil
	})
	tools := &fakeTools{fn: func(tool string, _ map[string]any) (map[string]any, error) {
		switch tool {
		case "good":
			return map[string]any{"v": "ok"}, nil
		case "bad":
			return map[string]any{"error": "nope"}, nil
		}
		return nil, errors.New("socket gone")
	}}
	s := create(t, p, "tools")
	for _, msg := range []string{"one", "two"} {
		if _, err := s.Send(context.Background(), msg, provider.TurnIO{Tools: tools}); err != nil {
			t.Fatalf("Send %s: %v", msg, err)
		}
	}
	if len(seen[0]) != 0 {
		t.Fatalf("first turn saw history %+v", seen[0])
	}
	if len(seen[1]) != 1 {
		t.Fatalf("second turn saw %d turns, want 1", len(seen[1]))
	}
	h := seen[1][0]
	if h.Message != "one" || h.Response != "done one" || len(h.Calls) != 3 {
		t.Fatalf("history turn = %+v", h)
	}
	if c := h.Calls[0]; c.Tool != "good" || c.Args["n"] != 1 || c.Result["v"] != "ok" || c.Error != "" {
		t.Fatalf("call 0 = %+v", c)
	}
	if c := h.Calls[1]; c.Tool != "bad" || c.Error != "nope" || c.Result != nil {
		t.Fatalf("call 1 = %+v", c)
	}
	if c := h.Calls[2]; c.Tool != "broken" || c.Error != "socket gone" {
		t.Fatalf("call 2 = %+v", c)
	}
}

func TestCallWithoutToolCallerFails(t *testing.T) {
	p := New("test", Options{})
	p.Register("m", func(_ context.Context, tn *Turn) (string, error) {
		_, err := tn.Call("x", nil)
		return "", err
	})
	_, err := create(t, p, "m").Send(context.Background(), "p", provider.TurnIO{})
	if err == nil || !strings.Contains(err.Error(), "no tool caller") {
		t.Fatalf("err = %v", err)
	}
}

func TestSuspendRestoreKeepsHandleAndHistory(t *testing.T) {
	p := New("test", Options{})
	if !p.Capabilities().HistoryOnRestore {
		t.Fatal("HistoryOnRestore not reported")
	}
	var hist []provider.Turn
	p.Register("m", func(_ context.Context, tn *Turn) (string, error) {
		hist = tn.History
		return "r-" + tn.Prompt, nil
	})
	s := create(t, p, "m")
	if _, err := s.Send(context.Background(), "one", provider.TurnIO{}); err != nil {
		t.Fatal(err)
	}
	blob, err := s.Suspend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	var decoded map[string]json.RawMessage
	if err := json.Unmarshal(blob, &decoded); err != nil || decoded["handle"] == nil || string(decoded["turns"]) != "1" {
		t.Fatalf("blob %s is not {handle, turns:1}: %v", blob, err)
	}
	if _, ok := decoded["history"]; ok {
		t.Fatalf("blob %s carries the history; it comes back from the log", blob)
	}
	// A different Provider instance (a restarted daemon) restores from the
	// blob and the history the daemon read from the log.
	p2 := New("test", Options{})
	p2.Register("m", func(_ context.Context, tn *Turn) (string, error) {
		hist = tn.History
		return "r-" + tn.Prompt, nil
	})
	logged := []provider.Turn{{Message: "one", Calls: []provider.ToolCall{}, Response: "r-one"}}
	r, err := p2.Restore(context.Background(), provider.Spec{Model: "m", History: logged}, blob, "")
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if r.Handle() != s.Handle() {
		t.Fatalf("restored handle %q, want %q", r.Handle(), s.Handle())
	}
	if _, err := r.Send(context.Background(), "two", provider.TurnIO{}); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Message != "one" || hist[0].Response != "r-one" {
		t.Fatalf("restored history = %+v", hist)
	}
}

// TestRestoreOldBlobWithHistory: a blob written before the history moved
// out of it still restores its own history.
func TestRestoreOldBlobWithHistory(t *testing.T) {
	p := New("test", Options{})
	var hist []provider.Turn
	p.Register("m", func(_ context.Context, tn *Turn) (string, error) {
		hist = tn.History
		return "ok", nil
	})
	old := []byte(`{"handle":"abc","history":[{"message":"one","calls":[],"response":"r-one"}]}`)
	r, err := p.Restore(context.Background(), provider.Spec{Model: "m"}, old, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Send(context.Background(), "two", provider.TurnIO{}); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Message != "one" {
		t.Fatalf("history from an old blob = %+v", hist)
	}
}

func TestRestoreWithoutBlob(t *testing.T) {
	ctx := context.Background()
	plain := New("plain", Options{})
	s := create(t, plain, "echo")
	if _, err := plain.Restore(ctx, provider.Spec{Model: "echo"}, nil, s.Handle()); !errors.Is(err, provider.ErrCannotRestore) {
		t.Fatalf("restore without native resume: %v, want ErrCannotRestore", err)
	}

	native := New("native", Options{NativeResume: true})
	if !native.Capabilities().NativeResume {
		t.Fatal("NativeResume not reported")
	}
	var hist []provider.Turn
	native.Register("m", func(_ context.Context, tn *Turn) (string, error) {
		hist = tn.History
		return "ok", nil
	})
	s = create(t, native, "m")
	if _, err := s.Send(ctx, "one", provider.TurnIO{}); err != nil {
		t.Fatal(err)
	}
	_ = s.Stop()
	r, err := native.Restore(ctx, provider.Spec{Model: "m"}, nil, s.Handle())
	if err != nil {
		t.Fatalf("native restore: %v", err)
	}
	if r.Handle() != s.Handle() {
		t.Fatalf("handle %q, want %q", r.Handle(), s.Handle())
	}
	if _, err := r.Send(ctx, "two", provider.TurnIO{}); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Message != "one" {
		t.Fatalf("native resume history = %+v", hist)
	}
	if _, err := native.Restore(ctx, provider.Spec{Model: "m"}, nil, "feedface"); !errors.Is(err, provider.ErrCannotRestore) {
		t.Fatalf("unknown handle: %v, want ErrCannotRestore", err)
	}
	if _, err := native.Restore(ctx, provider.Spec{Model: "m"}, []byte("{not json"), "x"); !errors.Is(err, provider.ErrCannotRestore) {
		t.Fatalf("malformed blob: %v, want ErrCannotRestore", err)
	}
}

func TestFailTransientThenSucceeds(t *testing.T) {
	p := New("test", Options{})
	p.Register("flaky", FailTransient(2, 3*time.Second, Reply("finally")))
	s := create(t, p, "flaky")
	for i := 1; i <= 2; i++ {
		_, err := s.Send(context.Background(), "x", provider.TurnIO{})
		tr, after := provider.IsTransient(err)
		if !tr || after != 3*time.Second || !errors.Is(err, ErrInjected) {
			t.Fatalf("attempt %d: err %v transient %v after %v", i, err, tr, after)
		}
	}
	resp, err := s.Send(context.Background(), "x", provider.TurnIO{})
	if err != nil || resp != "finally" {
		t.Fatalf("third attempt: %q %v", resp, err)
	}
	if p.Calls("flaky") != 3 {
		t.Fatalf("Calls = %d, want 3", p.Calls("flaky"))
	}
}

func TestFailPermanentRunsSideEffectsAndRecordsNothing(t *testing.T) {
	p := New("test", Options{})
	var hist []provider.Turn
	p.Register("m", Sequence(
		FailPermanent(func(_ context.Context, tn *Turn) (string, error) {
			_, err := tn.Call("side", nil)
			return "ignored", err
		}),
		func(_ context.Context, tn *Turn) (string, error) { hist = tn.History; return "ok", nil },
	))
	tools := &fakeTools{}
	s := create(t, p, "m")
	_, err := s.Send(context.Background(), "x", provider.TurnIO{Tools: tools})
	if tr, _ := provider.IsTransient(err); err == nil || tr || !errors.Is(err, ErrInjected) {
		t.Fatalf("err = %v, want a permanent injected error", err)
	}
	if len(tools.calls) != 1 {
		t.Fatalf("tool calls = %v, want the side effect", tools.calls)
	}
	if _, err := s.Send(context.Background(), "y", provider.TurnIO{}); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 0 {
		t.Fatalf("failed turn was recorded: %+v", hist)
	}
}

func TestSequenceExhausts(t *testing.T) {
	p := New("test", Options{})
	p.Register("m", Sequence(Reply("a"), nil))
	s := create(t, p, "m")
	for _, want := range []string{"a", "echo: q"} {
		if resp, err := s.Send(context.Background(), "q", provider.TurnIO{}); err != nil || resp != want {
			t.Fatalf("Send = %q %v, want %q", resp, err, want)
		}
	}
	_, err := s.Send(context.Background(), "q", provider.TurnIO{})
	if err == nil || !strings.Contains(err.Error(), "exhausted") {
		t.Fatalf("err = %v, want exhausted", err)
	}
}

func TestDelayAndBlockHonourCancel(t *testing.T) {
	p := New("test", Options{})
	started := make(chan *Turn)
	p.Register("delay", Signal(started, Delay(time.Hour, nil)))
	p.Register("block", Signal(started, Block(make(chan struct{}), nil)))
	p.Register("short", Delay(0, Reply("quick")))
	for _, model := range []string{"delay", "block"} {
		s := create(t, p, model)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := s.Send(ctx, "x", provider.TurnIO{})
			errc <- err
		}()
		<-started
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: err = %v, want context.Canceled", model, err)
		}
	}
	if resp, err := create(t, p, "short").Send(context.Background(), "x", provider.TurnIO{}); err != nil || resp != "quick" {
		t.Fatalf("short delay: %q %v", resp, err)
	}
}

func TestBlockReleases(t *testing.T) {
	p := New("test", Options{})
	release := make(chan struct{})
	p.Register("m", Block(release, Reply("free")))
	s := create(t, p, "m")
	done := make(chan string, 1)
	go func() {
		resp, _ := s.Send(context.Background(), "x", provider.TurnIO{})
		done <- resp
	}()
	release <- struct{}{}
	if resp := <-done; resp != "free" {
		t.Fatalf("resp = %q", resp)
	}
}

func TestCancelReturnsEvenIfProgramIgnoresCtx(t *testing.T) {
	p := New("test", Options{})
	started := make(chan *Turn)
	unblock := make(chan struct{})
	after := make(chan error, 1)
	var c chunks
	p.Register("stubborn", func(_ context.Context, tn *Turn) (string, error) {
		started <- tn
		<-unblock
		tn.Chunk("late")
		_, err := tn.Call("late", nil)
		after <- err
		return "late", nil
	})
	tools := &fakeTools{}
	s := create(t, p, "stubborn")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Send(ctx, "x", provider.TurnIO{Tools: tools, OnChunk: c.add})
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	close(unblock)
	if err := <-after; !errors.Is(err, ErrTurnOver) {
		t.Fatalf("late Call err = %v, want ErrTurnOver", err)
	}
	if len(c.list()) != 0 || len(tools.calls) != 0 {
		t.Fatalf("late chunk %q or call %v reached the daemon", c.list(), tools.calls)
	}
}

func TestRunSuspendedEndsTurnEvenIfSwallowed(t *testing.T) {
	p := New("test", Options{})
	var hist []provider.Turn
	p.Register("m", Sequence(
		func(_ context.Context, tn *Turn) (string, error) {
			_, _ = tn.Call("await_input", nil) // swallowed
			return "pretend all is fine", nil
		},
		func(_ context.Context, tn *Turn) (string, error) { hist = tn.History; return "ok", nil },
	))
	tools := &fakeTools{fn: func(string, map[string]any) (map[string]any, error) {
		return nil, fmt.Errorf("await_input: %w", provider.ErrRunSuspended)
	}}
	s := create(t, p, "m")
	var c chunks
	_, err := s.Send(context.Background(), "x", provider.TurnIO{Tools: tools, OnChunk: c.add})
	if !errors.Is(err, provider.ErrRunSuspended) {
		t.Fatalf("err = %v, want ErrRunSuspended", err)
	}
	if len(c.list()) != 0 {
		t.Fatalf("suspended turn streamed %q", c.list())
	}
	if _, err := s.Send(context.Background(), "y", provider.TurnIO{}); err != nil {
		t.Fatal(err)
	}
	if len(hist) != 0 {
		t.Fatalf("suspended turn recorded in history: %+v", hist)
	}
}

func TestSendAfterStopFails(t *testing.T) {
	p := New("test", Options{})
	s := create(t, p, "echo")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := s.Send(context.Background(), "x", provider.TurnIO{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("err = %v, want ErrStopped", err)
	}
}

func TestPanickingProgramFailsTurn(t *testing.T) {
	p := New("test", Options{})
	p.Register("boom", func(context.Context, *Turn) (string, error) { panic("kaboom") })
	_, err := create(t, p, "boom").Send(context.Background(), "x", provider.TurnIO{})
	if err == nil || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("err = %v", err)
	}
	if tr, _ := provider.IsTransient(err); tr {
		t.Fatal("panic reported as transient")
	}
}

func TestRegisterNilRemoves(t *testing.T) {
	p := New("test", Options{})
	p.Register("echo", nil)
	if len(p.Models()) != 0 {
		t.Fatalf("Models = %v", p.Models())
	}
}

func TestConcurrentSessions(t *testing.T) {
	p := New("test", Options{NativeResume: true})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			s, err := p.Create(context.Background(), provider.Spec{Model: "echo"})
			if err != nil {
				t.Error(err)
				return
			}
			for j := range 10 {
				want := fmt.Sprintf("echo: %d-%d", i, j)
				if resp, err := s.Send(context.Background(), fmt.Sprintf("%d-%d", i, j), provider.TurnIO{}); err != nil || resp != want {
					t.Errorf("Send = %q %v", resp, err)
				}
				if _, err := s.Suspend(context.Background()); err != nil {
					t.Error(err)
				}
			}
			_ = s.Stop()
		})
	}
	wg.Wait()
	if p.Sends() != 80 || p.Calls("echo") != 80 {
		t.Fatalf("Sends %d Calls %d, want 80", p.Sends(), p.Calls("echo"))
	}
}

// batchTools is a fakeTools that also runs steps of calls, noting each step.
type batchTools struct {
	fakeTools
	steps [][]string
}

func (b *batchTools) CallTools(ctx context.Context, calls []provider.ToolRequest) []provider.ToolResponse {
	var names []string
	out := make([]provider.ToolResponse, len(calls))
	for i, c := range calls {
		names = append(names, c.Tool)
		out[i].Result, out[i].Err = b.fn(c.Tool, c.Args)
	}
	b.steps = append(b.steps, names)
	return out
}

func TestCallBatchRecordsCallsInOrder(t *testing.T) {
	fn := func(tool string, args map[string]any) (map[string]any, error) {
		if tool == "bad" {
			return map[string]any{"error": "nope"}, nil
		}
		return map[string]any{"echo": args["n"]}, nil
	}
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch caller %v", batch), func(t *testing.T) {
			p := New("test", Options{})
			var seen []provider.Turn
			p.Register("step", func(_ context.Context, tn *Turn) (string, error) {
				seen = tn.History
				rs, err := tn.CallBatch([]provider.ToolRequest{
					{Tool: "a", Args: map[string]any{"n": 1}}, {Tool: "bad"}, {Tool: "c", Args: map[string]any{"n": 3}}})
				if err != nil {
					return "", err
				}
				if len(rs) != 3 || rs[0]["echo"] != 1 || rs[1]["error"] != "nope" || rs[2]["echo"] != 3 {
					return "", fmt.Errorf("results %v", rs)
				}
				return "ok", nil
			})
			var tools provider.ToolCaller = &fakeTools{fn: fn}
			bt := &batchTools{fakeTools: fakeTools{fn: fn}}
			if batch {
				tools = bt
			}
			s := create(t, p, "step")
			for _, msg := range []string{"one", "two"} {
				if resp, err := s.Send(context.Background(), msg, provider.TurnIO{Tools: tools}); err != nil || resp != "ok" {
					t.Fatalf("Send %s: %q %v", msg, resp, err)
				}
			}
			if len(seen) != 1 || len(seen[0].Calls) != 3 {
				t.Fatalf("history %+v, want one turn of 3 calls", seen)
			}
			if c := seen[0].Calls; c[0].Tool != "a" || c[1].Tool != "bad" || c[1].Error != "nope" || c[2].Tool != "c" {
				t.Fatalf("recorded calls %+v", c)
			}
			if batch && fmt.Sprint(bt.steps) != "[[a bad c] [a bad c]]" {
				t.Fatalf("steps %v, want each turn's calls as one step", bt.steps)
			}
		})
	}
}
