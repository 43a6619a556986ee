package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/provider"
)

// echoTurnScript answers every turn with its whole turn line (as JSON) and
// writes a line to stderr each turn.
const echoTurnScript = `import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    sys.stderr.write("turn %s\n" % msg["message"])
    sys.stderr.flush()
    sys.stdout.write(json.dumps({"type": "done", "response": json.dumps(msg)}) + "\n")
    sys.stdout.flush()
`

func turnOf(t *testing.T, resp string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(resp), &m); err != nil {
		t.Fatalf("response %q is not the turn line: %v", resp, err)
	}
	return m
}

func TestFirstTurnOfEachProcessCarriesTheAgentsIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := e.spec(e.script("echo.py", echoTurnScript))
	spec.Instructions = "review every patch"
	spec.Identity = provider.Identity{Name: "worker", Path: "lead/worker", Parent: "lead", ParentID: "0123"}
	s := e.create(e.provider(Options{}), spec)

	first := turnOf(t, send(t, s, "a", nil))
	want := map[string]any{"id": "agent-1", "name": "worker", "path": "lead/worker", "parent": "lead",
		"parent_id": "0123", "instructions": "review every patch"}
	if !jsonEqual(first["agent"], want) {
		t.Fatalf("first turn agent = %v, want %v", first["agent"], want)
	}
	if first["type"] != "turn" || first["message"] != "a" {
		t.Fatalf("first turn line lost its Substrat keys: %v", first)
	}
	if second := turnOf(t, send(t, s, "b", nil)); second["agent"] != nil {
		t.Fatalf("second turn on the same process repeats the identity: %v", second)
	}
	// A fresh process (the last one exited) is told again.
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	proc.stop(0)
	if third := turnOf(t, send(t, s, "c", nil)); !jsonEqual(third["agent"], want) {
		t.Fatalf("first turn of a fresh process: agent = %v", third["agent"])
	}
}

func TestRootIdentityHasNullParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := e.spec(e.script("echo.py", echoTurnScript))
	spec.Identity = provider.Identity{Name: "lead", Path: "lead"}
	s := e.create(e.provider(Options{}), spec)
	ag, _ := turnOf(t, send(t, s, "a", nil))["agent"].(map[string]any)
	if p, ok := ag["parent"]; !ok || p != nil || ag["parent_id"] != nil || ag["name"] != "lead" {
		t.Fatalf("root agent identity = %v, want parent and parent_id null", ag)
	}
}

func TestContextModeSendsHistoryAsContextNotReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := e.spec(e.script("echo.py", echoTurnScript))
	spec.History = []provider.Turn{{Message: "m1", Calls: []provider.ToolCall{{Tool: "x", Args: map[string]any{}}}, Response: "r1"}}
	spec.HistoryMode = provider.HistoryContext
	s := e.create(e.provider(Options{}), spec)
	first := turnOf(t, send(t, s, "a", nil))
	if _, ok := first["history"]; ok {
		t.Fatalf("context mode sent a history to replay: %v", first)
	}
	ctx, _ := first["context"].([]any)
	if len(ctx) != 1 || ctx[0].(map[string]any)["message"] != "m1" || ctx[0].(map[string]any)["response"] != "r1" {
		t.Fatalf("context = %v, want the completed turn", first["context"])
	}
	if second := turnOf(t, send(t, s, "b", nil)); second["context"] != nil {
		t.Fatalf("second turn repeats the context: %v", second)
	}
}

// changedBot is the stateScript bot after an edit: it calls another tool.
const changedBot = `import json
from warren_script import read_turn, call_tool, done, context, agent
while True:
    msg = read_turn()
    r = call_tool("multiply", n=len(msg))
    done("%s ctx=%s me=%s" % (r["n"], json.dumps([t["message"] for t in context()]), agent()["name"]))
`

func TestContextModeLetsAnEditedBotContinue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := e.spec(e.script("bot.py", changedBot))
	spec.Identity = provider.Identity{Name: "bot", Path: "bot"}
	// The log recorded calls of "add"; the edited bot calls "multiply".
	spec.History = []provider.Turn{{Message: "a", Calls: []provider.ToolCall{{Tool: "add", Args: map[string]any{"n": 1.0},
		Result: map[string]any{"n": 1.0}}}, Response: "[1]"}}
	tools := &fakeTools{fn: func(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
		return map[string]any{"n": args["n"]}, nil
	}}
	p := e.provider(Options{})

	replay := e.create(p, spec)
	if _, err := replay.Send(context.Background(), "bb", provider.TurnIO{Tools: tools}); !errors.Is(err, ErrExited) ||
		!strings.Contains(err.Error(), "AssertionError") {
		t.Fatalf("replay mode: err = %v, want the replay's AssertionError", err)
	}

	spec.HistoryMode = provider.HistoryContext
	s := e.create(p, spec)
	if resp := send(t, s, "bb", tools); resp != `2 ctx=["a"] me=bot` {
		t.Fatalf("context mode: resp = %q", resp)
	}
}

func TestUnknownHistoryModeIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := e.spec(e.script("echo.py", echoTurnScript))
	spec.HistoryMode = "replya"
	if _, err := e.provider(Options{}).Create(context.Background(), spec); !errors.Is(err, ErrHistoryMode) ||
		!strings.Contains(err.Error(), `"replya"`) {
		t.Fatalf("Create with a bad history mode: %v", err)
	}
}

// launch is a provider.Launch that keeps the stderr it is given.
type launch struct {
	mu     sync.Mutex
	stderr strings.Builder
}

func (l *launch) Env() []string                                                 { return nil }
func (l *launch) Command(argv []string, _ string, _ []string) ([]string, error) { return argv, nil }
func (l *launch) Started(int) error                                             { return nil }
func (l *launch) Ended()                                                        {}
func (l *launch) Stderr() io.Writer                                             { return lockedWriter{l} }
func (l *launch) text() string                                                  { l.mu.Lock(); defer l.mu.Unlock(); return l.stderr.String() }
func (l *launch) Prepare() (provider.Launch, error)                             { return l, nil }

type lockedWriter struct{ l *launch }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.stderr.Write(p)
}

func TestStderrOfHealthyTurnsGoesToTheLaunch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := &launch{}
	spec := e.spec(e.script("echo.py", echoTurnScript))
	spec.Launcher = l
	s := e.create(e.provider(Options{}), spec)
	send(t, s, "one", nil)
	send(t, s, "two", nil)
	_ = s.Stop() // Stop returns once the stderr pipe has drained
	if got := l.text(); got != "turn one\nturn two\n" {
		t.Fatalf("stderr given to the launch = %q", got)
	}
}
