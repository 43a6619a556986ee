package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
)

// pidScript answers every turn with its pid, using the raw protocol.
const pidScript = `import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    sys.stdout.write(json.dumps({"type": "done", "response": "%s pid=%d" % (msg["message"], os.getpid())}) + "\n")
    sys.stdout.flush()
`

func TestEchoOneChunkAndCapabilities(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.provider(Options{})
	if p.Name() != "scripted" {
		t.Fatalf("Name = %q", p.Name())
	}
	if c := p.Capabilities(); c.NativeResume || !c.StructuredHistory {
		t.Fatalf("Capabilities = %+v", c)
	}
	path := e.script("echo.py", pidScript)
	s := e.create(p, e.spec(path))
	if s.Handle() != path {
		t.Fatalf("Handle = %q, want %q", s.Handle(), path)
	}
	if s.pid() != 0 {
		t.Fatal("Create started a process")
	}
	var chunks []string
	resp, err := s.Send(context.Background(), "hello", provider.TurnIO{OnChunk: func(c string) { chunks = append(chunks, c) }})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("hello pid=%d", s.pid())
	if resp != want || len(chunks) != 1 || chunks[0] != want {
		t.Fatalf("resp %q chunks %q, want %q once", resp, chunks, want)
	}
}

func TestManyTurnsShareOneProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("pid.py", pidScript)))
	var first string
	for i := range 5 {
		resp := send(t, s, fmt.Sprintf("t%d", i), nil)
		_, pid, _ := strings.Cut(resp, " ")
		if i == 0 {
			first = pid
		} else if pid != first {
			t.Fatalf("turn %d ran in %s, turn 0 in %s", i, pid, first)
		}
	}
	if h := s.History(); len(h) != 5 || h[4].Message != "t4" {
		t.Fatalf("history = %+v", h)
	}
}

func TestToolCallsResultErrorAndGoError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Raw protocol with ids of several JSON types; the script reports what it
	// got back.
	path := e.script("tools.py", `import json, sys
def call(cid, tool, args):
    sys.stdout.write(json.dumps({"type": "call", "id": cid, "tool": tool, "args": args}) + "\n")
    sys.stdout.flush()
    res = json.loads(sys.stdin.readline())
    assert res["type"] == "result" and res["id"] == cid, res
    return res.get("data", "ERR:" + str(res.get("error")))
for line in sys.stdin:
    out = [call("a-1", "good", {"n": 1}), call({"k": [1]}, "bad", {}), call(3, "broken", {"x": "y"})]
    sys.stdout.write(json.dumps({"type": "done", "response": json.dumps(out)}) + "\n")
    sys.stdout.flush()
`)
	tools := &fakeTools{fn: func(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
		switch tool {
		case "good":
			return map[string]any{"v": args["n"]}, nil
		case "bad":
			return map[string]any{"error": "no such agent"}, nil
		}
		return nil, errors.New("socket closed")
	}}
	s := e.create(e.provider(Options{}), e.spec(path))
	resp := send(t, s, "go", tools)
	if resp != `[{"v": 1}, "ERR:no such agent", "ERR:socket closed"]` {
		t.Fatalf("resp = %s", resp)
	}
	seen := tools.seen()
	if len(seen) != 3 || seen[0].Tool != "good" || seen[0].Args["n"] != float64(1) || seen[2].Args["x"] != "y" {
		t.Fatalf("tool calls = %+v", seen)
	}
	h := s.History()
	if len(h) != 1 || len(h[0].Calls) != 3 {
		t.Fatalf("history = %+v", h)
	}
	c := h[0].Calls
	if c[0].Result["v"] != float64(1) || c[0].Error != "" || c[1].Error != "no such agent" || c[2].Error != "socket closed" || c[2].Args["x"] != "y" {
		t.Fatalf("recorded calls = %+v", c)
	}
}

func TestMalformedCallGetsErrorResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("badcall.py", `import json, sys
for line in sys.stdin:
    replies = []
    for bad in ({"type": "call"}, {"type": "call", "id": 7, "tool": "x", "args": [1]}):
        sys.stdout.write(json.dumps(bad) + "\n")
        sys.stdout.flush()
        replies.append(json.loads(sys.stdin.readline()))
    sys.stdout.write(json.dumps({"type": "done", "response": json.dumps(replies)}) + "\n")
    sys.stdout.flush()
`)
	tools := &fakeTools{}
	s := e.create(e.provider(Options{}), e.spec(path))
	var replies []map[string]any
	if err := json.Unmarshal([]byte(send(t, s, "go", tools)), &replies); err != nil {
		t.Fatal(err)
	}
	if len(replies) != 2 || replies[0]["id"] != nil || replies[1]["id"] != float64(7) {
		t.Fatalf("replies = %v", replies)
	}
	for _, r := range replies {
		if r["type"] != "result" || !strings.Contains(fmt.Sprint(r["error"]), "invalid call line") {
			t.Fatalf("reply %v is not an invalid-call error", r)
		}
	}
	if len(tools.seen()) != 0 || len(s.History()[0].Calls) != 0 {
		t.Fatal("a malformed call was executed or recorded")
	}
}

func TestErrorLineIsPermanentAndProcessStays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("err.py", `import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg["message"] == "fail":
        out = {"type": "error", "message": "cannot do that"}
    else:
        out = {"type": "done", "response": str(os.getpid())}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
`)
	s := e.create(e.provider(Options{}), e.spec(path))
	pid := send(t, s, "a", nil)
	_, err := s.Send(context.Background(), "fail", provider.TurnIO{})
	if err == nil || !strings.Contains(err.Error(), "scripted agent error: cannot do that") {
		t.Fatalf("err = %v", err)
	}
	if tr, _ := provider.IsTransient(err); tr {
		t.Fatal("error line reported as transient")
	}
	if again := send(t, s, "b", nil); again != pid {
		t.Fatalf("process changed after an error line: %s then %s", pid, again)
	}
	if h := s.History(); len(h) != 2 || h[1].Message != "b" {
		t.Fatalf("failed turn recorded: %+v", h)
	}
}

func TestGarbageLinesAreIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("garbage.py", `import json, sys
for line in sys.stdin:
    print("hello, I am not JSON")
    print("[1, 2, 3]")
    print('{"type": "weird", "x": 1}')
    print('{"no": "type"}')
    print('{"type": 5}')
    print("")
    print(json.dumps({"type": "done", "response": "fine"}))
    sys.stdout.flush()
`)
	s := e.create(e.provider(Options{}), e.spec(path))
	if resp := send(t, s, "x", nil); resp != "fine" {
		t.Fatalf("resp = %q", resp)
	}
	logs := e.logs.String()
	for _, want := range []string{"hello, I am not JSON", "unknown type weird", `no string \"type\"`} {
		if !strings.Contains(logs, want) {
			t.Fatalf("logs do not mention %q:\n%s", want, logs)
		}
	}
}

func TestLargeLinesBothWays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("big.py", `import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    sys.stdout.write(json.dumps({"type": "done", "response": msg["message"] + "x" * (1 << 20)}) + "\n")
    sys.stdout.flush()
`)
	s := e.create(e.provider(Options{}), e.spec(path))
	in := strings.Repeat("m", 1<<20)
	resp := send(t, s, in, nil)
	if len(resp) != 2<<20 || !strings.HasPrefix(resp, "mmm") || !strings.HasSuffix(resp, "xxx") {
		t.Fatalf("response of %d bytes, want %d", len(resp), 2<<20)
	}
}

func TestFinalLineWithoutNewline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("nonl.py", `import json, sys
sys.stdin.readline()
sys.stdout.write(json.dumps({"type": "done", "response": "last words"}))
`)
	s := e.create(e.provider(Options{}), e.spec(path))
	if resp := send(t, s, "x", nil); resp != "last words" {
		t.Fatalf("resp = %q", resp)
	}
}

func TestShellScriptRunsDirectly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("agent.sh", `#!/bin/sh
while read -r line; do
  printf '{"type":"done","response":"sh says %s"}\n' "$WARREN_AGENT_ID"
done
`)
	s := e.create(e.provider(Options{Python: "/nonexistent/python"}), e.spec(path))
	if resp := send(t, s, "x", nil); resp != "sh says agent-1" {
		t.Fatalf("resp = %q", resp)
	}
}

// TestEnvironmentIsAllowListed: a program gets the allow-listed variables
// of the daemon's environment and Spec.Env, never anything else (a secret
// in the daemon's environment does not reach it).
func TestEnvironmentIsAllowListed(t *testing.T) {
	t.Setenv("WARREN_TEST_PARENT", "from-parent")
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("LC_WARRENTEST", "allowed")
	e := newEnv(t)
	path := e.script("env.py", `import json, os, sys
for line in sys.stdin:
    keys = ("WARREN_SOCKET", "WARREN_AGENT_ID", "WARREN_TEST_PARENT", "OPENAI_API_KEY", "LC_WARRENTEST")
    sys.stdout.write(json.dumps({"type": "done", "response": ",".join(os.environ.get(k, "-") for k in keys)}) + "\n")
    sys.stdout.flush()
`)
	s := e.create(e.provider(Options{}), e.spec(path))
	if resp := send(t, s, "x", nil); resp != "/tmp/warren-test.sock,agent-1,-,-,allowed" {
		t.Fatalf("env = %q, want the socket, the agent id, no parent variable, no key, the LC_ variable", resp)
	}
}

func TestScriptResolution(t *testing.T) {
	e := newEnv(t)
	p := e.provider(Options{})
	ctx := context.Background()
	if _, err := p.Create(ctx, provider.Spec{}); !errors.Is(err, ErrNoScript) {
		t.Fatalf("empty model: %v", err)
	}
	if _, err := p.Create(ctx, provider.Spec{Model: filepath.Join(e.dir, "missing.py")}); !errors.Is(err, ErrScriptNotFound) {
		t.Fatalf("missing script: %v", err)
	}
	if _, err := p.Create(ctx, provider.Spec{Model: e.dir}); !errors.Is(err, ErrScriptNotFound) {
		t.Fatalf("directory: %v", err)
	}
	e.script("rel.py", pidScript)
	t.Chdir(e.dir)
	if _, err := p.Create(ctx, provider.Spec{Model: "nope.py"}); !errors.Is(err, ErrScriptNotFound) || !strings.Contains(err.Error(), "working directory") {
		t.Fatalf("missing relative script: %v", err)
	}
	s := e.create(p, provider.Spec{Model: "rel.py"})
	if want := filepath.Join(e.dir, "rel.py"); s.Handle() != want {
		t.Fatalf("Handle = %q, want absolute %q", s.Handle(), want)
	}
}

func TestStartFailureIsClear(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("x.py", pidScript)
	s := e.create(e.provider(Options{Python: filepath.Join(e.dir, "no-python")}), e.spec(path))
	_, err := s.Send(context.Background(), "x", provider.TurnIO{})
	if err == nil || !strings.Contains(err.Error(), "cannot start scripted agent") {
		t.Fatalf("err = %v", err)
	}
	if tr, _ := provider.IsTransient(err); tr {
		t.Fatal("start failure reported as transient")
	}
}

func TestStopKillsAfterGraceAndReaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("stubborn.py", `import json, os, sys, time
line = sys.stdin.readline()
sys.stdout.write(json.dumps({"type": "done", "response": str(os.getpid())}) + "\n")
sys.stdout.flush()
sys.stdin.read()  # until EOF
time.sleep(3600)  # then refuse to exit
`)
	s := e.create(e.provider(Options{StopGrace: 50 * time.Millisecond}), e.spec(path))
	send(t, s, "x", nil)
	pid := s.pid()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pid)
	if _, err := s.Send(context.Background(), "y", provider.TurnIO{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Send after Stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestStopGracefulExit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("pid.py", pidScript)))
	send(t, s, "x", nil)
	pid := s.pid()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pid)
	if s.pid() != 0 {
		t.Fatal("stopped session still holds a process")
	}
}

func TestWriteHelpersInstallsBothModules(t *testing.T) {
	dir := t.TempDir()
	if err := WriteHelpers(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"warren_script.py", "substrat_script.py"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteHelpers(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("WriteHelpers into a missing directory succeeded")
	}
}

// TestWriteHelpersNeverWritesThroughLinks (D12): a helper's name that is
// a symbolic link is replaced by the helper, its target untouched; a
// directory that is a link is refused, saying what to do, and nothing is
// written in its target.
func TestWriteHelpersNeverWritesThroughLinks(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim.txt")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(victim, filepath.Join(dir, "warren_script.py")); err != nil {
		t.Fatal(err)
	}
	if err := WriteHelpers(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me\n" {
		t.Fatalf("the link's target was written: %.40q... %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "warren_script.py")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the helper is not a regular file in place of the link: %v %v", fi, err)
	}
	linked := filepath.Join(t.TempDir(), "python")
	if err := os.Symlink(outside, linked); err != nil {
		t.Fatal(err)
	}
	err := WriteHelpers(linked)
	if !errors.Is(err, ErrHelperDirLink) || !strings.Contains(err.Error(), "rm "+linked) {
		t.Fatalf("WriteHelpers into a linked directory: %v", err)
	}
	if names, _ := os.ReadDir(outside); len(names) != 1 {
		t.Fatalf("files were written in the linked directory's target: %v", names)
	}
}
