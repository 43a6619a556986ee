package scripted

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
)

func TestHistoryOnlyOnFirstTurnOfFreshProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("hist.py", `import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    h = msg["history"] if "history" in msg else None
    r = "none" if h is None else ",".join(x["message"] + ":" + str(len(x["calls"] or [])) for x in h)
    sys.stdout.write(json.dumps({"type": "done", "response": r}) + "\n")
    sys.stdout.flush()
`)
	p := e.provider(Options{})
	fresh := e.create(p, e.spec(path))
	if resp := send(t, fresh, "a", nil); resp != "none" {
		t.Fatalf("fresh session without history got %q, want no history key", resp)
	}
	spec := e.spec(path)
	spec.History = []provider.Turn{{Message: "m1", Calls: []provider.ToolCall{{Tool: "x"}}}, {Message: "m2"}}
	s := e.create(p, spec)
	if resp := send(t, s, "b", nil); resp != "m1:1,m2:0" {
		t.Fatalf("first turn history = %q", resp)
	}
	if resp := send(t, s, "c", nil); resp != "none" {
		t.Fatalf("second turn on the same process got history %q", resp)
	}
}

func TestMalformedDoneIsPermanent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("baddone.py", `import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg["message"] == "bad":
        print(json.dumps({"type": "done", "response": {"not": "text"}}))
    else:
        print(json.dumps({"type": "done"}))
    sys.stdout.flush()
`)
	s := e.create(e.provider(Options{}), e.spec(path))
	_, err := s.Send(context.Background(), "bad", provider.TurnIO{})
	if err == nil || !strings.Contains(err.Error(), "malformed done line") {
		t.Fatalf("err = %v", err)
	}
	if tr, _ := provider.IsTransient(err); tr {
		t.Fatal("malformed done reported as transient")
	}
	if resp := send(t, s, "ok", nil); resp != "" {
		t.Fatalf("done without response = %q, want empty", resp)
	}
}

// FuzzProgramOutput feeds arbitrary program output to a turn: Send must
// return (never panic or hang) and succeed only when the output holds a done
// line. The quick profile runs the seeds; `go test -fuzz FuzzProgramOutput`
// explores further.
func FuzzProgramOutput(f *testing.F) {
	for _, seed := range []string{
		"",
		"garbage\n",
		`{"type":"done","response":"ok"}` + "\n",
		`{"type":"done","response":"no newline"}`,
		`{"type":"error","message":"bad"}` + "\n",
		`{"type":"error","message":{"x":1}}` + "\n",
		`{"type":"call","id":{"a":[1,2]},"tool":"t","args":{"k":1e400}}` + "\n",
		`{"type":"call","id":1,"tool":"t","args":null}` + "\n" + `{"type":"done","response":"x"}` + "\n",
		`{"type":"call","tool":5}` + "\n" + `{"type":"done"}` + "\n",
		`{"type":"result","id":1}` + "\n" + `{"type":"turn"}` + "\n",
		"{\"type\":\"done\",\"response\":\"\xff\xfe\"}\n",
		`[{"type":"done"}]` + "\n" + `null` + "\n" + `"str"` + "\n",
		`{"type":"done","response":"a"}{"type":"done"}` + "\n",
		strings.Repeat("x", 70000) + "\n",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	script := filepath.Join(dir, "replay.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nread -r line\ncat \"$FUZZ_DATA\"\n"), 0o755); err != nil {
		f.Fatal(err)
	}
	p := New(Options{TurnTimeout: 10 * time.Second, MaxLine: 64 << 10, StopGrace: time.Second})
	f.Fuzz(func(t *testing.T, data []byte) {
		dataFile := filepath.Join(t.TempDir(), "out")
		if err := os.WriteFile(dataFile, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := p.Create(context.Background(), provider.Spec{Model: script, Env: []string{"FUZZ_DATA=" + dataFile}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Stop() }()
		_, err = s.Send(context.Background(), "go", provider.TurnIO{Tools: &fakeTools{}})
		if err == nil && !strings.Contains(string(data), `"done"`) {
			t.Fatalf("turn succeeded without a done line in %q", data)
		}
		if err != nil && strings.Contains(err.Error(), "timed out") {
			t.Fatalf("turn on finite output timed out: %v", err)
		}
	})
}

func TestChattyProgramWithLongHistoryDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// 256 KiB of stdout chatter before reading stdin, while the daemon
	// writes a turn line far over the pipe buffer.
	path := e.script("chatty.py", `import json, sys
sys.stdout.write(("chatter " * 64 + "\n") * 512)
sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    print(json.dumps({"type": "done", "response": "turns=%d" % len(msg.get("history") or [])}))
    sys.stdout.flush()
`)
	spec := e.spec(path)
	for i := range 64 {
		spec.History = append(spec.History, provider.Turn{Message: strings.Repeat("h", 8<<10), Response: strconv.Itoa(i)})
	}
	s := e.create(e.provider(Options{}), spec)
	if resp := send(t, s, "x", nil); resp != "turns=64" {
		t.Fatalf("resp = %q", resp)
	}
}

func TestDoneBeforeReadingTurnReplacesProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Answers after reading only the first bytes of its (huge) turn line.
	path := e.script("hasty.py", `import json, os, sys
sys.stdin.buffer.read(10)
print(json.dumps({"type": "done", "response": str(os.getpid())}))
sys.stdout.flush()
for line in sys.stdin:
    print(json.dumps({"type": "done", "response": str(os.getpid())}))
    sys.stdout.flush()
`)
	s := e.create(e.provider(Options{}), e.spec(path))
	first := send(t, s, strings.Repeat("z", 4<<20), nil)
	if s.pid() != 0 {
		t.Fatal("a process holding a partial turn line was kept")
	}
	assertGone(t, mustAtoi(t, first))
	if !strings.Contains(e.logs.String(), "program ended the turn before reading it") {
		t.Fatal("the replacement was not logged")
	}
	if second := send(t, s, "x", nil); second == first {
		t.Fatal("the next turn reused the process")
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
