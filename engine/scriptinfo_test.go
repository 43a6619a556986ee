package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/stderrlog"
)

// turnEchoBot answers each turn with the turn line it was given (as JSON)
// and writes "stderr: <message>" to stderr.
const turnEchoBot = `import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    sys.stderr.write("stderr: %s\n" % msg["message"])
    sys.stderr.flush()
    sys.stdout.write(json.dumps({"type": "done", "response": json.dumps(msg)}) + "\n")
    sys.stdout.flush()
`

func writeBot(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bot.py")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func turnLineOf(t *testing.T, res TurnResult) map[string]any {
	t.Helper()
	if res.Err != nil {
		t.Fatalf("turn failed: %v", res.Err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(res.Response), &m); err != nil {
		t.Fatalf("response %q: %v", res.Response, err)
	}
	return m
}

func TestScriptedBotIsToldWhoItIsAndItsStderrIsKept(t *testing.T) {
	h, _ := scriptedHarness(t)
	bot := writeBot(t, turnEchoBot)
	lead := h.createScripted("lead", "", bot)
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "worker", ParentID: lead, Provider: "scripted",
		Model: bot, Instructions: "check the build"})
	if err != nil {
		t.Fatal(err)
	}
	first := turnLineOf(t, h.send(id, "hello"))
	want := map[string]any{"id": id, "name": "worker", "path": "lead/worker", "parent": "lead", "parent_id": lead,
		"instructions": "check the build"}
	if !jsonEq(first["agent"], want) {
		t.Fatalf("first turn agent = %v\nwant %v", first["agent"], want)
	}
	h.send(id, "again")

	// Reset stops the process (its stderr drained) and starts a fresh
	// context: the next process gets its identity and no history.
	if err := h.c.Reset(id); err != nil {
		t.Fatal(err)
	}
	data, err := faultfs.ReadFile(h.fs, filepath.Join(h.c.agentDir(id), stderrlog.Name))
	if err != nil || string(data) != "stderr: hello\nstderr: again\n" {
		t.Fatalf("stderr.log = %q, %v; want both healthy turns' stderr", data, err)
	}
	after := turnLineOf(t, h.send(id, "fresh"))
	if after["history"] != nil || after["context"] != nil || !jsonEq(after["agent"], want) {
		t.Fatalf("first turn after agent reset = %v, want the identity and no history", after)
	}
}

func TestHistoryContextModeFromMetadataSurvivesARestart(t *testing.T) {
	h, _ := scriptedHarness(t)
	bot := writeBot(t, turnEchoBot)
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "ctx", Provider: "scripted", Model: bot,
		Metadata: map[string]string{"history": "context"}})
	if err != nil {
		t.Fatal(err)
	}
	h.send(id, "one")
	h.restart()
	line := turnLineOf(t, h.send(id, "two"))
	if line["history"] != nil {
		t.Fatalf("context mode replays: %v", line)
	}
	ctx, _ := line["context"].([]any)
	if len(ctx) != 1 || ctx[0].(map[string]any)["message"] != "one" {
		t.Fatalf("context = %v, want the turn before the restart", line["context"])
	}

	// Without the metadata the history is a replay (the default).
	plain := h.createScripted("plain", "", bot)
	h.send(plain, "one")
	h.restart()
	if line := turnLineOf(t, h.send(plain, "two")); line["history"] == nil || line["context"] != nil {
		t.Fatalf("default mode: %v, want a history to replay", line)
	}
}

func TestBadHistoryModeFailsTheCreateNamingIt(t *testing.T) {
	h, _ := scriptedHarness(t)
	_, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "bad", Provider: "scripted", Model: writeBot(t, turnEchoBot),
		Metadata: map[string]string{"history": "contxt"}})
	if err == nil || !strings.Contains(err.Error(), `"contxt"`) {
		t.Fatalf("create with history=contxt: %v", err)
	}
}

func jsonEq(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// askBot asks for approval on every turn and answers with the response.
const askBot = `import os, sys
sys.path.insert(0, os.environ["WARREN_TEST_HELPER"])
from warren_script import read_turn, call_tool, done
while True:
    read_turn()
    r = call_tool("await_input", kind="approval", prompt="go?", timeout=600)
    done("got " + r["response"])
`

func TestAnAnswerSentTheMomentAWaitIsShownLands(t *testing.T) {
	h, _ := scriptedHarness(t)
	id := h.createScripted("asker", "", writeBot(t, askBot))
	ch, unsubscribe := h.c.bus.Subscribe(id)
	defer unsubscribe()
	go h.c.Send(context.Background(), id, "deploy", "", "", nil) //nolint:errcheck // the result is the resume's
	var tokenID string
	for ev := range ch {
		if ev.Entry.Event == schema.RunWaiting {
			var d struct {
				TokenID string `json:"token_id"`
			}
			if err := json.Unmarshal(ev.Entry.Data, &d); err != nil {
				t.Fatal(err)
			}
			tokenID = d.TokenID
			break
		}
	}
	// The turn that logged the wait is still stopping its process.
	res, err := h.c.ResumeByID(context.Background(), id, tokenID, "yes")
	if err != nil || res.Err != nil || res.Response != "got yes" {
		t.Fatalf("resume at once = %+v, %v", res, err)
	}
}
