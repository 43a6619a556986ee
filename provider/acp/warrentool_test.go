package acp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider"
)

// TestWarrenToolShapes: a permission request for warren's own tool, in
// the exact shape each real adapter sends it (the fake agent reproduces
// the captured traffic, perm.go), is allowed under deny and under ask
// without an operator wait; the look-alikes (a shell command titled like
// the tool, another MCP server's tool of the same name, a bare title) go
// to the policy.
func TestWarrenToolShapes(t *testing.T) {
	cases := []struct {
		directive string
		warren    bool
	}{
		{"@permission-as claude send_message", true},
		{"@permission-as codex send_message", true},
		{"@permission-as codex spawn_agent", true},
		{"@permission-as gemini send_message", true},
		// codex-acp titles a shell command with the command: the title of
		// its MCP call, or any other naming, is no proof.
		{"@permission-as codex-shell mcp.warren.send_message", false},
		{"@permission-as codex-shell warren.send_message", false},
		{"@permission-as codex-shell mcp__warren__send_message", false},
		{"@permission-as codex-server other/send_message", false},
		{"@permission-as codex rm_everything", false},
		{"@permission-as gemini-shell send_message (warren MCP Server)", false},
		{"@permission-as gemini rm_everything", false},
		{"@permission mcp__warren__send_message", false},
		{"@permission mcp_warren_send_message", false},
		{"@permission warren_send_message", false},
		{"@permission send_message (warren MCP Server)", false},
	}
	for _, policy := range []string{PermDeny, PermAsk} {
		for _, tc := range cases {
			t.Run(policy+" "+tc.directive, func(t *testing.T) {
				e := newEnv(t)
				e.st.Permissions = policy
				s := e.create()
				tools := &fakeTools{fn: func(string, map[string]any) (map[string]any, error) {
					return map[string]any{"response": "no"}, nil
				}}
				resp, err := s.Send(t.Context(), tc.directive, provider.TurnIO{Tools: tools})
				if err != nil {
					t.Fatal(err)
				}
				allowed := strings.Contains(resp, "selected allow")
				if tc.warren {
					if !allowed || len(tools.calls) != 0 {
						t.Fatalf("warren's tool: response %q, operator waits %v; want allowed without a wait", resp, tools.calls)
					}
					return
				}
				if allowed {
					t.Fatalf("not warren's tool, allowed under %s: %q", policy, resp)
				}
				if waits := len(tools.calls); (policy == PermAsk) != (waits == 1) {
					t.Fatalf("policy %s: %d operator waits (%v)", policy, waits, tools.calls)
				}
			})
		}
	}
}

// TestWarrenToolCodexBridgeCall: with codex's shape asked before each
// bridge call (FAKEACP_TOOL_PERMISSION=codex), warren's tool runs under
// ask with no operator wait, and the permission prompt of a codex MCP
// request for another server names the call from its tool_call update.
func TestWarrenToolCodexBridgeCall(t *testing.T) {
	e := newEnv(t, "FAKEACP_TOOL_PERMISSION=codex")
	e.st.Permissions = PermAsk
	s := e.create()
	tools := &fakeTools{fn: func(string, map[string]any) (map[string]any, error) {
		return map[string]any{"response": "no"}, nil
	}}
	resp, err := s.Send(t.Context(), `@tool send_message {"recipient":"lead","text":"hi"}`, provider.TurnIO{Tools: tools})
	if err != nil || !strings.Contains(resp, "selected allow") || !strings.Contains(resp, `"tool":"send_message"`) || len(tools.calls) != 0 {
		t.Fatalf("response %q, err %v, waits %v", resp, err, tools.calls)
	}
	resp, err = s.Send(t.Context(), "@permission-as codex-server other/deploy", provider.TurnIO{Tools: tools})
	if err != nil || !strings.Contains(resp, "selected reject") || len(tools.calls) != 1 {
		t.Fatalf("other server: response %q, err %v, waits %v", resp, err, tools.calls)
	}
	if p, _ := tools.calls[0]["args"].(map[string]any)["prompt"].(string); !strings.Contains(p, `"mcp.other.deploy"`) {
		t.Fatalf("the wait's prompt %q does not name the call", p)
	}
}

// TestWarrenToolOf checks the structural rule directly, including
// requests whose tool call the turn never described.
func TestWarrenToolOf(t *testing.T) {
	seen := map[string]mcpRef{"c1": {Server: "warren", Tool: "send_message"}, "c2": {Server: "evil", Tool: "send_message"}}
	look := func(id string) (mcpRef, bool) { r, ok := seen[id]; return r, ok }
	for raw, want := range map[string]string{
		`{"toolCall":{"toolCallId":"c1","kind":"execute"},"_meta":{"is_mcp_tool_approval":true}}`:                                   "send_message",
		`{"toolCall":{"toolCallId":"c2","kind":"execute"},"_meta":{"is_mcp_tool_approval":true}}`:                                   "",
		`{"toolCall":{"toolCallId":"c9","kind":"execute"},"_meta":{"is_mcp_tool_approval":true}}`:                                   "",
		`{"toolCall":{"toolCallId":"c1","kind":"execute"}}`:                                                                         "",
		`{"toolCall":{"toolCallId":"c9","rawInput":{"server":"warren","tool":"complete"}},"_meta":{"is_mcp_tool_approval":true}}`:   "complete",
		`{"toolCall":{"toolCallId":"c9","title":"mcp.warren.send_message","kind":"execute"}}`:                                       "",
		`{"toolCall":{"title":"x","_meta":{"claudeCode":{"toolName":"mcp__warren__broadcast"}}}}`:                                   "broadcast",
		`{"toolCall":{"title":"mcp__warren__broadcast","_meta":{"claudeCode":{"toolName":"Task"}}}}`:                                "",
		`{"toolCall":{"_meta":{"claudeCode":{"toolName":"mcp__warren__broadcast","mcpServer":{"name":"other"}}}}}`:                  "",
		`{"toolCall":{"title":"send_message (warren MCP Server)","kind":"other"},"options":[{"optionId":"proceed_always_tool"}]}`:   "send_message",
		`{"toolCall":{"title":"send_message (warren MCP Server)","kind":"execute"},"options":[{"optionId":"proceed_always_tool"}]}`: "",
		`{"toolCall":{"title":"send_message (warren MCP Server)","kind":"other"},"options":[{"optionId":"proceed_once"}]}`:          "",
	} {
		var p permissionParams
		if err := json.Unmarshal([]byte(raw), &p); err != nil {
			t.Fatal(err)
		}
		got, ok := warrenToolOf(p, look)
		if got != want || ok != (want != "") {
			t.Errorf("%s: %q %v, want %q", raw, got, ok, want)
		}
	}
}
