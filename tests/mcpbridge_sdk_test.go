package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sdkClient is an MCP client written with the official TypeScript SDK
// (@modelcontextprotocol/sdk, installed by scripts/e2e-install.sh mcp-sdk):
// it starts the bridge over stdio the way agent CLIs do, lists the tools,
// calls send_message to the parent and to USER, an unknown tool, and pings.
// argv: node sdkclient.cjs SDKDIR WARREN_BINARY.
const sdkClient = `const sdk = process.argv[2];
const { Client } = require(sdk + "/dist/cjs/client/index.js");
const { StdioClientTransport } = require(sdk + "/dist/cjs/client/stdio.js");
(async () => {
  const out = {};
  // The SDK passes only a few variables to a server unless told: an agent
  // CLI's mcpServers entry names WARREN_* explicitly, as here.
  const env = {};
  for (const k of ["WARREN_SOCKET", "WARREN_AGENT_CREDENTIAL", "WARREN_AGENT_ID"]) env[k] = process.env[k];
  const transport = new StdioClientTransport({ command: process.argv[3], args: ["mcp-bridge"], env, stderr: "pipe" });
  const client = new Client({ name: "warren-e2e", version: "1.0.0" });
  await client.connect(transport);
  out.server = client.getServerVersion();
  out.capabilities = client.getServerCapabilities();
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  out.sent = await client.callTool({ name: "send_message", arguments: { recipient: "lead", text: "hello from the SDK" } });
  out.routed = await client.callTool({ name: "send_message", arguments: { recipient: "USER", text: "no" } });
  try {
    await client.callTool({ name: "rm_rf", arguments: {} });
    out.unknown = "no error";
  } catch (e) {
    out.unknown = { code: e.code, message: e.message };
  }
  out.ping = await client.ping();
  await client.close();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e && e.stack || e); process.exit(1); });
`

// TestE2EMCPBridgeWithTheSDKClient: the official MCP SDK client, started
// inside an agent's turn, negotiates with the real `warren mcp-bridge`,
// parses its tools/list (every catalog tool) and its tools/call results,
// and its call lands as a tool.call of the turn. WARREN_E2E=1 only (it
// needs node and scripts/e2e-install.sh mcp-sdk; WARREN_E2E_MCP_SDK
// overrides the package directory).
func TestE2EMCPBridgeWithTheSDKClient(t *testing.T) {
	if os.Getenv("WARREN_E2E") != "1" {
		t.Skip("set WARREN_E2E=1 (after scripts/e2e-install.sh mcp-sdk) to run the MCP SDK client against the bridge")
	}
	sdk := os.Getenv("WARREN_E2E_MCP_SDK")
	if sdk == "" {
		sdk = e2ePath("node_modules", "@modelcontextprotocol", "sdk")
	}
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		t.Fatalf("the MCP SDK is not installed at %s (run scripts/e2e-install.sh mcp-sdk): %v", sdk, err)
	}
	d, lead, worker := bridgeTeam(t)
	client := filepath.Join(d.dir, "sdkclient.cjs")
	if err := os.WriteFile(client, []byte(sdkClient), 0o600); err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal(map[string]any{"run": []string{"node", client, sdk, procBinary}})
	res := d.callN("agent.send", map[string]any{"agent_id": worker, "message": string(msg)})
	var run struct {
		Stdout, Stderr string
		Exit           int
	}
	if err := json.Unmarshal([]byte(res["response"].(string)), &run); err != nil || run.Exit != 0 {
		t.Fatalf("the SDK client: %v %+v", err, run)
	}
	var out struct {
		Server       map[string]any
		Capabilities map[string]any
		Tools        []string
		Sent, Routed map[string]any
		Unknown      map[string]any
		Ping         map[string]any
	}
	if err := json.Unmarshal([]byte(run.Stdout), &out); err != nil {
		t.Fatalf("the SDK client printed %q: %v", run.Stdout, err)
	}
	t.Logf("SDK client: %s", run.Stdout)
	if out.Server["name"] != "warren" || out.Capabilities["tools"] == nil || len(out.Tools) != 17 {
		t.Fatalf("server %v, capabilities %v, tools %v", out.Server, out.Capabilities, out.Tools)
	}
	sc, _ := out.Sent["structuredContent"].(map[string]any)
	msgID, _ := sc["message_id"].(string)
	if out.Sent["isError"] != false || sc["status"] != "sent" || msgID == "" {
		t.Fatalf("send_message: %v", out.Sent)
	}
	if out.Routed["isError"] != true {
		t.Fatalf("send_message to USER: %v, want isError", out.Routed)
	}
	if out.Unknown["code"] != float64(-32602) || !strings.Contains(out.Unknown["message"].(string), "unknown tool") {
		t.Fatalf("unknown tool: %v", out.Unknown)
	}
	if n := enqueuedCount(t, d, lead, msgID); n != 1 {
		t.Fatalf("the lead's log has %d message.enqueued for %s, want 1", n, msgID)
	}
}
