package tools

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
)

// specTools is the tool list of SPEC 6, in its order.
var specTools = []string{
	"send_message", "broadcast", "check_inbox", "spawn_agent", "inspect_agent",
	"complete", "poke", "remind_me", "cancel_reminder", "list_children",
	"set_agent_metadata", "subscribe", "unsubscribe", "gate", "ungate",
	"permit_turn", "await_input",
	"merge_child", // SPEC 12
}

// minimal holds valid arguments (required parameters only) per tool.
var minimal = map[string]A{
	"send_message":       {"recipient": "w", "text": "t"},
	"broadcast":          {"text": "t"},
	"check_inbox":        {},
	"spawn_agent":        {"name": "w", "instructions": "i"},
	"inspect_agent":      {"name": "w"},
	"complete":           {"result": "r"},
	"poke":               {"agent_name": "w"},
	"remind_me":          {"reason": "r", "timeout": 1},
	"cancel_reminder":    {"reminder_id": "x"},
	"list_children":      {},
	"set_agent_metadata": {"agent_name": "w", "key": "k"},
	"subscribe":          {"agent_name": "w", "transition": "busy->idle"},
	"unsubscribe":        {"subscription_id": "x"},
	"gate":               {"agent_name": "w"},
	"ungate":             {"agent_name": "w"},
	"permit_turn":        {"agent_name": "w"},
	"await_input":        {"kind": "approval", "prompt": "p", "timeout": 1},
	"merge_child":        {"agent_name": "w"},
}

func TestCatalogMatchesSpec(t *testing.T) {
	if got := Names(); !slices.Equal(got, specTools) {
		t.Fatalf("Names = %v\nwant %v", got, specTools)
	}
	for _, s := range Catalog() {
		if s.Description == "" {
			t.Errorf("%s has no description", s.Name)
		}
		seen := map[string]bool{}
		for _, p := range s.Params {
			if seen[p.Name] {
				t.Errorf("%s: duplicate parameter %s", s.Name, p.Name)
			}
			seen[p.Name] = true
			if p.Description == "" || !slices.Contains([]string{TypeString, TypeNumber, TypeBoolean, TypeObject}, p.Type) {
				t.Errorf("%s.%s: type %q, description %q", s.Name, p.Name, p.Type, p.Description)
			}
		}
		// Each tool parses its minimal arguments, and each required parameter
		// is really required.
		args := minimal[s.Name]
		if _, err := Parse(s.Name, args); err != nil {
			t.Errorf("Parse(%s, minimal) = %v", s.Name, err)
		}
		for _, p := range s.Params {
			_, inMinimal := args[p.Name]
			if p.Required != inMinimal {
				t.Errorf("%s.%s: Required = %v but minimal args disagree", s.Name, p.Name, p.Required)
			}
			if !p.Required {
				continue
			}
			without := A{}
			for k, v := range args {
				if k != p.Name {
					without[k] = v
				}
			}
			if _, err := Parse(s.Name, without); !errors.Is(err, ErrMissingParam) {
				t.Errorf("Parse(%s) without %s = %v, want ErrMissingParam", s.Name, p.Name, err)
			}
		}
	}
}

func TestSubstratParamNames(t *testing.T) {
	want := map[string][]string{
		"send_message":       {"recipient", "text"},
		"broadcast":          {"text"},
		"check_inbox":        {"sender", "kind"},
		"spawn_agent":        {"name", "instructions", "metadata", "provider", "model", "workspace", "budget"}, // workspace, budget: warren's
		"inspect_agent":      {"name"},
		"complete":           {"result"},
		"poke":               {"agent_name"},
		"remind_me":          {"reason", "timeout", "every"},
		"cancel_reminder":    {"reminder_id"},
		"list_children":      nil,
		"set_agent_metadata": {"agent_name", "key", "value"},
		"subscribe":          {"agent_name", "transition", "once"},
		"unsubscribe":        {"subscription_id"},
		"gate":               {"agent_name"},
		"ungate":             {"agent_name"},
		"permit_turn":        {"agent_name"},
		"await_input":        {"kind", "prompt", "timeout"},
	}
	for name, params := range want {
		s, ok := Lookup(name)
		if !ok {
			t.Fatalf("Lookup(%s) failed", name)
		}
		var got []string
		for _, p := range s.Params {
			got = append(got, p.Name)
		}
		if !slices.Equal(got, params) {
			t.Errorf("%s params = %v, want %v", name, got, params)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup(nope) ok")
	}
}

func TestCatalogReturnsCopies(t *testing.T) {
	c := Catalog()
	c[0].Name = "changed"
	c[2].Params[1].Enum[0] = "changed"
	c[3].Params[0].Name = "changed"
	s, _ := Lookup(ToolCheckInbox)
	s.Params[1].Enum[1] = "changed"
	schema := s.JSONSchema()
	schema["properties"].(map[string]any)["kind"].(map[string]any)["enum"].([]string)[2] = "changed"
	spawn, _ := Lookup(ToolSpawnAgent)
	ss := spawn.JSONSchema()
	ss["properties"].(map[string]any)["metadata"].(map[string]any)["additionalProperties"].(map[string]any)["type"] = "number"
	fresh := Catalog()
	if fresh[0].Name != ToolSendMessage || fresh[3].Params[0].Name != "name" ||
		!slices.Equal(fresh[2].Params[1].Enum, []string{"request", "response", "notification", "error"}) {
		t.Fatal("changes to returned specs leaked into the catalog")
	}
	sp, _ := Lookup(ToolSpawnAgent)
	if got := sp.JSONSchema()["properties"].(map[string]any)["metadata"].(map[string]any)["additionalProperties"].(map[string]any)["type"]; got != "string" {
		t.Fatal("changes to a returned schema leaked into the catalog")
	}
}

func TestJSONSchema(t *testing.T) {
	s, _ := Lookup(ToolRemindMe)
	raw, err := json.Marshal(s.JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"reason", "timeout"},
		"properties": map[string]any{
			"reason":  map[string]any{"type": "string", "description": "What the reminder is about; it is in the notification."},
			"timeout": map[string]any{"type": "number", "exclusiveMinimum": 0.0, "description": "Seconds until the first reminder (> 0)."},
			"every":   map[string]any{"type": "number", "exclusiveMinimum": 0.0, "description": "Repeat interval in seconds (> 0); omit for a one-shot reminder."},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("remind_me schema =\n%s", raw)
	}

	props := func(name string) map[string]any {
		s, _ := Lookup(name)
		return s.JSONSchema()["properties"].(map[string]any)
	}
	if typ := props(ToolSetAgentMetadata)["value"].(map[string]any)["type"]; !reflect.DeepEqual(typ, []string{"string", "null"}) {
		t.Errorf("set_agent_metadata.value type = %v, want nullable string", typ)
	}
	if e := props(ToolCheckInbox)["kind"].(map[string]any)["enum"]; !reflect.DeepEqual(e, []string{"request", "response", "notification", "error"}) {
		t.Errorf("check_inbox.kind enum = %v", e)
	}
	lc, _ := Lookup(ToolListChildren)
	ls := lc.JSONSchema()
	if _, has := ls["required"]; has || len(ls["properties"].(map[string]any)) != 0 || ls["type"] != "object" {
		t.Errorf("list_children schema = %v", ls)
	}
	// Every schema marshals, and MCPTool wraps it.
	for _, s := range Catalog() {
		m := s.MCPTool()
		if _, err := json.Marshal(m); err != nil || m["name"] != s.Name || m["inputSchema"] == nil {
			t.Errorf("MCPTool(%s) = %v, %v", s.Name, m, err)
		}
	}
}

func TestResults(t *testing.T) {
	v := "x"
	for _, tc := range []struct {
		got  map[string]any
		want string
	}{
		{ErrorResult("no child agent named %q", "w"), `{"error":"no child agent named \"w\""}`},
		{SendMessageResult("m1"), `{"message_id":"m1","status":"sent"}`},
		{BroadcastResult("b1", 3), `{"message_id":"b1","recipient_count":3,"status":"sent"}`},
		{CheckInboxResult(nil, 0), `{"messages":[]}`},
		{CheckInboxResult(nil, 2), `{"messages":[],"more":2}`},
		{CheckInboxResult([]InboxItem{{From: "lead", Text: "t", MessageID: "m"}}, 0), `{"messages":[{"from":"lead","message_id":"m","text":"t"}]}`},
		{SpawnAgentResult("a1", "w"), `{"agent_id":"a1","name":"w","status":"accepted"}`},
		{InspectAgentResult(AgentInfo{State: "idle", Gated: true, Metadata: map[string]string{"k": "v"}, PendingMessages: 1, RecentMessages: []InboxItem{{From: "SYSTEM", Text: "t", MessageID: "m"}}}),
			`{"gated":true,"metadata":{"k":"v"},"pending_messages":1,"recent_messages":[{"from":"SYSTEM","message_id":"m","text":"t"}],"state":"idle"}`},
		{InspectAgentResult(AgentInfo{State: "busy"}), `{"gated":false,"metadata":{},"pending_messages":0,"recent_messages":[],"state":"busy"}`},
		{ListChildrenResult(nil), `{"children":[]}`},
		{ListChildrenResult([]AgentInfo{{Name: "w", AgentID: "a1", State: "idle", PendingMessages: 2}}),
			`{"children":[{"agent_id":"a1","gated":false,"metadata":{},"name":"w","pending_messages":2,"state":"idle"}]}`},
		{CompleteResult("m1"), `{"message_id":"m1","status":"completing"}`},
		{PokeResult("a1"), `{"agent_id":"a1","status":"poked"}`},
		{RemindMeResult("r1"), `{"reminder_id":"r1","status":"scheduled"}`},
		{CancelReminderResult("r1"), `{"reminder_id":"r1","status":"cancelled"}`},
		{SetAgentMetadataResult("w", "k", &v), `{"agent_name":"w","key":"k","status":"updated","value":"x"}`},
		{SetAgentMetadataResult("w", "k", nil), `{"agent_name":"w","key":"k","status":"updated","value":null}`},
		{SubscribeResult("s1"), `{"status":"active","subscription_id":"s1"}`},
		{UnsubscribeResult(), `{"status":"removed"}`},
		{GateResult("w"), `{"agent_name":"w","status":"gated"}`},
		{UngateResult("w"), `{"agent_name":"w","status":"ungated"}`},
		{PermitTurnResult("w"), `{"agent_name":"w","status":"permitted"}`},
	} {
		raw, err := json.Marshal(tc.got)
		if err != nil || string(raw) != tc.want {
			t.Errorf("result = %s, %v; want %s", raw, err, tc.want)
		}
	}
	if text, ok := IsError(ErrorResult("bad %d", 1)); !ok || text != "bad 1" {
		t.Errorf("IsError(error) = %q, %v", text, ok)
	}
	if _, ok := IsError(GateResult("w")); ok {
		t.Error("IsError(success) = true")
	}
}
