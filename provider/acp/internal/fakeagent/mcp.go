package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// callTool starts the session's first MCP server, as an agent CLI does,
// and calls one tool over MCP (initialize, notifications/initialized,
// tools/call). It returns the text it streams about the call.
func (a *agent) callTool(sid, name, args string) string {
	a.mu.Lock()
	servers := a.mcp[sid]
	a.mu.Unlock()
	if len(servers) == 0 {
		return "tool " + name + ": no MCP server;"
	}
	srv := servers[0]
	cmd := exec.Command(srv.Command, srv.Args...)
	cmd.Env = os.Environ()
	for _, e := range srv.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return "tool " + name + ": cannot start the MCP server: " + err.Error() + ";"
	}
	defer func() {
		_ = in.Close()
		_ = cmd.Wait()
	}()
	rd := bufio.NewReader(outPipe)
	call := func(id int, method string, params any) (json.RawMessage, string) {
		data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		_, _ = in.Write(append(data, '\n'))
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				return nil, "read: " + err.Error()
			}
			var m msg
			if json.Unmarshal(line, &m) != nil || m.Method != "" {
				continue
			}
			if len(m.Error) > 0 {
				return nil, string(m.Error)
			}
			return m.Result, ""
		}
	}
	if _, e := call(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "fakeagent"}}); e != "" {
		return "tool " + name + ": initialize failed: " + e + ";"
	}
	_, _ = in.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	var argv any = map[string]any{}
	if strings.TrimSpace(args) != "" {
		_ = json.Unmarshal([]byte(args), &argv)
	}
	res, e := call(2, "tools/call", map[string]any{"name": name, "arguments": argv})
	if e != "" {
		return "tool " + name + " error: " + e + ";"
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(res, &r)
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return fmt.Sprintf("tool %s -> %s;", name, b.String())
}

// mcpMain is "fakeagent mcp-bridge": a tiny stdio MCP server standing in
// for "warren mcp-bridge" in the provider's tests. Its tools/call answers
// with the call and which warren variables the server was given.
func mcpMain() {
	rd := bufio.NewReader(os.Stdin)
	w := os.Stdout
	for {
		line, err := rd.ReadBytes('\n')
		if err == io.EOF || err != nil {
			return
		}
		var m msg
		if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
			continue
		}
		var res any
		switch m.Method {
		case "initialize":
			res = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "fake-warren", "version": "0"}}
		case "tools/list":
			res = map[string]any{"tools": []any{map[string]any{"name": "send_message", "description": "Send a message to another agent.",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{
					"recipient": map[string]any{"type": "string"}, "text": map[string]any{"type": "string"}},
					"required": []string{"recipient", "text"}}}}}
		case "tools/call":
			var p struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			}
			_ = json.Unmarshal(m.Params, &p)
			text, _ := json.Marshal(map[string]any{"tool": p.Name, "args": p.Arguments,
				"socket": os.Getenv("WARREN_SOCKET"), "credential_set": os.Getenv("WARREN_AGENT_CREDENTIAL") != ""})
			res = map[string]any{"content": []any{map[string]any{"type": "text", "text": string(text)}}}
		default:
			data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			_, _ = w.Write(append(data, '\n'))
			continue
		}
		data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res})
		_, _ = w.Write(append(data, '\n'))
	}
}
