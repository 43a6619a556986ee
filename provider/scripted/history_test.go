package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider"
)

// stateScript keeps state that only a correct replay rebuilds: the list of
// "add" results (or errors) over all turns.
const stateScript = `import json, os
from MODULE import read_turn, call_tool, done
state = []
while True:
    msg = read_turn()
    try:
        state.append(call_tool("add", n=len(msg))["n"])
    except RuntimeError as e:
        state.append("err:%s" % e)
    done("%s agent=%s" % (json.dumps(state), os.environ.get("WARREN_AGENT_ID")))
`

func addTools() *fakeTools {
	return &fakeTools{fn: func(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
		n := args["n"].(float64)
		if tool != "add" || n == 0 {
			return map[string]any{"error": "nothing to add"}, nil
		}
		return map[string]any{"n": n}, nil
	}}
}

func TestSuspendRestoreReplaysHistoryToFreshProcess(t *testing.T) {
	t.Parallel()
	for _, module := range []string{"warren_script", "substrat_script"} {
		t.Run(module, func(t *testing.T) {
			e := newEnv(t)
			p := e.provider(Options{})
			spec := e.spec(e.script("state.py", strings.Replace(stateScript, "MODULE", module, 1)))
			s := e.create(p, spec)
			tools := addTools()
			send(t, s, "a", tools)
			send(t, s, "", tools)
			if resp := send(t, s, "bb", tools); resp != `[1, "err:nothing to add", 2] agent=agent-1` {
				t.Fatalf("resp = %q", resp)
			}
			blob, err := s.Suspend(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if s.pid() == 0 {
				t.Fatal("Suspend stopped the process")
			}
			var decoded struct {
				Script  string          `json:"script"`
				Turns   int             `json:"turns"`
				History []provider.Turn `json:"history"`
			}
			if err := json.Unmarshal(blob, &decoded); err != nil || decoded.Script != s.Handle() || decoded.Turns != 3 || decoded.History != nil {
				t.Fatalf("blob %s is not {script, turns:3} without the history: %v", blob, err)
			}
			// The daemon gives the history back from the log
			// (HistoryOnRestore); here, the turns the session recorded.
			s.mu.Lock()
			spec.History = append([]provider.Turn(nil), s.history...)
			s.mu.Unlock()
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}

			// A new provider instance, as after a daemon restart; the spec's
			// environment, not the blob, provides the daemon connection.
			r, err := e.provider(Options{}).Restore(context.Background(), spec, blob, s.Handle())
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			rs := r.(*Session)
			t.Cleanup(func() { _ = rs.Stop() })
			if resp := send(t, rs, "ccc", tools); resp != `[1, "err:nothing to add", 2, 3] agent=agent-1` {
				t.Fatalf("after restore resp = %q", resp)
			}
			if n := len(tools.seen()); n != 4 {
				t.Fatalf("%d tool calls executed, want 4 (replayed calls must not run again)", n)
			}
		})
	}
}

func TestRestoreWithoutBlobUsesHandleAndSpecHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.provider(Options{})
	path := e.script("state.py", strings.Replace(stateScript, "MODULE", "warren_script", 1))
	spec := e.spec(path)
	spec.History = []provider.Turn{{
		Message:  "hello",
		Calls:    []provider.ToolCall{{Tool: "add", Args: map[string]any{"n": 5}, Result: map[string]any{"n": 5}}},
		Response: "[5]",
	}}
	for _, blob := range [][]byte{nil, {}} {
		// A session that was never evicted: no blob, only the handle
		// recorded at creation (here with a different model string, to
		// show the handle wins).
		spec2 := spec
		spec2.Model = ""
		r, err := p.Restore(context.Background(), spec2, blob, path)
		if err != nil {
			t.Fatalf("Restore(blob=%v): %v", blob, err)
		}
		s := r.(*Session)
		t.Cleanup(func() { _ = s.Stop() })
		if resp := send(t, s, "xy", addTools()); resp != "[5, 2] agent=agent-1" {
			t.Fatalf("resp = %q", resp)
		}
	}
	// Create takes spec.History the same way.
	s := e.create(p, spec)
	if resp := send(t, s, "xyz", addTools()); resp != "[5, 3] agent=agent-1" {
		t.Fatalf("Create with history: resp = %q", resp)
	}
}

func TestRestorePrefersSpecHistoryOverStaleBlob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.provider(Options{})
	path := e.script("state.py", strings.Replace(stateScript, "MODULE", "warren_script", 1))
	stale, _ := json.Marshal(blob{Script: path, History: []provider.Turn{{Message: "a", Calls: []provider.ToolCall{{Tool: "add", Args: map[string]any{"n": 1}, Result: map[string]any{"n": 1}}}}}})
	spec := e.spec(path)
	spec.History = []provider.Turn{
		{Message: "a", Calls: []provider.ToolCall{{Tool: "add", Args: map[string]any{"n": 1}, Result: map[string]any{"n": 1}}}},
		{Message: "b", Calls: []provider.ToolCall{{Tool: "add", Args: map[string]any{"n": 1}, Result: map[string]any{"n": 7}}}},
	}
	r, err := p.Restore(context.Background(), spec, stale, path)
	if err != nil {
		t.Fatal(err)
	}
	s := r.(*Session)
	t.Cleanup(func() { _ = s.Stop() })
	if resp := send(t, s, "c", addTools()); resp != "[1, 7, 1] agent=agent-1" {
		t.Fatalf("resp = %q", resp)
	}
}

func TestRestoreErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.provider(Options{})
	ctx := context.Background()
	if _, err := p.Restore(ctx, provider.Spec{}, []byte("{broken"), "x"); !errors.Is(err, provider.ErrCannotRestore) {
		t.Fatalf("malformed blob: %v", err)
	}
	if _, err := p.Restore(ctx, provider.Spec{}, nil, ""); !errors.Is(err, provider.ErrCannotRestore) {
		t.Fatalf("nothing to restore from: %v", err)
	}
	if _, err := p.Restore(ctx, provider.Spec{}, nil, "/no/such/script.py"); !errors.Is(err, ErrScriptNotFound) {
		t.Fatalf("vanished script: %v", err)
	}
}

func TestReplayDivergenceFailsClearly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := e.spec(e.script("state.py", strings.Replace(stateScript, "MODULE", "warren_script", 1)))
	spec.History = []provider.Turn{{Message: "a", Calls: []provider.ToolCall{{Tool: "subtract", Args: map[string]any{}}}, Response: "x"}}
	s := e.create(e.provider(Options{}), spec)
	_, err := s.Send(context.Background(), "b", provider.TurnIO{Tools: addTools()})
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "AssertionError") || !strings.Contains(err.Error(), "subtract") {
		t.Fatalf("err = %v, want the script's AssertionError naming the recorded tool", err)
	}
	// It says what to do about an edited script (issue 32).
	for _, want := range []string{"warren agent reset", "history=context"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want it to name %q", err, want)
		}
	}
}
