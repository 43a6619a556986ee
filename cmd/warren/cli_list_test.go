package main

import (
	"context"
	"encoding/json"
	"github.com/warren-dev/warren/homedir"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/protocol"
)

// createAll creates inproc echo agents: each entry is NAME or NAME PARENT.
func createAll(t *testing.T, home string, specs ...string) {
	t.Helper()
	for _, s := range specs {
		f := strings.Fields(s)
		args := []string{"agent", "create", f[0], "--provider", "inproc", "--model", "echo", "--home", home}
		if len(f) > 1 {
			args = append(args, "--parent", f[1])
		}
		mustOK(t, args...)
	}
}

// column returns the first field of each table row after the header.
func column(out string) []string {
	var rows []string
	for i, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if i > 0 {
			rows = append(rows, strings.Fields(l)[0])
		}
	}
	return rows
}

// TestListSortsNaturallyAndFilters: agent list orders by path, numbers
// as numbers; --status keeps one status; --wide adds provider, model, last
// turn and tokens; terminate --recursive ends a subtree deepest first and
// list --all shows it with when it ended.
func TestListSortsNaturallyAndFilters(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	createAll(t, home, "lead", "w10 lead", "w2 lead", "w1 lead", "sub w2", "lead-2")
	mustOK(t, "agent", "send", "lead/w2", "hi", "--home", home)

	list := mustOK(t, "agent", "ls", "--home", home)
	if got, want := strings.Join(column(list), " "), "lead lead/w1 lead/w2 lead/w2/sub lead/w10 lead-2"; got != want {
		t.Errorf("agent ls order = %q, want %q:\n%s", got, want, list)
	}
	if h := strings.Fields(strings.Split(list, "\n")[0]); strings.Join(h, " ") != "PATH STATUS PENDING" {
		t.Errorf("agent list header %q", h)
	}
	wide := mustOK(t, "agent", "list", "--wide", "--home", home)
	lines := strings.Split(wide, "\n")
	if !strings.HasPrefix(lines[0], "PATH") || !strings.Contains(lines[0], "PROVIDER  MODEL  LAST TURN  TOKENS (IN/OUT/CACHED)") {
		t.Errorf("agent list --wide header %q", lines[0])
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
		case f[0] == "lead/w2" && !strings.Contains(l, "inproc    echo   ") || f[0] == "lead/w2" && !strings.Contains(l, " ago"):
			t.Errorf("agent list --wide row of w2 (one turn) lacks provider, model or last turn: %q", l)
		case f[0] == "lead/w1" && !strings.Contains(l, "echo   -"):
			t.Errorf("agent list --wide row of w1 (no turn) should show - for the last turn: %q", l)
		}
	}
	lj := mustJSON(t, "agent", "list", "--home", home)
	for _, a := range lj["agents"].([]any) {
		m := a.(map[string]any)
		if _, err := time.Parse(time.RFC3339Nano, m["created_at"].(string)); err != nil {
			t.Errorf("list item %v: created_at %v", m["path"], err)
		}
		if _, has := m["last_turn_at"]; has != (m["path"] == "lead/w2") {
			t.Errorf("list item %v: last_turn_at %v (only w2 had a turn)", m["path"], m["last_turn_at"])
		}
	}

	// terminate without --recursive refuses a parent and says what to do.
	if r := warren(t, "agent", "rm", "lead/w2", "--home", home); r.code != exit.DaemonErr || !strings.Contains(r.stderr, "--recursive") {
		t.Errorf("agent rm of a parent: exit %d stderr %q, want 1 naming --recursive", r.code, r.stderr)
	}
	out := mustOK(t, "agent", "terminate", "--recursive", "lead/w2", "--home", home)
	if got := strings.Join(column("x\n"+out), " "); got != "terminated terminated" ||
		!strings.Contains(strings.Split(out, "\n")[0], "lead/w2/sub") || !strings.Contains(strings.Split(out, "\n")[1], "lead/w2") {
		t.Errorf("terminate --recursive printed %q; want sub first, then w2", out)
	}
	if got := strings.Join(column(mustOK(t, "agent", "list", "--home", home)), " "); got != "lead lead/w1 lead/w10 lead-2" {
		t.Errorf("after terminate --recursive, agent list = %q", got)
	}
	all := mustOK(t, "agent", "list", "--all", "--home", home)
	if got := strings.Join(column(all), " "); got != "lead lead/w1 lead/w2 lead/w2/sub lead/w10 lead-2" {
		t.Errorf("agent list --all = %q:\n%s", got, all)
	}
	if !strings.Contains(strings.Split(all, "\n")[0], "ENDED") || !strings.Contains(all, "terminated  0        ") {
		t.Errorf("agent list --all lacks the ENDED column or the terminated rows:\n%s", all)
	}
	only := mustJSON(t, "agent", "list", "--status", "terminated", "--home", home)
	agents := only["agents"].([]any)
	if len(agents) != 2 {
		t.Fatalf("list --status terminated = %v", only)
	}
	for _, a := range agents {
		m := a.(map[string]any)
		ended, err := time.Parse(time.RFC3339Nano, m["terminated_at"].(string))
		if err != nil || time.Since(ended) > time.Hour || m["status"] != "terminated" {
			t.Errorf("terminated item %v: terminated_at %v (%v)", m, m["terminated_at"], err)
		}
	}
	if got := strings.Join(column(mustOK(t, "agent", "list", "--status", "idle", "--home", home)), " "); got != "lead lead/w1 lead/w10 lead-2" {
		t.Errorf("list --status idle = %q", got)
	}
	// What the daemon reads back from the logs after a restart is the same.
	mustOK(t, "daemon", "stop", "--home", home)
	startDaemon(t, home)
	again := mustJSON(t, "agent", "list", "--status", "terminated", "--home", home)
	if b1, b2 := mustMarshal(t, sortedByPath(only)), mustMarshal(t, sortedByPath(again)); b1 != b2 {
		t.Errorf("terminated agents after a restart:\n%s\nbefore:\n%s", b2, b1)
	}
}

func sortedByPath(res map[string]any) []any {
	as := res["agents"].([]any)
	ms := make([]map[string]any, len(as))
	for i, a := range as {
		ms[i] = a.(map[string]any)
	}
	render.SortAgents(ms)
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTerminateRecursiveRefusesAMidTurnSubtree: when an agent of the
// subtree is mid-turn, nothing is terminated.
func TestTerminateRecursiveRefusesAMidTurnSubtree(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	bot := newBlockingBot(t, home, "bot")
	startDaemon(t, home)
	createAll(t, home, "lead", "idle1 lead")
	mustOK(t, "agent", "create", "slow", "--parent", "lead", "--provider", "scripted", "--model", bot.script, "--home", home)
	send := startWarren(t, "agent", "send", "lead/slow", "work", "--home", home)
	bot.waitStarted(t)
	r := warren(t, "agent", "terminate", "-r", "lead", "--home", home)
	if r.code != exit.DaemonErr || !strings.Contains(r.stderr, "nothing was terminated: lead/slow is mid-turn") {
		t.Errorf("terminate -r with a child mid-turn: exit %d stderr %q", r.code, r.stderr)
	}
	if got := strings.Join(column(mustOK(t, "agent", "list", "--home", home)), " "); got != "lead lead/idle1 lead/slow" {
		t.Errorf("after a refused terminate -r, agent list = %q", got)
	}
	bot.release(t)
	if code := send.wait(t); code != 0 {
		t.Fatalf("send: exit %d %s", code, send.errOut.String())
	}
	mustOK(t, "agent", "terminate", "-r", "lead", "--home", home)
	if out := mustOK(t, "agent", "list", "--home", home); out != "no agents\n" {
		t.Errorf("after terminate -r lead: %q", out)
	}
}

// TestInspectShowsInstructionsTimesPendingMetadata: the human view of
// agent inspect shows the instructions, when the agent was created and
// last ran, its pending messages and its metadata.
func TestInspectShowsInstructionsTimesPendingMetadata(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	bot := newBlockingBot(t, home, "bot")
	startDaemon(t, home)
	mustOK(t, "agent", "create", "lead", "--provider", "inproc", "--model", "echo", "--instructions", "lead the team\nkindly", "--home", home)
	mustOK(t, "agent", "create", "slow", "--parent", "lead", "--provider", "scripted", "--model", bot.script,
		"--metadata", "role=worker", "--metadata", "tier=2", "--instructions", "work slowly", "--home", home)
	send := startWarren(t, "agent", "send", "lead/slow", "work", "--home", home)
	bot.waitStarted(t)
	// A message to the busy agent stays pending until its turn ends.
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cl, err := protocol.Dial(ctx, homedir.SocketPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := cl.Call(ctx, "tool.call", map[string]any{"agent_id": "lead", "tool": "send_message",
		"arguments": map[string]any{"recipient": "slow", "text": "a note for later"}})
	if err != nil || res["error"] != nil {
		t.Fatalf("send_message from lead to lead/slow: %v %v", res, err)
	}
	out := mustOK(t, "agent", "inspect", "lead/slow", "--home", home)
	wd, _ := os.Getwd()
	for _, want := range []string{"status:    running", "cwd:       " + wd + "\n", "created:   20", " ago)", "last turn: 20", "pending:   1 message\n",
		"metadata:\n  role=worker\n  tier=2\n", "instructions:\n  work slowly\n", "inbox:\n  from=lead  a note for later"} {
		if !strings.Contains(out, want) {
			t.Errorf("agent inspect lacks %q:\n%s", want, out)
		}
	}
	lead := mustOK(t, "agent", "inspect", "lead", "--home", home)
	if !strings.Contains(lead, "instructions:\n  lead the team\n  kindly\n") || !strings.Contains(lead, "last turn: -\n") {
		t.Errorf("agent inspect lead:\n%s", lead)
	}
	ij := mustJSON(t, "agent", "inspect", "lead/slow", "--home", home)
	if ij["instructions"] != "work slowly" || ij["created_at"] == nil || ij["last_turn_at"] == nil {
		t.Errorf("agent inspect --json = %v", ij)
	}
	bot.release(t)
	send.wait(t)
}

// TestEventsWithoutFollowPrintsTheLogAndExits: `warren events` prints
// what is logged (of one agent, or of all) and exits; --since skips.
func TestEventsWithoutFollowPrintsTheLogAndExits(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	createAll(t, home, "lead", "w1 lead")
	mustOK(t, "agent", "send", "lead/w1", "ping", "--home", home)

	out := mustOK(t, "events", "lead/w1", "--home", home)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.Contains(lines[0], "  lead/w1  #1  agent.created  ") || !strings.Contains(out, "turn.complete") {
		t.Errorf("events lead/w1:\n%s", out)
	}
	for i, l := range lines {
		if !strings.Contains(l, "  #"+strconv.Itoa(i+1)+"  ") {
			t.Errorf("events line %d is not seq %d: %q", i, i+1, l)
		}
	}
	since := mustOK(t, "events", "--since", "2", "lead/w1", "--home", home)
	if strings.Contains(since, "#1  ") || strings.Contains(since, "#2  ") || !strings.Contains(since, "#3  ") {
		t.Errorf("events --since 2:\n%s", since)
	}
	all := mustOK(t, "events", "--home", home)
	if !strings.Contains(all, "  lead  #1  agent.created") || !strings.Contains(all, "  lead/w1  #1  agent.created") {
		t.Errorf("events (all agents):\n%s", all)
	}
	if strings.Index(all, "  lead  #1  ") > strings.Index(all, "  lead/w1  #1  ") {
		t.Errorf("events (all agents) is not in path order:\n%s", all)
	}
	// --json: one {"event": {...}} per line, like events -f.
	for _, l := range strings.Split(strings.TrimSpace(mustOK(t, "events", "lead/w1", "--json", "--home", home)), "\n") {
		var fr struct {
			Event map[string]any `json:"event"`
		}
		if err := json.Unmarshal([]byte(l), &fr); err != nil || fr.Event["seq"] == nil || fr.Event["agent_id"] == nil {
			t.Errorf("events --json line %q (%v)", l, err)
		}
	}
	if r := warren(t, "events", "--deltas", "--home", home); r.code != exit.Usage {
		t.Errorf("events --deltas without -f: exit %d, want 2", r.code)
	}
	if r := warren(t, "events", "nobody", "--home", home); r.code != exit.DaemonErr {
		t.Errorf("events of an unknown agent: exit %d, want 1 (%s)", r.code, r.stderr)
	}
}
