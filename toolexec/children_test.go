package toolexec

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tools"
)

// inRun runs a parsed call for self at pos and returns the outcome.
func inRun(t *testing.T, f *fakeEnv, self string, tool string, args A, pos Pos) (Outcome, error) {
	t.Helper()
	call, err := Parse(f, tool, args)
	if err != nil {
		t.Fatalf("parse %s %v: %v", tool, args, err)
	}
	return Exec(context.Background(), f, self, call, pos)
}

func TestSpawnAgent(t *testing.T) {
	cases := []struct {
		name  string
		args  A
		setup func(f *fakeEnv)
		want  string
	}{
		{name: "a bad name", args: A{"name": "USER", "instructions": "x"}, want: "reserved"},
		{name: "a name taken", args: A{"name": "w1", "instructions": "x"}, want: `agent name taken: lead already has a child named "w1"`},
		{name: "the parent's name", args: A{"name": "lead", "instructions": "x"}, want: "may not have its parent's name"},
		{name: "an unknown provider", args: A{"name": "w3", "instructions": "x", "provider": "nope"}, want: `unknown provider "nope"`,
			setup: func(f *fakeEnv) { f.badProviders["nope"] = true }},
		{name: "instructions over the limit", args: A{"name": "w3", "instructions": strings.Repeat("x", 900) + "y"}, want: "over the limit",
			setup: func(f *fakeEnv) { f.limits.MessageBytes = 900 }},
		{name: "creation fails", args: A{"name": "w3", "instructions": "x"}, want: `spawning "w3" failed: disk full`,
			setup: func(f *fakeEnv) { f.fail["create"] = errString("disk full") }},
		{name: "created at once outside a turn", args: A{"name": "w3", "instructions": "x", "metadata": A{"k": "v"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := family()
			if tc.setup != nil {
				tc.setup(f)
			}
			res, _ := outside(t, f, idOf("lead"), tools.ToolSpawnAgent, tc.args)
			wantReply(t, res, tc.want)
			if tc.want != "" {
				if f.agents[idOf("lead")].pending2["w3"].ID != "" {
					t.Fatal("a refused spawn was deferred")
				}
				return
			}
			id, _ := res["agent_id"].(string)
			if res["status"] != "accepted" || res["name"] != "w3" || f.effects[0] != "create "+id+" w3 default-model" {
				t.Fatalf("result %v, effects %v", res, f.effects)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestSpawnInATurnIsDeferredWithADerivedID(t *testing.T) {
	f := family()
	pos := Pos{RunID: "run1", Turn: 2, Index: 3}
	args := A{"name": "w3", "instructions": "x"}
	o1, err := inRun(t, f, idOf("lead"), tools.ToolSpawnAgent, args, pos)
	if err != nil || o1.Err != "" {
		t.Fatalf("spawn: %+v %v", o1, err)
	}
	// The same call again (a re-run) derives the same child id and is
	// accepted; a call at another position naming the same child is not.
	o2, _ := inRun(t, family(), idOf("lead"), tools.ToolSpawnAgent, args, pos)
	if o1.Result["agent_id"] != o2.Result["agent_id"] {
		t.Fatalf("the same call derived ids %v and %v", o1.Result["agent_id"], o2.Result["agent_id"])
	}
	again, _ := inRun(t, f, idOf("lead"), tools.ToolSpawnAgent, args, pos)
	if again.Err != "" {
		t.Fatalf("the same spawn again: %q", again.Err)
	}
	other := pos
	other.Index++
	o3, _ := inRun(t, f, idOf("lead"), tools.ToolSpawnAgent, args, other)
	if !strings.Contains(o3.Err, "already being spawned in this turn") {
		t.Fatalf("a second spawn of w3 in the turn: %+v", o3)
	}
	for _, e := range f.effects {
		if strings.HasPrefix(e, "create") {
			t.Fatalf("a spawn in a turn created the child at once: %v", f.effects)
		}
	}
}

func TestChildTools(t *testing.T) {
	cases := []struct {
		name   string
		tool   string
		args   A
		setup  func(f *fakeEnv)
		want   string // error substring
		effect string // the effect asked for, with ids as names
		result string // the result's JSON, when checked
	}{
		{name: "poke", tool: tools.ToolPoke, args: A{"agent_name": "w1"}, effect: "poke w1",
			result: `{"agent_id":"` + idOf("w1") + `","status":"poked"}`},
		{name: "poke a sibling", tool: tools.ToolPoke, args: A{"agent_name": "other"}, want: `no child agent named "other"`},
		{name: "poke a grandchild", tool: tools.ToolPoke, args: A{"agent_name": "w1a"}, want: `no child agent named "w1a"`},
		{name: "set metadata", tool: tools.ToolSetAgentMetadata, args: A{"agent_name": "w1", "key": "k", "value": "v"}, effect: "metadata w1 k=v",
			result: `{"agent_name":"w1","key":"k","status":"updated","value":"v"}`},
		{name: "delete metadata", tool: tools.ToolSetAgentMetadata, args: A{"agent_name": "w1", "key": "k", "value": nil}, effect: "metadata w1 k=<deleted>",
			result: `{"agent_name":"w1","key":"k","status":"updated","value":null}`},
		{name: "metadata over the limit", tool: tools.ToolSetAgentMetadata, args: A{"agent_name": "w1", "key": "k", "value": "vv"},
			setup: func(f *fakeEnv) {
				f.limits.MessageBytes = 2
				f.agents[idOf("w1")].Metadata = map[string]string{"a": "b"}
			}, want: "metadata over the limit"},
		{name: "metadata of a stranger", tool: tools.ToolSetAgentMetadata, args: A{"agent_name": "w1a", "key": "k"}, want: "no child agent"},
		{name: "gate", tool: tools.ToolGate, args: A{"agent_name": "w2"}, effect: "gate w2 w2 true",
			result: `{"agent_name":"w2","status":"gated"}`},
		{name: "ungate", tool: tools.ToolUngate, args: A{"agent_name": "w2"}, effect: "gate w2 w2 false",
			result: `{"agent_name":"w2","status":"ungated"}`},
		{name: "gate a stranger", tool: tools.ToolGate, args: A{"agent_name": "lead"}, want: "no child agent"},
		{name: "permit", tool: tools.ToolPermitTurn, args: A{"agent_name": "w2"}, effect: "permit w2 w2",
			setup: func(f *fakeEnv) { f.agents[idOf("w2")].Gated = true }, result: `{"agent_name":"w2","status":"permitted"}`},
		{name: "permit an ungated child", tool: tools.ToolPermitTurn, args: A{"agent_name": "w2"}, want: "agent is not gated"},
		{name: "permit a busy child", tool: tools.ToolPermitTurn, args: A{"agent_name": "w2"}, want: "agent is not idle",
			setup: func(f *fakeEnv) { f.agents[idOf("w2")].Gated, f.agents[idOf("w2")].Busy = true, true }},
		{name: "list children", tool: tools.ToolListChildren,
			setup: func(f *fakeEnv) {
				f.agents[idOf("w2")].Gated = true
				f.agents[idOf("w2")].State = tools.StateBusy
				f.agents[idOf("w2")].Metadata = map[string]string{"role": "r"}
				f.agents[idOf("w2")].pending = []inbox.Message{{ID: "m"}}
			},
			result: `{"children":[{"agent_id":"` + idOf("w1") + `","gated":false,"metadata":{},"name":"w1","pending_messages":0,"state":"idle"},` +
				`{"agent_id":"` + idOf("w2") + `","gated":true,"metadata":{"role":"r"},"name":"w2","pending_messages":1,"state":"busy"}]}`},
		{name: "inspect", tool: tools.ToolInspectAgent, args: A{"name": "w1"},
			setup: func(f *fakeEnv) {
				f.agents[idOf("w1")].pending = []inbox.Message{{ID: "m1", Sender: "USER", Payload: "a"}, {ID: "m2", Sender: idOf("lead"), Payload: "b"}}
				f.limits.RecentCount = 1
			},
			result: `{"gated":false,"metadata":{},"pending_messages":2,"recent_messages":[{"from":"USER","message_id":"m1","text":"a"}],"state":"idle"}`},
		{name: "inspect a stranger", tool: tools.ToolInspectAgent, args: A{"name": "other"}, want: `no child agent named "other"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := family()
			if tc.setup != nil {
				tc.setup(f)
			}
			res, _ := outside(t, f, idOf("lead"), tc.tool, tc.args)
			wantReply(t, res, tc.want)
			var effects []string
			for _, e := range f.effects {
				for _, n := range []string{"lead", "w1", "w2"} {
					e = strings.ReplaceAll(e, idOf(n), n)
				}
				effects = append(effects, e)
			}
			if tc.want != "" {
				if len(effects) != 0 {
					t.Fatalf("a refused %s did %v", tc.tool, effects)
				}
				return
			}
			if tc.effect != "" && (len(effects) != 1 || effects[0] != tc.effect) {
				t.Fatalf("effects %v, want [%s]", effects, tc.effect)
			}
			if tc.result != "" {
				if b, _ := json.Marshal(res); string(b) != tc.result {
					t.Fatalf("result %s\nwant %s", b, tc.result)
				}
			}
		})
	}
}

func TestEffectFailureFailsTheCall(t *testing.T) {
	for _, tc := range []struct {
		effect, tool string
		args         A
	}{
		{"metadata", tools.ToolSetAgentMetadata, A{"agent_name": "w1", "key": "k", "value": "v"}},
		{"gate", tools.ToolGate, A{"agent_name": "w1"}},
		{"remind", tools.ToolRemindMe, A{"reason": "r", "timeout": 1}},
		{"delivered", tools.ToolCheckInbox, nil},
	} {
		f := family()
		f.agents[idOf("lead")].pending = []inbox.Message{{ID: "m", Sender: "USER"}}
		f.fail[tc.effect] = errString("log poisoned")
		l := &memLog{}
		_, err := CallOutside(context.Background(), f, Caller{ID: idOf("lead"), Log: l}, tc.tool, tc.args)
		if err == nil || !strings.Contains(err.Error(), "log poisoned") {
			t.Fatalf("%s with a failing %s: err %v, want the failure", tc.tool, tc.effect, err)
		}
		if n := len(l.records()); n != 0 {
			t.Fatalf("%s failed but logged %d tool.call entries", tc.tool, n)
		}
	}
}
