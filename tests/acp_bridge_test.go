package tests

import (
	"strings"
	"testing"
)

// TestACPToolCallsThroughTheBridge: an acp agent (the fake agent) starts
// the MCP server the provider passed in session/new (the real `warren
// mcp-bridge` of the daemon's binary, with the socket and the agent
// process's credential) and calls send_message; the call is a tool.call of
// the agent's running turn, and the message reaches its sibling.
func TestACPToolCallsThroughTheBridge(t *testing.T) {
	d := newTestDaemon(t, modeBinary)
	acpHome(t, d)
	d.Start()
	lead := d.createAgent("lead", "fake", "", "")
	w1 := d.createAgent("w1", "fake", "", lead)
	d.createAgent("w2", "fake", "", lead)
	res := d.callN("agent.send", map[string]any{"agent_id": w1,
		"message": `@tool send_message {"recipient":"w2","text":"hello from w1 over ACP"}`})
	if r := str(res["response"]); !strings.Contains(r, "tool send_message ->") || !strings.Contains(r, "message_id") {
		t.Fatalf("turn = %v, want the bridge's send_message result", res)
	}
	lg := d.callN("agent.log", map[string]any{"agent_id": w1})
	runID, callRun := "", "<none>"
	evs, _ := lg["events"].([]any)
	for _, e := range evs {
		m := e.(map[string]any)
		data, _ := m["data"].(map[string]any)
		switch m["event"] {
		case "turn.start":
			runID, _ = data["run_id"].(string)
		case "tool.call":
			if data["tool"] == "send_message" {
				callRun, _ = data["run_id"].(string)
			}
		}
	}
	if runID == "" || callRun != runID {
		t.Fatalf("send_message is logged with run %q, the turn's run is %q", callRun, runID)
	}
}
