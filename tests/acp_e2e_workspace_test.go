package tests

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider/llmfake"
)

// editModel drives a real agent CLI to edit a file with its own shell
// tool: on the E2E-EDIT prompt it calls the agent's Bash tool to append a
// line to notes.md; after that tool's result it stalls the first time
// (the daemon is killed there) and answers "E2E edited" after that.
type editModel struct {
	mu      sync.Mutex
	stalled chan struct{}
	stalls  int
	bash    int // the bash calls the model made
}

func (m *editModel) respond(r llmfake.Request) llmfake.Reply {
	var bash llmfake.Tool
	found := false
	for _, t := range r.Tools() {
		if t.Name == "Bash" || t.Name == "bash" {
			bash, found = t, true
		}
	}
	if !found {
		return llmfake.Reply{Text: "E2E title"}
	}
	_, msgs := r.Messages()
	pi, tools := promptIndex(msgs, "E2E-EDIT")
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case pi < 0:
		return llmfake.Reply{Text: "no E2E prompt"}
	case tools == 0:
		m.bash++
		return llmfake.Reply{Calls: []llmfake.Call{bash.Call("call_edit_"+string(rune('0'+m.bash)),
			`{"command":"echo 'a line from the agent' >> notes.md","description":"Append a line to notes.md"}`)}}
	case m.stalls == 0:
		m.stalls++
		m.stalled <- struct{}{}
		return llmfake.Reply{Text: "checking the file", Stall: true, StallAfter: 2}
	}
	return llmfake.Reply{Text: "E2E edited"}
}

// TestE2EWorkspaceReRunEditsOnce is issue 33's headline with real agent
// CLIs: Claude Code (claude-agent-acp) and OpenCode, each with a
// workspace, append a line to a tracked file with their own shell tool;
// the daemon is killed (-9) while the model is mid-answer after that
// edit; at the start the resume policy (auto: an acp agent with a
// workspace) restores the run's start snapshot and re-runs it; the agent
// edits again and the file holds the line exactly once.
func TestE2EWorkspaceReRunEditsOnce(t *testing.T) {
	for _, name := range []string{"claude", "opencode"} {
		t.Run(name, func(t *testing.T) { testE2EWorkspaceReRun(t, e2eAgentNamed(name)) })
	}
}

func testE2EWorkspaceReRun(t *testing.T, a e2eAgent) {
	bin := e2eAgentBin(t, a)
	m := &editModel{stalled: make(chan struct{}, 4)}
	f := llmfake.New(a.api)
	defer f.Close()
	f.Respond(m.respond)
	d := newTestDaemon(t, modeBinary)
	entry := e2eEntry(t, a, bin, f, filepath.Join(d.dir, "agenthome"))
	entry["permissions"] = "allow" // the agent's own shell tool, unattended
	writeACPConfig(t, d, map[string]map[string]any{a.name: entry})
	repo := gitRepo(t, d.dir)
	d.Start()
	p := map[string]any{"name": "coder", "provider": a.name, "model": a.model, "workspace": map[string]any{"repo": repo}}
	id := str(d.callN("agent.create", p)["agent_id"])
	ws := filepath.Join(d.Home, "workspaces", id)

	go func() {
		_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": id, "message": "E2E-EDIT: append the line to notes.md."})
	}()
	select {
	case <-m.stalled:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the agent never ran its edit; log: %v\nstderr:\n%s", logEvents(t, d, id), agentStderr(d, id))
	}
	if got := readFile(t, filepath.Join(ws, "notes.md")); strings.Count(got, "a line from the agent") != 1 {
		t.Fatalf("notes.md mid-turn: %q", got)
	}
	pid := agentPid(t, d, id)
	d.Kill()
	d.Start()
	waitGroupEmpty(t, pid, "the agent's process group after kill -9")
	waitEvent(t, d, id, "the re-run's turn.complete", func(ev string, data map[string]any) bool {
		return ev == "turn.complete" && strings.Contains(mustJSON(t, data), "E2E edited")
	})
	if got := readFile(t, filepath.Join(ws, "notes.md")); got != "# notes\na line from the agent\n" {
		t.Fatalf("notes.md after the re-run: %q, want the line exactly once", got)
	}
	m.mu.Lock()
	calls := m.bash
	m.mu.Unlock()
	if calls != 2 {
		t.Fatalf("the model made %d edits, want 2 (the interrupted run's and the re-run's)", calls)
	}
	log := readLog(t, d, id)
	for _, want := range []string{`"event":"workspace.restored"`, `"reason":"rerun"`, `"by":"auto"`} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log lacks %s:\n%s", want, log)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, "notes.md")); err != nil || readFile(t, filepath.Join(repo, "notes.md")) != "# notes\n" {
		t.Fatal("the main checkout's notes.md changed")
	}
}
