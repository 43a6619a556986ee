package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/warren-dev/warren/homedir"
)

// TestMCPBridgeNeedsNoHomeWithSocket (D14): an agent CLI may start the
// bridge with only the variables it was given. With WARREN_SOCKET and
// WARREN_AGENT_CREDENTIAL alone (no $HOME, no PATH) the bridge answers
// initialize and tools/list, and its tools/call reaches the daemon on that
// socket (which refuses the made-up credential). Without WARREN_SOCKET and
// without any home it says what to set.
func TestMCPBridgeNeedsNoHomeWithSocket(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_children","arguments":{}}}`,
	}, "\n") + "\n"
	env := []string{"WARREN_SOCKET=" + homedir.SocketPath(home), "WARREN_AGENT_CREDENTIAL=x"}
	r := runBin(t, warrenBin, env, in, "mcp-bridge")
	if r.code != 0 {
		t.Fatalf("mcp-bridge with only WARREN_SOCKET and a credential: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	replies := map[float64]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("bridge output %q: %v", line, err)
		}
		id, _ := m["id"].(float64)
		replies[id] = m
	}
	if res, _ := replies[1]["result"].(map[string]any); res["capabilities"] == nil {
		t.Fatalf("initialize: %v", replies[1])
	}
	res, _ := replies[2]["result"].(map[string]any)
	if tools, _ := res["tools"].([]any); len(tools) == 0 {
		t.Fatalf("tools/list: %v", replies[2])
	}
	e, _ := replies[3]["error"].(map[string]any)
	if msg, _ := e["message"].(string); !strings.Contains(msg, "credential rejected") {
		t.Fatalf("tools/call did not reach the daemon on WARREN_SOCKET: %v", replies[3])
	}
	r = runBin(t, warrenBin, []string{"WARREN_AGENT_CREDENTIAL=x"}, "", "mcp-bridge")
	if r.code == 0 || !strings.Contains(r.stderr, "WARREN_SOCKET") {
		t.Fatalf("mcp-bridge with neither a home nor WARREN_SOCKET: exit %d, stderr %s", r.code, r.stderr)
	}
}
