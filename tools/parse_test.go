package tools

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/inbox"
)

type A = map[string]any

func sp(s string) *string { return &s }

func TestParseSuccess(t *testing.T) {
	for _, tc := range []struct {
		tool string
		args A
		want any
	}{
		{ToolSendMessage, A{"recipient": "worker", "text": "hi"}, SendMessage{Recipient: "worker", Text: "hi"}},
		{ToolSendMessage, A{"recipient": "USER", "text": "done"}, SendMessage{Recipient: "USER", Text: "done"}},
		{ToolBroadcast, A{"text": "all"}, Broadcast{Text: "all"}},
		{ToolCheckInbox, nil, CheckInbox{}},
		{ToolCheckInbox, A{"sender": "", "kind": ""}, CheckInbox{}},
		{ToolCheckInbox, A{"sender": nil, "kind": nil}, CheckInbox{}},
		{ToolCheckInbox, A{"sender": "lead", "kind": "error"}, CheckInbox{Sender: "lead", Kind: inbox.KindError}},
		{ToolCheckInbox, A{"kind": "notification"}, CheckInbox{Kind: inbox.KindNotification}},
		{ToolSpawnAgent, A{"name": "w1", "instructions": "work"}, SpawnAgent{Name: "w1", Instructions: "work"}},
		{ToolSpawnAgent, A{"name": "w1", "instructions": "work", "metadata": A{"role": "test", "x": ""}, "provider": "scripted", "model": "m"},
			SpawnAgent{Name: "w1", Instructions: "work", Metadata: map[string]string{"role": "test", "x": ""}, Provider: "scripted", Model: "m"}},
		{ToolSpawnAgent, A{"name": "w1", "instructions": "work", "metadata": map[string]string{"a": "b"}, "provider": nil, "model": ""},
			SpawnAgent{Name: "w1", Instructions: "work", Metadata: map[string]string{"a": "b"}}},
		{ToolSpawnAgent, A{"name": "w1", "instructions": "work", "metadata": A{}}, SpawnAgent{Name: "w1", Instructions: "work", Metadata: map[string]string{}}},
		{ToolInspectAgent, A{"name": "w1"}, InspectAgent{Name: "w1"}},
		{ToolComplete, A{"result": "42"}, Complete{Result: "42"}},
		{ToolComplete, A{"result": ""}, Complete{Result: ""}},
		{ToolPoke, A{"agent_name": "w1"}, Poke{AgentName: "w1"}},
		{ToolRemindMe, A{"reason": "check", "timeout": 30.0}, RemindMe{Reason: "check", Timeout: 30 * time.Second}},
		{ToolRemindMe, A{"reason": "r", "timeout": 1.5, "every": int64(60)}, RemindMe{Reason: "r", Timeout: 1500 * time.Millisecond, Every: time.Minute}},
		{ToolRemindMe, A{"reason": "r", "timeout": json.Number("2"), "every": nil}, RemindMe{Reason: "r", Timeout: 2 * time.Second}},
		{ToolRemindMe, A{"reason": "r", "timeout": 5, "every": uint8(7)}, RemindMe{Reason: "r", Timeout: 5 * time.Second, Every: 7 * time.Second}},
		{ToolCancelReminder, A{"reminder_id": "abc"}, CancelReminder{ReminderID: "abc"}},
		{ToolListChildren, A{}, ListChildren{}},
		{ToolListChildren, nil, ListChildren{}},
		{ToolSetAgentMetadata, A{"agent_name": "w1", "key": "k", "value": "v"}, SetAgentMetadata{AgentName: "w1", Key: "k", Value: sp("v")}},
		{ToolSetAgentMetadata, A{"agent_name": "w1", "key": "k", "value": ""}, SetAgentMetadata{AgentName: "w1", Key: "k", Value: sp("")}},
		{ToolSetAgentMetadata, A{"agent_name": "w1", "key": "k", "value": nil}, SetAgentMetadata{AgentName: "w1", Key: "k"}},
		{ToolSetAgentMetadata, A{"agent_name": "w1", "key": "k"}, SetAgentMetadata{AgentName: "w1", Key: "k"}},
		{ToolSubscribe, A{"agent_name": "w1", "transition": "busy->idle"}, Subscribe{AgentName: "w1", From: "busy", To: "idle"}},
		{ToolSubscribe, A{"agent_name": "w1", "transition": " * -> terminated ", "once": true}, Subscribe{AgentName: "w1", From: "*", To: "terminated", Once: true}},
		{ToolSubscribe, A{"agent_name": "w1", "transition": "idle->waiting", "once": nil}, Subscribe{AgentName: "w1", From: "idle", To: "waiting"}},
		{ToolSubscribe, A{"agent_name": "w1", "transition": "*->*", "once": false}, Subscribe{AgentName: "w1", From: "*", To: "*"}},
		{ToolUnsubscribe, A{"subscription_id": "s1"}, Unsubscribe{SubscriptionID: "s1"}},
		{ToolGate, A{"agent_name": "w1"}, Gate{AgentName: "w1"}},
		{ToolUngate, A{"agent_name": "w1"}, Ungate{AgentName: "w1"}},
		{ToolPermitTurn, A{"agent_name": "w1"}, PermitTurn{AgentName: "w1"}},
		{ToolAwaitInput, A{"kind": "approval", "prompt": "ok?", "timeout": 3600}, AwaitInput{Kind: "approval", Prompt: "ok?", Timeout: time.Hour}},
		{ToolAwaitInput, A{"kind": "tool_result", "prompt": "file?", "timeout": 0.25}, AwaitInput{Kind: "tool_result", Prompt: "file?", Timeout: 250 * time.Millisecond}},
	} {
		got, err := Parse(tc.tool, tc.args)
		if err != nil {
			t.Errorf("Parse(%s, %v): %v", tc.tool, tc.args, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%s, %v) = %#v, want %#v", tc.tool, tc.args, got, tc.want)
		}
		if c, ok := got.(Call); !ok || c.Tool() != tc.tool {
			t.Errorf("Parse(%s) result %T does not report its tool", tc.tool, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("x", 21)
	for _, tc := range []struct {
		tool   string
		args   A
		err    error
		param  string
		msgHas string
	}{
		// send_message
		{ToolSendMessage, A{"text": "hi"}, ErrMissingParam, "recipient", `send_message: required parameter "recipient" is missing; give a string`},
		{ToolSendMessage, A{"recipient": nil, "text": "hi"}, ErrMissingParam, "recipient", "is null"},
		{ToolSendMessage, A{"recipient": "w"}, ErrMissingParam, "text", `"text"`},
		{ToolSendMessage, A{"recipient": 7, "text": "hi"}, ErrInvalidParam, "recipient", `must be a string, got number 7`},
		{ToolSendMessage, A{"recipient": "", "text": "hi"}, ErrInvalidParam, "recipient", "must not be empty"},
		{ToolSendMessage, A{"recipient": "w", "text": ""}, ErrInvalidParam, "text", "must not be empty"},
		{ToolSendMessage, A{"recipient": "w", "text": "hi", "recipent": "x"}, ErrUnknownParam, "recipent", `unknown parameter "recipent"; did you mean "recipient"? send_message takes recipient, text`},
		{ToolSendMessage, A{"recipient": "w", "text": "hi", "sync": true}, ErrUnknownParam, "sync", "send_message takes recipient, text"},
		{ToolSendMessage, A{"recipient": "w", "text": long}, ErrTooLong, "text", "21 bytes, over the limit of 20 bytes"},
		// broadcast
		{ToolBroadcast, A{}, ErrMissingParam, "text", `"text"`},
		{ToolBroadcast, A{"text": []any{"a"}}, ErrInvalidParam, "text", "got an array"},
		{ToolBroadcast, A{"text": "hi", "to": "x"}, ErrUnknownParam, "to", "broadcast takes text"},
		// check_inbox
		{ToolCheckInbox, A{"kind": "multicast"}, ErrInvalidParam, "kind", `must be one of request, response, notification, error; got "multicast"`},
		{ToolCheckInbox, A{"sender": true}, ErrInvalidParam, "sender", "got boolean true"},
		{ToolCheckInbox, A{"from": "x"}, ErrUnknownParam, "from", "check_inbox takes sender, kind"},
		// spawn_agent
		{ToolSpawnAgent, A{"instructions": "i"}, ErrMissingParam, "name", `"name"`},
		{ToolSpawnAgent, A{"name": "w"}, ErrMissingParam, "instructions", `"instructions"`},
		{ToolSpawnAgent, A{"name": "9w", "instructions": "i"}, ErrInvalidParam, "name", "starts with a letter"},
		{ToolSpawnAgent, A{"name": "a/b", "instructions": "i"}, ErrInvalidParam, "name", "invalid agent name"},
		{ToolSpawnAgent, A{"name": "USER", "instructions": "i"}, ErrInvalidParam, "name", "reserved"},
		{ToolSpawnAgent, A{"name": "w", "instructions": ""}, ErrInvalidParam, "instructions", "must not be empty"},
		{ToolSpawnAgent, A{"name": "w", "instructions": "i", "metadata": "role=x"}, ErrInvalidParam, "metadata", `must be an object of string values, got string "role=x"`},
		{ToolSpawnAgent, A{"name": "w", "instructions": "i", "metadata": A{"n": 1}}, ErrInvalidParam, "metadata", `key "n" is number 1`},
		{ToolSpawnAgent, A{"name": "w", "instructions": "i", "metadata": A{"": "v"}}, ErrInvalidParam, "metadata", "empty key"},
		{ToolSpawnAgent, A{"name": "w", "instructions": "i", "metadata": A{"k": long}}, ErrTooLong, "metadata", `the value of key "k" is 21 bytes`},
		{ToolSpawnAgent, A{"name": "w", "instructions": "i", "metadata": A{long: "v"}}, ErrTooLong, "metadata", "key"},
		{ToolSpawnAgent, A{"name": "w", "instructions": "i", "model": 4}, ErrInvalidParam, "model", "must be a string"},
		{ToolSpawnAgent, A{"name": "w", "instructions": "i", "cwd": "/tmp"}, ErrUnknownParam, "cwd", "spawn_agent takes name, instructions, metadata, provider, model, workspace"},
		{ToolSpawnAgent, A{"name": "w", "instructions": "i", "workspace": "ws"}, ErrInvalidParam, "workspace", `is not "none"`},
		// inspect_agent
		{ToolInspectAgent, A{}, ErrMissingParam, "name", `"name"`},
		{ToolInspectAgent, A{"agent_name": "w"}, ErrUnknownParam, "agent_name", "inspect_agent takes name"},
		// complete
		{ToolComplete, A{}, ErrMissingParam, "result", `"result"`},
		{ToolComplete, A{"result": A{"a": "b"}}, ErrInvalidParam, "result", "got an object"},
		// poke
		{ToolPoke, A{}, ErrMissingParam, "agent_name", `"agent_name"`},
		{ToolPoke, A{"name": "w"}, ErrUnknownParam, "name", "poke takes agent_name"},
		// remind_me
		{ToolRemindMe, A{"reason": "r"}, ErrMissingParam, "timeout", `"timeout"`},
		{ToolRemindMe, A{"timeout": 1}, ErrMissingParam, "reason", `"reason"`},
		{ToolRemindMe, A{"reason": "r", "timeout": "5"}, ErrInvalidParam, "timeout", `must be a number of seconds, got string "5"`},
		{ToolRemindMe, A{"reason": "r", "timeout": 0}, ErrInvalidParam, "timeout", "greater than 0"},
		{ToolRemindMe, A{"reason": "r", "timeout": -3.0}, ErrInvalidParam, "timeout", "greater than 0"},
		{ToolRemindMe, A{"reason": "r", "timeout": 1e-12}, ErrInvalidParam, "timeout", "greater than 0"},
		{ToolRemindMe, A{"reason": "r", "timeout": 1e300}, ErrInvalidParam, "timeout", "at most"},
		{ToolRemindMe, A{"reason": "r", "timeout": json.Number("NaN")}, ErrInvalidParam, "timeout", "finite"},
		{ToolRemindMe, A{"reason": "r", "timeout": json.Number("x")}, ErrInvalidParam, "timeout", "must be a number"},
		{ToolRemindMe, A{"reason": "r", "timeout": 1, "every": 0}, ErrInvalidParam, "every", "greater than 0"},
		{ToolRemindMe, A{"reason": "r", "timeout": 1, "every": true}, ErrInvalidParam, "every", "got boolean true"},
		{ToolRemindMe, A{"reason": "r", "timeout": 1, "interval": 5}, ErrUnknownParam, "interval", "remind_me takes reason, timeout, every"},
		// cancel_reminder
		{ToolCancelReminder, A{}, ErrMissingParam, "reminder_id", `"reminder_id"`},
		{ToolCancelReminder, A{"reminder_id": ""}, ErrInvalidParam, "reminder_id", "must not be empty"},
		{ToolCancelReminder, A{"reminderid": "x"}, ErrUnknownParam, "reminderid", `did you mean "reminder_id"?`},
		// list_children
		{ToolListChildren, A{"all": true}, ErrUnknownParam, "all", "list_children takes no parameters"},
		// set_agent_metadata
		{ToolSetAgentMetadata, A{"key": "k"}, ErrMissingParam, "agent_name", `"agent_name"`},
		{ToolSetAgentMetadata, A{"agent_name": "w"}, ErrMissingParam, "key", `"key"`},
		{ToolSetAgentMetadata, A{"agent_name": "w", "key": ""}, ErrInvalidParam, "key", "must not be empty"},
		{ToolSetAgentMetadata, A{"agent_name": "w", "key": "k", "value": 3}, ErrInvalidParam, "value", "must be a string, got number 3"},
		{ToolSetAgentMetadata, A{"agent_name": "w", "key": "k", "value": long}, ErrTooLong, "value", "21 bytes"},
		// subscribe
		{ToolSubscribe, A{"transition": "busy->idle"}, ErrMissingParam, "agent_name", `"agent_name"`},
		{ToolSubscribe, A{"agent_name": "w"}, ErrMissingParam, "transition", `"transition"`},
		{ToolSubscribe, A{"agent_name": "w", "transition": "busy"}, ErrInvalidParam, "transition", `"from->to"`},
		{ToolSubscribe, A{"agent_name": "w", "transition": "busy->done"}, ErrInvalidParam, "transition", `got "busy->done"`},
		{ToolSubscribe, A{"agent_name": "w", "transition": "running->idle"}, ErrInvalidParam, "transition", "idle, busy, waiting, terminated or *"},
		{ToolSubscribe, A{"agent_name": "w", "transition": "busy->idle->busy"}, ErrInvalidParam, "transition", `"from->to"`},
		{ToolSubscribe, A{"agent_name": "w", "transition": "busy->idle", "once": "yes"}, ErrInvalidParam, "once", `must be a boolean (true or false), got string "yes"`},
		{ToolSubscribe, A{"agent_name": "w", "transition": "busy->idle", "onse": true}, ErrUnknownParam, "onse", `did you mean "once"?`},
		// unsubscribe
		{ToolUnsubscribe, A{}, ErrMissingParam, "subscription_id", `"subscription_id"`},
		{ToolUnsubscribe, A{"subscription_id": 12}, ErrInvalidParam, "subscription_id", "must be a string"},
		// gate, ungate, permit_turn
		{ToolGate, A{}, ErrMissingParam, "agent_name", "gate: required parameter"},
		{ToolGate, A{"agent_name": ""}, ErrInvalidParam, "agent_name", "must not be empty"},
		{ToolUngate, A{}, ErrMissingParam, "agent_name", "ungate: required parameter"},
		{ToolUngate, A{"agent_name": "w", "force": true}, ErrUnknownParam, "force", "ungate takes agent_name"},
		{ToolPermitTurn, A{}, ErrMissingParam, "agent_name", "permit_turn: required parameter"},
		{ToolPermitTurn, A{"agent_name": false}, ErrInvalidParam, "agent_name", "got boolean false"},
		// await_input
		{ToolAwaitInput, A{"prompt": "p", "timeout": 1}, ErrMissingParam, "kind", `"kind"`},
		{ToolAwaitInput, A{"kind": "approval", "timeout": 1}, ErrMissingParam, "prompt", `"prompt"`},
		{ToolAwaitInput, A{"kind": "approval", "prompt": "p"}, ErrMissingParam, "timeout", `"timeout"`},
		{ToolAwaitInput, A{"kind": "two words", "prompt": "p", "timeout": 1}, ErrInvalidParam, "kind", "short label"},
		{ToolAwaitInput, A{"kind": "approval", "prompt": "", "timeout": 1}, ErrInvalidParam, "prompt", "must not be empty"},
		{ToolAwaitInput, A{"kind": "approval", "prompt": "p", "timeout": -1}, ErrInvalidParam, "timeout", "greater than 0"},
		{ToolAwaitInput, A{"kind": "approval", "prompt": long, "timeout": 1}, ErrTooLong, "prompt", "shorten it"},
	} {
		_, err := ParseOptions{MaxText: 20}.Parse(tc.tool, tc.args)
		var pe *ParamError
		if !errors.Is(err, tc.err) || !errors.As(err, &pe) || pe.Tool != tc.tool || pe.Param != tc.param ||
			!strings.Contains(err.Error(), tc.msgHas) || !strings.HasPrefix(err.Error(), tc.tool+": ") {
			t.Errorf("Parse(%s, %v) = %v; want %v on %q containing %q", tc.tool, tc.args, err, tc.err, tc.param, tc.msgHas)
		}
	}
}

func TestParseUnknownTool(t *testing.T) {
	for _, name := range []string{"", "sendmsg", "create_workspace", "Send_Message"} {
		got, err := Parse(name, A{})
		if got != nil || !errors.Is(err, ErrUnknownTool) || !strings.Contains(err.Error(), "send_message, broadcast, check_inbox") ||
			!strings.Contains(err.Error(), "await_input") {
			t.Errorf("Parse(%q) = %v, %v; want ErrUnknownTool listing the tools", name, got, err)
		}
	}
}

func TestParseFirstErrorIsDeterministic(t *testing.T) {
	// Several problems: unknown parameters are reported first (sorted),
	// then the parameters in declaration order.
	args := A{"zeta": 1, "alpha": 2, "text": 5}
	for range 20 {
		_, err := Parse(ToolSendMessage, args)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != "alpha" {
			t.Fatalf("err = %v, want the unknown parameter alpha", err)
		}
	}
	_, err := Parse(ToolSendMessage, A{"text": 5})
	var pe *ParamError
	if !errors.As(err, &pe) || pe.Param != "recipient" {
		t.Fatalf("err = %v, want recipient (declared first)", err)
	}
}

func TestParseNoLimitByDefault(t *testing.T) {
	big := strings.Repeat("y", 1<<20)
	got, err := Parse(ToolSendMessage, A{"recipient": "w", "text": big})
	if err != nil || got.(SendMessage).Text != big {
		t.Fatalf("default parse rejected a long text: %v", err)
	}
}

// TestParseJSONArguments feeds arguments exactly as encoding/json decodes
// them, with and without UseNumber.
func TestParseJSONArguments(t *testing.T) {
	raw := `{"reason":"tick","timeout":90,"every":0.5}`
	var plain map[string]any
	if err := json.Unmarshal([]byte(raw), &plain); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var numbers map[string]any
	if err := dec.Decode(&numbers); err != nil {
		t.Fatal(err)
	}
	want := RemindMe{Reason: "tick", Timeout: 90 * time.Second, Every: 500 * time.Millisecond}
	for _, args := range []map[string]any{plain, numbers} {
		got, err := Parse(ToolRemindMe, args)
		if err != nil || got != want {
			t.Errorf("Parse(%v) = %#v, %v; want %#v", args, got, err, want)
		}
	}
}

func TestSubscribeMatches(t *testing.T) {
	s := Subscribe{From: "busy", To: "*"}
	if !s.Matches("busy", "idle") || !s.Matches("busy", "terminated") || s.Matches("idle", "busy") {
		t.Error("busy->* matches wrongly")
	}
	s = Subscribe{From: "*", To: "idle"}
	if !s.Matches("busy", "idle") || !s.Matches("waiting", "idle") || s.Matches("idle", "busy") {
		t.Error("*->idle matches wrongly")
	}
}
