package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// The tools a parent uses on its children (tools_children.go).

func TestSpawnAgent(t *testing.T) {
	cases := []struct {
		name  string
		args  A
		opts  func(h *harness)
		setup func(h *harness)
		want  string
	}{
		{name: "a bad name", args: A{"name": "USER", "instructions": "x"}, want: "reserved"},
		{name: "a name taken", args: A{"name": "w1", "instructions": "x"}, want: `agent name taken: lead already has a child named "w1"`},
		{name: "the parent's name", args: A{"name": "lead", "instructions": "x"}, want: "may not have its parent's name"},
		{name: "an unknown provider", args: A{"name": "w3", "instructions": "x", "provider": "nope"}, want: `unknown provider "nope"`},
		{name: "instructions over the limit", args: A{"name": "w3", "instructions": strings.Repeat("x", 900) + "y"}, want: "over the limit",
			opts: func(h *harness) { h.cfg.Limits.MessageBytes = 900 }},
		{name: "creation fails", args: A{"name": "w3", "instructions": "x"}, want: `spawning "w3" failed: `,
			setup: func(h *harness) { h.fs.Inject(faultfs.Rule{Kind: faultfs.OpMkdir, Err: errString("disk full")}) }},
		{name: "created at once outside a turn", args: A{"name": "w3", "instructions": "x", "metadata": A{"k": "v"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []func(*harness)
			if tc.opts != nil {
				opts = append(opts, tc.opts)
			}
			h := family(t, opts...)
			if tc.setup != nil {
				tc.setup(h)
			}
			lead := idOf("lead")
			res, _ := outside(t, h, lead, tools.ToolSpawnAgent, tc.args)
			h.fs.ClearRules()
			wantReply(t, res, tc.want)
			if tc.name == "creation fails" && !strings.Contains(res["error"].(string), "disk full") {
				t.Fatalf("the failed creation reported %v, want its cause", res)
			}
			child, err := h.c.tree.ChildByName(lead, "w3")
			if tc.want != "" {
				if err == nil || len(h.c.agentList()) != 5 {
					t.Fatalf("a refused spawn made a child (%s; %d agents)", child, len(h.c.agentList()))
				}
				return
			}
			// Outside a turn the child exists once the call is answered.
			id, _ := res["agent_id"].(string)
			a, ok := h.c.agent(id)
			if res["status"] != "accepted" || res["name"] != "w3" || err != nil || child != id || !ok {
				t.Fatalf("result %v; lead's child w3: %s, %v", res, child, err)
			}
			if v, _ := a.Metadata("k"); v != "v" || a.Name() != "w3" {
				t.Fatalf("the child is %s with metadata k=%q", a.Name(), v)
			}
			var created schema.AgentCreatedData
			for _, e := range h.entries(id) {
				if e.Event == schema.AgentCreated {
					noErr(t, json.Unmarshal(e.Data, &created))
				}
			}
			if created.Model != "echo" || created.Provider != "inproc" {
				t.Fatalf("the child was created with %s/%s, want the parent's inproc/echo filled in", created.Provider, created.Model)
			}
		})
	}
}

func TestSpawnInATurnIsDeferredWithADerivedID(t *testing.T) {
	h := family(t)
	lead := idOf("lead")
	args := A{"name": "w3", "instructions": "x"}
	run := h.handTurn(lead, "run1")
	o1, err := run.tools.CallTool(t.Context(), tools.ToolSpawnAgent, args)
	if err != nil {
		t.Fatal(err)
	}
	wantReply(t, o1, "")
	id, _ := o1["agent_id"].(string)
	if _, ok := h.c.agent(id); ok || id == "" {
		t.Fatalf("a spawn in a turn created the child %q at once", id)
	}
	// The same call at the same position in another daemon derives the
	// same child id.
	h2 := family(t)
	run2 := h2.handTurn(lead, "run1")
	o2, err := run2.tools.CallTool(t.Context(), tools.ToolSpawnAgent, args)
	if err != nil || o2["agent_id"] != id {
		t.Fatalf("the same call derived ids %v and %v (%v)", id, o2["agent_id"], err)
	}
	run2.end(nil)
	// The same call again (the run's next attempt) is accepted, naming the
	// same child; a call at another position naming the same child is not.
	again := run.attempt()
	o3, err := again.CallTool(t.Context(), tools.ToolSpawnAgent, args)
	if err != nil || o3["agent_id"] != id {
		t.Fatalf("the same spawn again: %v, %v", o3, err)
	}
	o4, err := again.CallTool(t.Context(), tools.ToolSpawnAgent, args)
	if err != nil {
		t.Fatal(err)
	}
	wantReply(t, o4, "already being spawned in this turn")
	if _, ok := h.c.agent(id); ok {
		t.Fatal("a spawn in a turn created the child before the turn ended")
	}
	// The child is created once, when the turn ends.
	run.end(nil)
	if _, ok := h.c.agent(id); !ok {
		t.Fatal("the deferred child was not created when the turn ended")
	}
	if kids := h.c.tree.Children(lead); len(kids) != 3 {
		t.Fatalf("lead has %d children, want w1, w2 and w3", len(kids))
	}
	if n := h.count(id, schema.AgentCreated); n != 1 {
		t.Fatalf("the child's log has %d agent.created", n)
	}
}

func TestChildTools(t *testing.T) {
	// The held child for poke: its first turn fails, so it is held (no
	// wake) until poked.
	var failing atomic.Bool
	flaky := func(ctx context.Context, tr *inproc.Turn) (string, error) {
		if failing.Load() {
			return "", errors.New("the model is down")
		}
		return inproc.Echo(ctx, tr)
	}
	cases := []struct {
		name   string
		tool   string
		args   A
		opts   func(h *harness)
		setup  func(t *testing.T, h *harness)
		want   string // error substring
		effect string // the entries the call logged beyond its own, with ids as names
		// after checks what the call set going (poke: a turn).
		after  func(t *testing.T, h *harness)
		result string // the result's JSON, when checked
	}{
		{name: "poke", tool: tools.ToolPoke, args: A{"agent_name": "w3"},
			opts: func(h *harness) { h.noWake = false },
			setup: func(t *testing.T, h *harness) {
				failing.Store(true)
				h.prov.Register("flaky", flaky)
				h.add("w3", "lead", "flaky")
				if _, err := h.c.CallTool(context.Background(), idOf("lead"), tools.ToolSendMessage, A{"recipient": "w3", "text": "task"}); err != nil {
					t.Fatal(err)
				}
				h.until("w3's turn failed", func() bool { return h.count(idOf("w3"), schema.TurnFailed) == 1 })
				h.quiet()
				failing.Store(false)
				if a, _ := h.c.agent(idOf("w3")); pendingLen(a) != 1 {
					t.Fatalf("the held child has %d messages pending, want its task", pendingLen(a))
				}
			},
			after: func(t *testing.T, h *harness) {
				h.until("the poked child runs a turn", func() bool { return h.count(idOf("w3"), schema.TurnComplete) == 1 })
				h.quiet()
			},
			result: `{"agent_id":"` + idOf("w3") + `","status":"poked"}`},
		{name: "poke a sibling", tool: tools.ToolPoke, args: A{"agent_name": "other"}, want: `no child agent named "other"`},
		{name: "poke a grandchild", tool: tools.ToolPoke, args: A{"agent_name": "w1a"}, want: `no child agent named "w1a"`},
		{name: "set metadata", tool: tools.ToolSetAgentMetadata, args: A{"agent_name": "w1", "key": "k", "value": "v"},
			effect: `w1 metadata.updated {"key":"k","value":"v"}`,
			result: `{"agent_name":"w1","key":"k","status":"updated","value":"v"}`},
		{name: "delete metadata", tool: tools.ToolSetAgentMetadata, args: A{"agent_name": "w1", "key": "k", "value": nil},
			effect: `w1 metadata.updated {"key":"k","value":null}`,
			result: `{"agent_name":"w1","key":"k","status":"updated","value":null}`},
		{name: "metadata over the limit", tool: tools.ToolSetAgentMetadata, args: A{"agent_name": "w1", "key": "k", "value": "vv"},
			opts: func(h *harness) { h.cfg.Limits.MessageBytes = 2 },
			setup: func(t *testing.T, h *harness) {
				h.tool(idOf("lead"), tools.ToolSetAgentMetadata, A{"agent_name": "w1", "key": "a", "value": "b"})
			}, want: "over the 2-byte limit"},
		{name: "metadata of a stranger", tool: tools.ToolSetAgentMetadata, args: A{"agent_name": "w1a", "key": "k"}, want: "no child agent"},
		{name: "gate", tool: tools.ToolGate, args: A{"agent_name": "w2"}, effect: `w2 tool.gate {"action":"gate","agent_name":"w2"}`,
			result: `{"agent_name":"w2","status":"gated"}`},
		{name: "ungate", tool: tools.ToolUngate, args: A{"agent_name": "w2"}, effect: `w2 tool.gate {"action":"ungate","agent_name":"w2"}`,
			result: `{"agent_name":"w2","status":"ungated"}`},
		{name: "gate a stranger", tool: tools.ToolGate, args: A{"agent_name": "lead"}, want: "no child agent"},
		{name: "permit", tool: tools.ToolPermitTurn, args: A{"agent_name": "w2"}, effect: `w2 tool.permit_turn {"action":"","agent_name":"w2"}`,
			setup:  func(t *testing.T, h *harness) { h.tool(idOf("lead"), tools.ToolGate, A{"agent_name": "w2"}) },
			result: `{"agent_name":"w2","status":"permitted"}`},
		{name: "permit an ungated child", tool: tools.ToolPermitTurn, args: A{"agent_name": "w2"}, want: "agent is not gated"},
		{name: "permit a busy child", tool: tools.ToolPermitTurn, args: A{"agent_name": "w2"}, want: "agent is not idle",
			setup: func(t *testing.T, h *harness) {
				h.tool(idOf("lead"), tools.ToolGate, A{"agent_name": "w2"})
				claimed(t, h, idOf("w2"))
			}},
		{name: "list children", tool: tools.ToolListChildren,
			setup: func(t *testing.T, h *harness) {
				lead := idOf("lead")
				h.tool(lead, tools.ToolGate, A{"agent_name": "w2"})
				h.tool(lead, tools.ToolSetAgentMetadata, A{"agent_name": "w2", "key": "role", "value": "r"})
				h.put("m", lead, idOf("w2"), inbox.KindRequest, "x")
				claimed(t, h, idOf("w2"))
			},
			result: `{"children":[{"agent_id":"` + idOf("w1") + `","gated":false,"metadata":{},"name":"w1","pending_messages":0,"state":"idle"},` +
				`{"agent_id":"` + idOf("w2") + `","gated":true,"metadata":{"role":"r"},"name":"w2","pending_messages":1,"state":"busy"}]}`},
		{name: "inspect", tool: tools.ToolInspectAgent, args: A{"name": "w1"},
			setup: func(t *testing.T, h *harness) {
				// One more than an inspection lists.
				h.put("m00", tree.User, idOf("w1"), inbox.KindRequest, "a")
				for i := 1; i <= recentCount; i++ {
					h.put(fmt.Sprintf("m%02d", i), idOf("lead"), idOf("w1"), inbox.KindRequest, "b")
				}
			},
			result: inspectResult()},
		{name: "inspect a stranger", tool: tools.ToolInspectAgent, args: A{"name": "other"}, want: `no child agent named "other"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []func(*harness)
			if tc.opts != nil {
				opts = append(opts, tc.opts)
			}
			h := family(t, opts...)
			if tc.setup != nil {
				tc.setup(t, h)
			}
			lead := idOf("lead")
			before := h.marks()
			res, _ := outside(t, h, lead, tc.tool, tc.args)
			wantReply(t, res, tc.want)
			if tc.after != nil {
				tc.after(t, h)
			}
			effects := h.effects(before, lead)
			if tc.want != "" {
				if len(effects) != 0 {
					t.Fatalf("a refused %s logged %v", tc.tool, effects)
				}
				return
			}
			switch {
			case tc.after != nil:
			case tc.effect == "" && len(effects) != 0:
				t.Fatalf("%s logged %v, want nothing", tc.tool, effects)
			case tc.effect != "" && (len(effects) != 1 || effects[0] != tc.effect):
				t.Fatalf("logged %v, want [%s]", effects, tc.effect)
			}
			if tc.result != "" {
				if got := jsonOf(t, res); got != tc.result {
					t.Fatalf("result %s\nwant %s", got, tc.result)
				}
			}
		})
	}
}

// inspectResult is inspect_agent's result on w1 holding m00 from USER and
// m01... from lead, one more than it lists.
func inspectResult() string {
	items := []string{`{"from":"USER","message_id":"m00","text":"a"}`}
	for i := 1; i < recentCount; i++ {
		items = append(items, fmt.Sprintf(`{"from":"lead","message_id":"m%02d","text":"b"}`, i))
	}
	return fmt.Sprintf(`{"gated":false,"metadata":{},"pending_messages":%d,"recent_messages":[%s],"state":"idle"}`,
		recentCount+1, strings.Join(items, ","))
}

// claimed marks agent id busy, as a turn's claim does, until the test
// ends.
func claimed(t *testing.T, h *harness, id string) {
	t.Helper()
	a, _ := h.c.agent(id)
	noErr(t, a.Claim())
	t.Cleanup(a.Unclaim)
}

func TestEffectFailureFailsTheCall(t *testing.T) {
	for _, tc := range []struct {
		log  string // the agent whose log refuses the call's effect
		tool string
		args A
	}{
		{"w1", tools.ToolSetAgentMetadata, A{"agent_name": "w1", "key": "k", "value": "v"}},
		{"w1", tools.ToolGate, A{"agent_name": "w1"}},
		{"lead", tools.ToolRemindMe, A{"reason": "r", "timeout": 1}},
		{"lead", tools.ToolCheckInbox, nil},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			h := family(t)
			lead := idOf("lead")
			h.put("m", tree.User, lead, inbox.KindRequest, "x")
			h.fs.Inject(faultfs.Rule{Kind: faultfs.OpSync, Path: idOf(tc.log) + "/events.jsonl", Err: errString("log poisoned")})
			_, err := h.c.CallTool(context.Background(), lead, tc.tool, tc.args)
			h.fs.ClearRules()
			if err == nil || !strings.Contains(err.Error(), "log poisoned") {
				t.Fatalf("%s with %s's log failing: err %v, want the failure", tc.tool, tc.log, err)
			}
			if n := len(toolCalls(t, h, lead)); n != 0 {
				t.Fatalf("%s failed but logged %d tool.call entries", tc.tool, n)
			}
		})
	}
}
