package acp

import (
	"encoding/json"
	"strings"

	"github.com/warren-dev/warren/tools"
)

// Recognising a permission request for one of warren's own tools (called
// through the bridge, named "warren" in session/new's mcpServers). Such a
// request is always allowed: warren's routing rules and its log govern
// those calls. Anything else goes to the entry's permissions policy, so a
// mistake here must only ever fall on the safe side: a request is taken
// for warren's tool only on structure the adapter builds from the tool's
// registration, never on a title alone. The titles the adapters give are
// not enough: codex-acp titles a shell command with the command itself (a
// command `mcp.warren.send_message` is titled exactly that, the title it
// gives the MCP call), Gemini CLI titles one with its command too, and
// Claude Code titles a subagent with the model's description.
//
// The shapes, as captured from the pinned adapters:
//
//   - claude-agent-acp 0.101.0: toolCall._meta.claudeCode.toolName is the
//     tool's name, "mcp__warren__NAME", with _meta.claudeCode.mcpServer.name
//     "warren" (set only for MCP tools).
//   - codex-acp 2.6.0: the request carries only {toolCallId, kind
//     "execute", status "pending"} and params._meta.is_mcp_tool_approval
//     true; the tool_call session/update before it (same toolCallId) has
//     title "mcp.warren.NAME", rawInput {"server":"warren","tool":NAME,
//     "arguments":{...}} and _meta.is_mcp_tool_call true. A shell command's
//     rawInput is {"command","cwd"}, and its request has no such _meta.
//   - gemini-cli 0.61.0: title "NAME (warren MCP Server)" (the MCP tool's
//     display name), kind "other", and the options of an MCP confirmation
//     (optionId "proceed_always_server" / "proceed_always_tool"), which no
//     shell, edit or other built-in tool gets. With always-allow disabled
//     in Gemini's settings those options are absent and the request goes
//     to the policy.
//   - opencode 1.18.33 asks no permission for MCP tools (its default); if
//     a user's config makes it ask, the request goes to the policy.

// warrenServer is the name of the bridge in session/new's mcpServers.
const warrenServer = "warren"

// maxSeenToolCalls bounds the MCP tool calls a turn remembers from its
// tool_call updates (beyond it a warren tool's request goes to the
// policy: the safe side).
const maxSeenToolCalls = 1024

// mcpRef is an MCP tool call as an adapter's tool_call update describes it
// in rawInput (codex-acp: {"server": ..., "tool": ...}).
type mcpRef struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
}

// mcpRefOf reads rawInput as an MCP call; ok is false for anything else.
func mcpRefOf(raw json.RawMessage) (mcpRef, bool) {
	var r mcpRef
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &r) != nil || r.Server == "" || r.Tool == "" {
		return mcpRef{}, false
	}
	return r, true
}

// noteToolCall records what a tool_call or tool_call_update of the turn
// says about an MCP call (ACP merges an update's fields into the call, so
// a later rawInput replaces the earlier one). Called with t.mu held.
func (t *turnState) noteToolCall(id string, raw json.RawMessage) {
	if id == "" || len(raw) == 0 {
		return
	}
	ref, ok := mcpRefOf(raw)
	if !ok {
		delete(t.mcpCalls, id) // no longer (or never) an MCP call
		return
	}
	if t.mcpCalls == nil {
		t.mcpCalls = map[string]mcpRef{}
	}
	if _, known := t.mcpCalls[id]; !known && len(t.mcpCalls) >= maxSeenToolCalls {
		return
	}
	t.mcpCalls[id] = ref
}

// seenMCPCall is the MCP call the turn's updates described under id.
func (t *turnState) seenMCPCall(id string) (mcpRef, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.mcpCalls[id]
	return r, ok
}

// warrenToolOf returns the warren tool a permission request is for, by
// the adapters' structures above; ok is false when it is not (certainly)
// one of warren's tools. seen looks up the MCP call a tool_call update of
// the turn described under a toolCallId.
func warrenToolOf(p permissionParams, seen func(id string) (mcpRef, bool)) (string, bool) {
	tc := p.ToolCall
	// Claude Code: the tool's own name in _meta.
	if cc := tc.Meta.ClaudeCode; cc.ToolName != "" {
		if name, ok := strings.CutPrefix(cc.ToolName, "mcp__"+warrenServer+"__"); ok && catalogTool(name) &&
			(cc.MCPServer == nil || cc.MCPServer.Name == warrenServer) {
			return name, true
		}
		return "", false
	}
	// Codex: an MCP approval, the call described by rawInput (the
	// request's own, else the tool_call update's).
	if p.Meta.IsMCPToolApproval {
		ref, ok := mcpRefOf(tc.RawInput)
		if !ok && seen != nil {
			ref, ok = seen(tc.ToolCallID)
		}
		if ok && ref.Server == warrenServer && catalogTool(ref.Tool) {
			return ref.Tool, true
		}
		return "", false
	}
	// Gemini CLI: an MCP confirmation titled with the tool's display name.
	if name, ok := strings.CutSuffix(tc.Title, " ("+warrenServer+" MCP Server)"); ok && tc.Kind == "other" &&
		catalogTool(name) && hasOption(p.Options, "proceed_always_server", "proceed_always_tool") {
		return name, true
	}
	return "", false
}

// catalogTool reports whether name is a tool of warren's catalog.
func catalogTool(name string) bool {
	for _, d := range tools.Catalog() {
		if d.Name == name {
			return true
		}
	}
	return false
}

// hasOption reports whether opts offers one of the option ids.
func hasOption(opts []permissionOption, ids ...string) bool {
	for _, o := range opts {
		for _, id := range ids {
			if o.OptionID == id {
				return true
			}
		}
	}
	return false
}
