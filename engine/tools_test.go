package engine

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// The helpers of the tool tests (tools_*_test.go). These tests were
// package toolexec's, written against a fake Env; they now run every call
// through the engine (a harness's Core) and check what it made durable:
// the caller's tool.call entries, the entries the call added to other
// logs, the messages in the inboxes, and the reservations.

type A = map[string]any

// idOf is the id family gives the agent named name: the same in every
// harness, so that the ids a call derives from its position can be
// compared across daemons.
func idOf(name string) string {
	h := md5.Sum([]byte(name))
	return hex.EncodeToString(h[:])
}

// family starts a harness without wake turns (setup may change that)
// holding lead (a root) with children w1 and w2, w1's child w1a and a
// second root, other; each agent's id is idOf(its name).
func family(t *testing.T, setup ...func(h *harness)) *harness {
	t.Helper()
	h := newHarness(t, append([]func(*harness){func(h *harness) { h.noWake = true }}, setup...)...)
	h.add("lead", "", "echo")
	h.add("w1", "lead", "echo")
	h.add("w2", "lead", "echo")
	h.add("w1a", "w1", "echo")
	h.add("other", "", "echo")
	return h
}

// add creates an agent named name with id idOf(name) under the agent named
// parent ("" for a root), running model.
func (h *harness) add(name, parent, model string) string {
	h.t.Helper()
	pid := ""
	if parent != "" {
		pid = idOf(parent)
	}
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{ID: idOf(name), Name: name, ParentID: pid, Provider: "inproc", Model: model})
	if err != nil {
		h.t.Fatalf("create %s: %v", name, err)
	}
	return id
}

// outside calls a tool for agent self outside any run (the operator's
// tool.call) and returns the reply and the tool.call entry the call logged
// in self's log, failing unless it logged exactly one.
func outside(t *testing.T, h *harness, self, tool string, args A) (map[string]any, schema.ToolCallData) {
	t.Helper()
	before := len(toolCalls(t, h, self))
	res, err := h.c.CallTool(context.Background(), self, tool, args)
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	calls := toolCalls(t, h, self)
	if len(calls) != before+1 {
		t.Fatalf("%s %v: the caller's log holds %d new tool.call entries, want one", tool, args, len(calls)-before)
	}
	return res, calls[len(calls)-1]
}

// toolCalls decodes the tool.call entries of agent id's log, in log order.
func toolCalls(t *testing.T, h *harness, id string) []schema.ToolCallData {
	t.Helper()
	var out []schema.ToolCallData
	for _, e := range h.entries(id) {
		if e.Event != schema.ToolCall {
			continue
		}
		var d schema.ToolCallData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("tool.call entry %s: %v", e.Data, err)
		}
		out = append(out, d)
	}
	return out
}

// callTools lists the tools of agent id's tool.call entries, in log order.
func callTools(t *testing.T, h *harness, id string) string {
	t.Helper()
	var out []string
	for _, d := range toolCalls(t, h, id) {
		out = append(out, d.Tool)
	}
	return strings.Join(out, ",")
}

// wantReply checks a reply: want is a substring of its error, or "" for
// success.
func wantReply(t *testing.T, res map[string]any, want string) {
	t.Helper()
	text, isErr := tools.IsError(res)
	switch {
	case want == "" && isErr:
		t.Fatalf("got error %q, want success", text)
	case want != "" && !isErr:
		t.Fatalf("got %v, want an error containing %q", res, want)
	case want != "" && !strings.Contains(text, want):
		t.Fatalf("got error %q, want it to contain %q", text, want)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// logMarks are the lengths of the agents' logs at one moment (marks), for
// effects.
type logMarks map[string]int

func (h *harness) marks() logMarks {
	h.t.Helper()
	m := logMarks{}
	for _, a := range h.c.agentList() {
		m[a.ID()] = len(h.entries(a.ID()))
	}
	return m
}

// effects lists the entries logged since m in every agent's log but the
// tool.call entries of agent self (the call's own record): "<agent>
// <event> <data>", agents by name, each log's entries in order, with
// family's ids written as names.
func (h *harness) effects(m logMarks, self string) []string {
	h.t.Helper()
	type named struct {
		name string
		id   string
	}
	var agents []named
	for _, a := range h.c.agentList() {
		agents = append(agents, named{a.Name(), a.ID()})
	}
	sort.Slice(agents, func(i, j int) bool { return agents[i].name < agents[j].name })
	var out []string
	for _, a := range agents {
		for _, e := range h.entries(a.id)[m[a.id]:] {
			if a.id == self && e.Event == schema.ToolCall {
				continue
			}
			out = append(out, names(a.name+" "+e.Event+" "+string(e.Data)))
		}
	}
	return out
}

// names writes family's ids in s as names.
func names(s string) string {
	for _, n := range []string{"lead", "w1a", "w1", "w2a", "w2", "w3", "other"} {
		s = strings.ReplaceAll(s, idOf(n), n)
	}
	return s
}

// eventsOf lists the events of effects, without their data.
func eventsOf(effects []string) string {
	var out []string
	for _, e := range effects {
		f := strings.Fields(e)
		out = append(out, f[0]+" "+f[1])
	}
	return strings.Join(out, ",")
}

// put enqueues a message from sender to recipient with the engine's own
// enqueue (the checks and the append every delivery makes), to fill an
// inbox.
func (h *harness) put(id, sender, recipient string, kind inbox.Kind, text string) {
	h.t.Helper()
	if err := h.c.enqueue(h.c.newMessage(id, sender, recipient, kind, text)); err != nil {
		h.t.Fatalf("enqueue %s: %v", id, err)
	}
}

// pendingMessage is the message id pending for recipient (an agent or
// USER).
func (h *harness) pendingMessage(recipient, id string) (inbox.Message, bool) {
	var pending []inbox.Message
	if recipient == tree.User {
		pending = h.c.UserPending(context.Background())
	} else if a, ok := h.c.agent(recipient); ok {
		pending = pendingOf(a)
	}
	i := slices.IndexFunc(pending, func(m inbox.Message) bool { return m.ID == id })
	if i < 0 {
		return inbox.Message{}, false
	}
	return pending[i], true
}

// handRun is a turn run by hand, the way runTurn runs one, with the test
// as the provider: the test makes the calls of each attempt itself,
// through the ToolCaller the engine gives the attempt (newRunTools, as
// sendOnce makes it).
type handRun struct {
	h       *harness
	a       *agent
	plan    turnPlan
	running *runningTurn
	// tools are the current attempt's.
	tools *runTools
}

// handTurn starts a turn of agent id by hand: it claims the agent, starts
// the turn (run runID, the agent's next turn, shown the pending messages
// shown), logs turn.start and starts its first attempt.
func (h *harness) handTurn(id, runID string, shown ...string) *handRun {
	h.t.Helper()
	a, ok := h.c.agent(id)
	if !ok {
		h.t.Fatalf("agent %s not found", id)
	}
	noErr(h.t, a.Claim())
	plan, running, released := a.StartTurn(TurnRequest{Prompt: "go", MessageIDs: shown}, func(error) {},
		func(string) string { return "echo" }, func() string { return runID })
	noErr(h.t, released)
	logs(h.t, a, schema.TurnStart, schema.TurnStartData{RunID: plan.RunID, Turn: plan.Turn, BootID: h.c.bootID, Prompt: "go",
		Provider: plan.Provider, Model: plan.Model, MessageIDs: nonNil(shown)})
	r := &handRun{h: h, a: a, plan: plan, running: running}
	r.attempt()
	return r
}

// attempt ends the current attempt, if any, once its calls are logged,
// and starts the next attempt of the run (a retry): its ToolCaller
// answers the calls the log records for the run from the record.
func (r *handRun) attempt() *runTools {
	r.h.t.Helper()
	if r.tools != nil {
		noErr(r.h.t, r.tools.Drain())
	}
	r.tools = r.h.c.newRunTools(r.a, r.plan.RunID, r.plan.Turn)
	return r.tools
}

// end ends the turn as its last attempt ending with err ends it (nil:
// complete; provider.ErrRunSuspended: the run waits), once the attempt's
// calls are logged, and runs the turn's aftermath (deferred spawns, a
// completion, the next wake).
func (r *handRun) end(err error) TurnResult {
	r.h.t.Helper()
	if derr := r.tools.Drain(); derr != nil && err == nil {
		err = derr
	}
	var res TurnResult
	outcome := r.h.c.endTurn(context.Background(), r.a, r.plan, "done", 1, provider.Usage{}, err, &res)
	r.running.End()
	r.h.c.finishTurn(r.a, outcome)
	return res
}

// runCalls are the tool.call entries of agent id's log for run runID.
func runCalls(t *testing.T, h *harness, id, runID string) []schema.ToolCallData {
	t.Helper()
	var out []schema.ToolCallData
	for _, d := range toolCalls(t, h, id) {
		if d.RunID == runID {
			out = append(out, d)
		}
	}
	return out
}

// wantNoReservations fails if any checked message still holds room.
func wantNoReservations(t *testing.T, h *harness) {
	t.Helper()
	if n := h.c.resv.Len(); n != 0 {
		t.Fatalf("%d messages still hold reserved room", n)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonInto(s string, v any) error { return json.Unmarshal([]byte(s), v) }
