package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Permission requests in the shapes the real adapters send (captured from
// claude-agent-acp 0.101.0, codex-acp 2.6.0 and gemini-cli 0.61.0; see
// provider/acp/warrentool.go). "@permission-as SHAPE ARG":
//
//	claude NAME        MCP tool mcp__warren__NAME (_meta.claudeCode)
//	codex NAME         tool_call update {title mcp.warren.NAME, rawInput
//	                   {server warren, tool NAME}}, then a request with
//	                   only the toolCallId and _meta.is_mcp_tool_approval
//	codex-server S/NAME the same for MCP server S
//	codex-shell CMD    a shell command: title and rawInput.command CMD
//	gemini NAME        title "NAME (warren MCP Server)", kind other, MCP options
//	gemini-shell CMD   title CMD, kind execute, exec options
//
// FAKEACP_TOOL_PERMISSION=claude|codex|gemini (1: claude) asks in that
// shape before each @tool call.

func (a *agent) askPermissionAs(sid, shape, arg string, out func(string)) bool {
	a.mu.Lock()
	a.perms++
	id := fmt.Sprintf("call_%d", a.perms)
	a.mu.Unlock()
	allow := []map[string]any{{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
		{"optionId": "always", "name": "Always", "kind": "allow_always"},
		{"optionId": "reject", "name": "Reject", "kind": "reject_once"}}
	params := map[string]any{"sessionId": sid, "options": allow}
	switch shape {
	case "claude":
		params["toolCall"] = map[string]any{"toolCallId": id, "title": arg, "kind": "other",
			"_meta": map[string]any{"claudeCode": map[string]any{"toolName": "mcp__warren__" + arg,
				"mcpServer": map[string]any{"name": "warren", "source": "client"}}}}
	case "codex", "codex-server":
		server, tool := "warren", arg
		if shape == "codex-server" {
			server, tool, _ = strings.Cut(arg, "/")
		}
		a.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": id, "kind": "execute",
			"title": "mcp." + server + "." + tool, "status": "in_progress",
			"rawInput": map[string]any{"server": server, "tool": tool, "arguments": map[string]any{}},
			"_meta":    map[string]any{"is_mcp_tool_call": true}})
		params["toolCall"] = map[string]any{"toolCallId": id, "kind": "execute", "status": "pending"}
		params["_meta"] = map[string]any{"is_mcp_tool_approval": true}
	case "codex-shell":
		raw := map[string]any{"command": arg, "cwd": "/tmp"}
		a.update(sid, map[string]any{"sessionUpdate": "tool_call", "toolCallId": id, "kind": "execute",
			"title": arg, "status": "in_progress", "rawInput": raw})
		params["toolCall"] = map[string]any{"toolCallId": id, "title": arg, "rawInput": raw, "kind": "execute", "status": "pending"}
	case "gemini":
		params["toolCall"] = map[string]any{"toolCallId": id, "status": "pending", "title": arg + " (warren MCP Server)",
			"kind": "other", "content": []any{}, "locations": []any{}}
		params["options"] = []map[string]any{{"optionId": "proceed_always_server", "name": "Allow all server tools for this session", "kind": "allow_always"},
			{"optionId": "proceed_always_tool", "name": "Allow tool for this session", "kind": "allow_always"},
			{"optionId": "allow", "name": "Allow", "kind": "allow_once"}, {"optionId": "reject", "name": "Reject", "kind": "reject_once"}}
	case "gemini-shell":
		params["toolCall"] = map[string]any{"toolCallId": id, "status": "pending", "title": arg, "kind": "execute"}
		params["options"] = []map[string]any{{"optionId": "proceed_always", "name": "Allow for this session", "kind": "allow_always"},
			{"optionId": "allow", "name": "Allow", "kind": "allow_once"}, {"optionId": "reject", "name": "Reject", "kind": "reject_once"}}
	default:
		out("unknown permission shape " + shape + ";")
		return false
	}
	r := a.request("session/request_permission", params)
	var res struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	_ = json.Unmarshal(r.Result, &res)
	out(fmt.Sprintf("permission %s %s: %s %s;", shape, arg, res.Outcome.Outcome, res.Outcome.OptionID))
	return res.Outcome.OptionID == "allow" || res.Outcome.OptionID == "always" || res.Outcome.OptionID == "proceed_always_tool"
}
