package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/tools"
)

// agentDaemon answers like the daemon's credential path: "wac_live" is a
// live credential of agent a1 in a turn, "wac_idle" one of an agent between
// turns, anything else unknown or revoked; agent_id must name a1.
func agentDaemon(ctx context.Context, p map[string]any) (any, error) {
	switch p["credential"] {
	case "wac_live":
	case "wac_ended":
		return nil, protocol.Errorf(protocol.CodeUnavailable, "the turn of a1 ended during the call: context canceled")
	case "wac_idle":
		return nil, protocol.Errorf(protocol.CodeInvalid, "agent a1 has no running turn: a tool call made with an agent credential is a call of the agent's running turn")
	default:
		return nil, protocol.Errorf(protocol.CodeTokenRejected, "agent credential rejected: it is unknown or revoked")
	}
	if id, ok := p["agent_id"]; ok && id != "a1" {
		return nil, protocol.Errorf(protocol.CodeNotFound, "agent %q not found; list agents with `warren agent list`", id)
	}
	args, _ := p["arguments"].(map[string]any)
	switch p["tool"] {
	case "send_message":
		if args["recipient"] == "USER" {
			return map[string]any{"error": "only root agents may message USER"}, nil
		}
		return map[string]any{"status": "sent", "message_id": "m-" + fmt.Sprint(args["text"])}, nil
	case "await_input": // blocks until cancelled
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return map[string]any{"tool": p["tool"], "args": args}, nil
}

func liveBridge(t *testing.T) (*mcpClient, *fakeDaemon) {
	d := startFakeDaemon(t, agentDaemon)
	return startBridge(t, NewDaemon(Config{Socket: d.sock, Credential: "wac_live"}), 0), d
}

// TestInitializeNegotiatesTheProtocolVersion: a supported version is
// answered with itself, any other with the latest; the tools capability
// and serverInfo are there; without protocolVersion it is -32602.
func TestInitializeNegotiatesTheProtocolVersion(t *testing.T) {
	c, _ := liveBridge(t)
	for _, v := range append(slices.Clone(SupportedVersions), "2099-01-01", "1.0") {
		r := result(t, c.call(v, "initialize", map[string]any{"protocolVersion": v, "capabilities": map[string]any{}}))
		want := v
		if !slices.Contains(SupportedVersions, v) {
			want = SupportedVersions[0]
		}
		if r["protocolVersion"] != want {
			t.Errorf("asked %s: protocolVersion %v, want %s", v, r["protocolVersion"], want)
		}
		if caps, _ := r["capabilities"].(map[string]any); caps["tools"] == nil {
			t.Errorf("asked %s: capabilities %v lack tools", v, r["capabilities"])
		}
		if si, _ := r["serverInfo"].(map[string]any); si["name"] != "warren" || si["version"] != "test" {
			t.Errorf("serverInfo %v", r["serverInfo"])
		}
	}
	rpcErr(t, c.call("x", "initialize", map[string]any{}), CodeInvalidParams)
	rpcErr(t, c.call("y", "initialize", map[string]any{"protocolVersion": 5}), CodeInvalidParams)
	rpcErr(t, c.call("z", "initialize", nil), CodeInvalidParams)
}

// TestToolsListIsTheCatalog: tools/list gives every catalog tool, in order,
// with its JSON Schema as inputSchema.
func TestToolsListIsTheCatalog(t *testing.T) {
	c, _ := liveBridge(t)
	c.initialize(SupportedVersions[0])
	list, _ := result(t, c.call(1, "tools/list", nil))["tools"].([]any)
	cat := tools.Catalog()
	if len(list) != len(cat) {
		t.Fatalf("tools/list has %d tools, the catalog %d", len(list), len(cat))
	}
	for i, spec := range cat {
		got := list[i].(map[string]any)
		want, _ := json.Marshal(spec.MCPTool())
		var w map[string]any
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(got, w) {
			t.Errorf("tool %d: %v, want %v", i, got, w)
		}
	}
}

// TestToolsCallIsACredentialToolCall: a tools/call reaches the daemon as
// tool.call with the credential, the tool, the arguments (numbers intact)
// and agent_id when configured; the result comes back as JSON text and as
// structuredContent; a tool-level {"error"} is an isError result, not a
// JSON-RPC error.
func TestToolsCallIsACredentialToolCall(t *testing.T) {
	d := startFakeDaemon(t, agentDaemon)
	c := startBridge(t, NewDaemon(Config{Socket: d.sock, Credential: "wac_live", AgentID: "a1"}), 0)
	c.initialize("2025-06-18")
	r := result(t, c.toolCall(1, "send_message", map[string]any{"recipient": "lead", "text": "hi <&>"}))
	if r["isError"] != false {
		t.Fatalf("result %v: isError should be false", r)
	}
	want := map[string]any{"status": "sent", "message_id": "m-hi <&>"}
	if !reflect.DeepEqual(r["structuredContent"], want) {
		t.Fatalf("structuredContent %v, want %v", r["structuredContent"], want)
	}
	content := r["content"].([]any)
	text := content[0].(map[string]any)
	var fromText map[string]any
	if text["type"] != "text" || json.Unmarshal([]byte(text["text"].(string)), &fromText) != nil || !reflect.DeepEqual(fromText, want) {
		t.Fatalf("content %v, want one text item holding %v as JSON", content, want)
	}
	reqs := d.requests()
	if len(reqs) != 1 {
		t.Fatalf("the daemon got %d requests", len(reqs))
	}
	p := reqs[0]
	if p["credential"] != "wac_live" || p["tool"] != "send_message" || p["agent_id"] != "a1" {
		t.Fatalf("tool.call params %v", p)
	}

	// Numbers reach the daemon as numbers, big integers exactly.
	result(t, c.toolCall(2, "remind_me", map[string]any{"reason": "r", "timeout": 1.5, "every": 9007199254740993}))
	args := d.requests()[1]["arguments"].(map[string]any)
	if args["timeout"] != 1.5 || fmt.Sprint(args["every"]) != "9007199254740993" {
		t.Fatalf("arguments reached the daemon as %#v", args)
	}

	// A tool-level error.
	r = result(t, c.toolCall(3, "send_message", map[string]any{"recipient": "USER", "text": "x"}))
	if r["isError"] != true || !strings.Contains(fmt.Sprint(r["content"]), "only root agents") {
		t.Fatalf("a tool-level error: %v, want isError with the text", r)
	}
	// No arguments at all is {}.
	result(t, c.toolCall(4, "list_children", nil))
	if a := d.requests()[3]["arguments"]; !reflect.DeepEqual(a, map[string]any{}) {
		t.Fatalf("no arguments reached the daemon as %#v", a)
	}
}

// TestStructuredContentFollowsTheVersion: before 2025-06-18 a result has
// no structuredContent (the field did not exist).
func TestStructuredContentFollowsTheVersion(t *testing.T) {
	c, _ := liveBridge(t)
	c.initialize("2025-03-26")
	r := result(t, c.toolCall(1, "list_children", map[string]any{}))
	if _, ok := r["structuredContent"]; ok {
		t.Fatalf("2025-03-26 result %v has structuredContent", r)
	}
}

// TestDaemonRefusalsAreDistinct: a call between turns, for an unknown
// agent and with a stale credential each get -32000 with the daemon's code
// and its words; a call the end of the turn interrupted says it did not
// complete.
func TestDaemonRefusalsAreDistinct(t *testing.T) {
	d := startFakeDaemon(t, agentDaemon)
	cases := []struct {
		name string
		cfg  Config
		code int
		text string
	}{
		{"between turns", Config{Credential: "wac_idle"}, protocol.CodeInvalid, "no running turn"},
		{"unknown agent", Config{Credential: "wac_live", AgentID: "ghost"}, protocol.CodeNotFound, "not found"},
		{"stale credential", Config{Credential: "wac_revoked"}, protocol.CodeTokenRejected, "unknown or revoked"},
		{"turn ended during the call", Config{Credential: "wac_ended"}, protocol.CodeUnavailable, "ended during the call"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Socket = d.sock
			c := startBridge(t, NewDaemon(tc.cfg), 0)
			c.initialize(SupportedVersions[0])
			e := rpcErr(t, c.toolCall(1, "send_message", map[string]any{"recipient": "p", "text": "x"}), CodeRefused)
			data, _ := e["data"].(map[string]any)
			if data["warren_code"] != float64(tc.code) || data["warren_error"] != protocol.CodeName(tc.code) {
				t.Errorf("data %v, want warren_code %d", data, tc.code)
			}
			prefix := "warren refused the tool call: "
			if tc.code == protocol.CodeUnavailable {
				prefix = "the tool call did not complete: "
			}
			if msg := e["message"].(string); !strings.Contains(msg, tc.text) || !strings.HasPrefix(msg, prefix) {
				t.Errorf("message %q, want it to say %q", msg, tc.text)
			}
		})
	}
}

// TestUnreachableDaemonAndMissingCredential: no daemon at the socket, no
// socket, no credential: -32001 saying which.
func TestUnreachableDaemonAndMissingCredential(t *testing.T) {
	cases := []struct {
		cfg  Config
		text string
	}{
		{Config{Socket: "/nonexistent/warren.sock", Credential: "wac_live"}, "cannot reach the warren daemon"},
		{Config{Credential: "wac_live"}, "WARREN_SOCKET"},
		{Config{Socket: "/nonexistent/warren.sock"}, "WARREN_AGENT_CREDENTIAL is not set"},
	}
	for _, tc := range cases {
		c := startBridge(t, NewDaemon(tc.cfg), 0)
		e := rpcErr(t, c.toolCall(1, "list_children", nil), CodeUnreachable)
		if !strings.Contains(e["message"].(string), tc.text) {
			t.Errorf("%+v: %q, want it to say %q", tc.cfg, e["message"], tc.text)
		}
		// tools/list needs no daemon.
		if l, _ := result(t, c.call(2, "tools/list", nil))["tools"].([]any); len(l) == 0 {
			t.Errorf("tools/list without a daemon is empty")
		}
	}
}

// TestUnknownToolAndBadParams: refused with -32602 by the bridge; the
// daemon never sees them.
func TestUnknownToolAndBadParams(t *testing.T) {
	c, d := liveBridge(t)
	c.initialize(SupportedVersions[0])
	e := rpcErr(t, c.toolCall(1, "rm_rf", map[string]any{}), CodeInvalidParams)
	if !strings.Contains(e["message"].(string), `unknown tool "rm_rf"`) || !strings.Contains(e["message"].(string), "send_message") {
		t.Errorf("unknown tool: %q", e["message"])
	}
	rpcErr(t, c.toolCall(2, "send_message", []any{"a"}), CodeInvalidParams)
	rpcErr(t, c.toolCall(3, "send_message", "text"), CodeInvalidParams)
	rpcErr(t, c.call(4, "tools/call", map[string]any{"arguments": map[string]any{}}), CodeInvalidParams)
	rpcErr(t, c.call(5, "tools/call", map[string]any{"name": 7}), CodeInvalidParams)
	deep := any("x")
	for range 1000 { // deeper than a socket frame may nest
		deep = map[string]any{"k": deep}
	}
	rpcErr(t, c.toolCall(6, "send_message", map[string]any{"recipient": "p", "text": deep}), CodeInvalidParams)
	if n := len(d.requests()); n != 0 {
		t.Fatalf("the daemon got %d requests for refused calls", n)
	}
}
