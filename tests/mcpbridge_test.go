package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bridgeScript is a scripted agent whose turn does what an agent CLI does
// with warren's tools: it starts `warren mcp-bridge` as its child, in a
// session of its own (the child inherits WARREN_SOCKET,
// WARREN_AGENT_CREDENTIAL and WARREN_AGENT_ID) and talks MCP to it. The turn message is JSON:
//
//	{"bin": <warren>, "send": [{"line": <raw line>} | {"huge": N, "id": ID},
//	 ...], "creds": <path>}
//
// Each item is written as one line; items whose line is a request (or not
// JSON at all) wait for one reply line. {"huge": N} is a tools/call of
// send_message whose text is N bytes. The response is {"replies": [...],
// "exit": <the bridge's exit status>}. {"creds": PATH} writes the
// credential to a file instead; {"run": [argv], "env": {..}, "cwd": DIR}
// runs a program (an MCP client that starts the bridge itself; ${WARREN_SOCKET}
// and ${WARREN_AGENT_CREDENTIAL} in env values are replaced by this
// process's) and answers {"stdout", "stderr", "exit"}; with "mcp_config": PATH and "bridge": BIN it
// first writes a Claude Code MCP config there naming the bridge with this
// process's WARREN_SOCKET and WARREN_AGENT_CREDENTIAL, as the acp provider
// puts them in mcpServers.
const bridgeScript = `import json, os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warren_script import read_turn, done

def wants_reply(line):
    try:
        m = json.loads(line)
    except ValueError:
        return True
    return not isinstance(m, dict) or "id" in m

while True:
    req = json.loads(read_turn())
    if "run" in req:
        if "mcp_config" in req:
            with open(req["mcp_config"], "w") as f:
                json.dump({"mcpServers": {"warren": {"type": "stdio", "command": req["bridge"], "args": ["mcp-bridge"],
                    "env": {k: os.environ[k] for k in ("WARREN_SOCKET", "WARREN_AGENT_CREDENTIAL")}}}}, f)
        env = dict(os.environ)
        for k, v in req.get("env", {}).items():
            for name in ("WARREN_SOCKET", "WARREN_AGENT_CREDENTIAL"):
                v = v.replace("${%s}" % name, os.environ.get(name, ""))
            env[k] = v
        r = subprocess.run(req["run"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=req.get("cwd"))
        done(json.dumps({"stdout": r.stdout.decode(), "stderr": r.stderr.decode(), "exit": r.returncode}))
        continue
    if "creds" in req:
        with open(req["creds"], "w") as f:
            f.write(os.environ.get("WARREN_AGENT_CREDENTIAL", ""))
        done("written")
        continue
    p = subprocess.Popen([req["bin"], "mcp-bridge"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    replies = []
    for item in req["send"]:
        if "huge" in item:
            line = json.dumps({"jsonrpc": "2.0", "id": item["id"], "method": "tools/call", "params": {
                "name": "send_message", "arguments": {"recipient": "lead", "text": "x" * item["huge"]}}})
        else:
            line = item["line"]
        p.stdin.write(line.encode() + b"\n")
        p.stdin.flush()
        if wants_reply(line):
            replies.append(json.loads(p.stdout.readline()))
    p.stdin.close()
    code = p.wait()
    done(json.dumps({"replies": replies, "exit": code}))
`

// bridgeTeam starts a daemon with a lead (the test agent script) and its
// worker (bridgeScript).
func bridgeTeam(t *testing.T) (d *testDaemon, lead, worker string) {
	t.Helper()
	d = startTestDaemon(t, modeBinary)
	leadScript := writeScripts(t, d.dir)
	path := filepath.Join(d.dir, "bridgeagent")
	if err := os.WriteFile(path, []byte("#!"+procPython+"\n"+bridgeScript), 0o700); err != nil {
		t.Fatal(err)
	}
	lead = d.createAgent("lead", "scripted", leadScript, "")
	worker = d.createAgent("worker", "scripted", path, lead)
	return d, lead, worker
}

func mcpLine(id any, method string, params map[string]any) map[string]any {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if id != nil {
		m["id"] = id
	}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	return map[string]any{"line": string(b)}
}

func mcpCall(id any, tool string, args map[string]any) map[string]any {
	return mcpLine(id, "tools/call", map[string]any{"name": tool, "arguments": args})
}

// bridgeTurn runs one turn of the worker driving the bridge; it returns
// the bridge's replies by id (as JSON text; the unparseable line's reply
// under "null").
func bridgeTurn(t *testing.T, d *testDaemon, worker string, send ...map[string]any) map[string]map[string]any {
	t.Helper()
	msg, _ := json.Marshal(map[string]any{"bin": procBinary, "send": send})
	res := d.callN("agent.send", map[string]any{"agent_id": worker, "message": string(msg)})
	if _, ok := res["response"].(string); !ok {
		t.Fatalf("turn: %v, want a response", res)
	}
	var out struct {
		Replies []map[string]any
		Exit    int
	}
	if err := json.Unmarshal([]byte(res["response"].(string)), &out); err != nil {
		t.Fatalf("turn response %v: %v", res, err)
	}
	if out.Exit != 0 {
		t.Fatalf("the bridge exited with %d", out.Exit)
	}
	byID := map[string]map[string]any{}
	for _, r := range out.Replies {
		k, _ := json.Marshal(r["id"])
		byID[string(k)] = r
	}
	return byID
}

// mcpError returns the error object of a reply, failing unless it has the
// JSON-RPC code.
func mcpError(t *testing.T, what string, r map[string]any, code int) map[string]any {
	t.Helper()
	e, _ := r["error"].(map[string]any)
	if c, _ := e["code"].(float64); e == nil || int(c) != code {
		t.Fatalf("%s: reply %v, want JSON-RPC error %d", what, r, code)
	}
	return e
}

// mcpResult returns the result of a tools/call reply and its structured
// content.
func mcpResult(t *testing.T, what string, r map[string]any, isError bool) map[string]any {
	t.Helper()
	res, _ := r["result"].(map[string]any)
	if res == nil || res["isError"] != isError {
		t.Fatalf("%s: reply %v, want a result with isError %v", what, r, isError)
	}
	sc, _ := res["structuredContent"].(map[string]any)
	return sc
}

// logEvents returns an agent's log entries.
func logEvents(t *testing.T, d *testDaemon, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range d.callN("agent.log", map[string]any{"agent_id": id, "limit": 10000})["events"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// TestMCPBridgeEndToEnd: an agent whose turn runs the real `warren
// mcp-bridge` gets the catalog and its calls run as tool calls of its
// turn: logged with the turn's run id, routed (the message lands in its
// parent's log; USER is refused at tool level). An unknown tool, huge
// arguments, a non-JSON line and an unknown method get their errors and
// the bridge goes on.
func TestMCPBridgeEndToEnd(t *testing.T) {
	d, lead, worker := bridgeTeam(t)
	r := bridgeTurn(t, d, worker,
		mcpLine(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "e2e", "version": "1"}}),
		mcpLine(nil, "notifications/initialized", nil),
		mcpLine(2, "tools/list", nil),
		mcpCall(3, "send_message", map[string]any{"recipient": "lead", "text": "hello from the bridge"}),
		mcpCall(4, "send_message", map[string]any{"recipient": "USER", "text": "not mine to reach"}),
		mcpCall(5, "rm_rf", map[string]any{}),
		map[string]any{"huge": 2 << 20, "id": 6}, // over the 1 MiB message limit
		map[string]any{"line": "this is not JSON"},
		mcpLine(7, "server/discover", nil),
		mcpLine(8, "ping", nil),
	)
	if v := r["1"]["result"].(map[string]any)["protocolVersion"]; v != "2025-06-18" {
		t.Errorf("initialize: protocolVersion %v", v)
	}
	if tools, _ := r["2"]["result"].(map[string]any)["tools"].([]any); len(tools) < 17 {
		t.Errorf("tools/list: %d tools", len(tools))
	}
	sent := mcpResult(t, "send_message to the parent", r["3"], false)
	msgID, _ := sent["message_id"].(string)
	if sent["status"] != "sent" || msgID == "" {
		t.Fatalf("send_message: %v", sent)
	}
	if e := mcpResult(t, "send_message to USER", r["4"], true); !strings.Contains(e["error"].(string), "USER") {
		t.Errorf("send_message to USER: %v", e)
	}
	mcpError(t, "unknown tool", r["5"], -32602)
	if e := mcpResult(t, "huge text", r["6"], true); !strings.Contains(e["error"].(string), "text") {
		t.Errorf("huge text: %v, want a tool error naming the parameter", e)
	}
	mcpError(t, "not JSON", r["null"], -32700)
	mcpError(t, "server/discover", r["7"], -32601)
	if r["8"]["result"] == nil {
		t.Errorf("ping: %v", r["8"])
	}

	// The calls are the turn's tool.call entries.
	runID, calls := "", map[string]string{}
	for _, e := range logEvents(t, d, worker) {
		data, _ := e["data"].(map[string]any)
		switch e["event"] {
		case "turn.start":
			runID, _ = data["run_id"].(string)
		case "tool.call":
			if args, _ := data["args"].(map[string]any); args["recipient"] != nil {
				calls[args["recipient"].(string)], _ = data["run_id"].(string)
			}
		}
	}
	if runID == "" || calls["lead"] != runID || calls["USER"] != runID {
		t.Fatalf("tool.call run ids %v, the turn's run is %q", calls, runID)
	}
	// The message landed in the lead's log.
	if n := enqueuedCount(t, d, lead, msgID); n != 1 {
		t.Fatalf("the lead's log has %d message.enqueued for %s, want 1", n, msgID)
	}
}

// enqueuedCount counts the message.enqueued entries of a message id in an
// agent's log.
func enqueuedCount(t *testing.T, d *testDaemon, id, msgID string) int {
	t.Helper()
	n := 0
	for _, e := range logEvents(t, d, id) {
		if e["event"] == "message.enqueued" && strings.Contains(mustJSON(t, e["data"]), msgID) {
			n++
		}
	}
	return n
}

// TestMCPBridgeRerunAnswersFromTheLog: a turn that sends a message through
// the bridge and then waits (await_input through the bridge) is re-run when
// the wait is answered; in the re-run the same send_message is answered
// from the log (same message id, the parent gets the message once) and
// await_input returns the operator's answer.
func TestMCPBridgeRerunAnswersFromTheLog(t *testing.T) {
	d, lead, worker := bridgeTeam(t)
	send := []map[string]any{
		mcpLine(1, "initialize", map[string]any{"protocolVersion": "2025-11-25"}),
		mcpCall(2, "send_message", map[string]any{"recipient": "lead", "text": "before the wait"}),
		mcpCall(3, "await_input", map[string]any{"kind": "approval", "prompt": "go on?", "timeout": 3600}),
	}
	msg, _ := json.Marshal(map[string]any{"bin": procBinary, "send": send})
	res := d.callN("agent.send", map[string]any{"agent_id": worker, "message": string(msg)})
	token, _ := res["token"].(string)
	if res["status"] != "suspended" || token == "" {
		t.Fatalf("turn: %v, want it suspended on the bridge's await_input", res)
	}
	res = d.callN("agent.resume", map[string]any{"agent_id": worker, "token": token, "response": "yes"})
	var out struct{ Replies []map[string]any }
	if err := json.Unmarshal([]byte(res["response"].(string)), &out); err != nil || len(out.Replies) != 3 {
		t.Fatalf("the re-run's response %v: %v", res, err)
	}
	first := mcpResult(t, "send_message in the re-run", out.Replies[1], false)
	if ans := mcpResult(t, "await_input in the re-run", out.Replies[2], false); ans["response"] != "yes" {
		t.Fatalf("await_input answered %v, want the operator's yes", ans)
	}
	msgID, _ := first["message_id"].(string)
	if n := enqueuedCount(t, d, lead, msgID); n != 1 {
		t.Fatalf("the lead's log has %d message.enqueued for %s, want 1 (the re-run's call answered from the log)", n, msgID)
	}
	sends := 0
	for _, e := range logEvents(t, d, worker) {
		if data, _ := e["data"].(map[string]any); e["event"] == "tool.call" && data["tool"] == "send_message" {
			sends++
		}
	}
	if sends != 1 {
		t.Fatalf("the worker's log has %d send_message tool.call entries, want 1", sends)
	}
}

// runBridge runs `warren mcp-bridge` with env, writes lines, closes its
// stdin and returns its replies by id.
func runBridge(t *testing.T, env []string, lines ...map[string]any) map[string]map[string]any {
	t.Helper()
	var in bytes.Buffer
	for _, l := range lines {
		in.WriteString(l["line"].(string) + "\n")
	}
	cmd := exec.CommandContext(procCtx(t), procBinary, "mcp-bridge")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("warren mcp-bridge: %v\n%s", err, stderr.String())
	}
	byID := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("bridge output line %q: %v", sc.Text(), err)
		}
		k, _ := json.Marshal(m["id"])
		byID[string(k)] = m
	}
	return byID
}

// TestMCPBridgeRefusalsOutsideATurn: the bridge with a live credential
// between turns, with the credential and an unknown WARREN_AGENT_ID, with
// a made-up credential, and with the credential of a process that was
// stopped: four clear, distinct MCP errors; no daemon at all: -32001.
func TestMCPBridgeRefusalsOutsideATurn(t *testing.T) {
	d, _, worker := bridgeTeam(t)
	credFile := filepath.Join(d.dir, "cred")
	msg, _ := json.Marshal(map[string]any{"creds": credFile})
	d.callN("agent.send", map[string]any{"agent_id": worker, "message": string(msg)})
	cred, err := os.ReadFile(credFile)
	if err != nil || !strings.HasPrefix(string(cred), "wac_") {
		t.Fatalf("credential %q, %v", cred, err)
	}
	call := mcpCall(1, "send_message", map[string]any{"recipient": "lead", "text": "late"})
	refused := func(what string, env []string, warrenCode float64, text string) {
		t.Helper()
		r := runBridge(t, env, call)["1"]
		e := mcpError(t, what, r, -32000)
		if data, _ := e["data"].(map[string]any); data["warren_code"] != warrenCode || !strings.Contains(e["message"].(string), text) {
			t.Fatalf("%s: %v, want warren_code %v saying %q", what, e, warrenCode, text)
		}
	}
	sock := "WARREN_SOCKET=" + d.Sock
	live := "WARREN_AGENT_CREDENTIAL=" + string(cred)
	refused("between turns", []string{sock, live}, 2, "has no running turn")
	refused("unknown agent", []string{sock, live, "WARREN_AGENT_ID=ghost"}, 1, `agent "ghost" not found`)
	refused("made-up credential", []string{sock, "WARREN_AGENT_CREDENTIAL=wac_" + strings.Repeat("0", 64)}, 5, "unknown or revoked")
	d.callN("agent.terminate", map[string]any{"agent_id": worker})
	refused("stale credential", []string{sock, live}, 5, "unknown or revoked")

	e := mcpError(t, "no daemon", runBridge(t, []string{"WARREN_SOCKET=" + filepath.Join(d.dir, "none.sock"), live}, call)["1"], -32001)
	if !strings.Contains(e["message"].(string), "cannot reach the warren daemon") {
		t.Fatalf("no daemon: %v", e)
	}
}

// TestMCPBridgeLeavesNoProcess: the bridge a turn started ends when the
// turn's process is killed (the run suspends), even though the script
// starts it in a session of its own where the kill of the agent's process
// group does not reach it: its stdin closes and it exits.
func TestMCPBridgeLeavesNoProcess(t *testing.T) {
	d, _, worker := bridgeTeam(t)
	send := []map[string]any{mcpCall(1, "await_input", map[string]any{"kind": "approval", "prompt": "wait", "timeout": 3600})}
	msg, _ := json.Marshal(map[string]any{"bin": procBinary, "send": send})
	if res := d.callN("agent.send", map[string]any{"agent_id": worker, "message": string(msg)}); res["status"] != "suspended" {
		t.Fatalf("turn: %v", res)
	}
	deadline := time.Now().Add(procBound)
	for bridgeProcs(t) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d warren mcp-bridge processes are left after the turn ended", bridgeProcs(t))
		}
		time.Sleep(20 * time.Millisecond) // the kernel reaps; nothing signals a test
	}
}

// bridgeProcs counts live `<procBinary> mcp-bridge` processes.
func bridgeProcs(t *testing.T) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to count the bridge processes in: %v", err)
	}
	n := 0
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if strings.Contains(string(stat), ") Z ") {
			continue // a zombie has ended
		}
		if string(cmdline) == procBinary+"\x00mcp-bridge\x00" {
			n++
		}
	}
	return n
}

// TestMCPBridgeExitsOnSIGTERM: the MCP stdio shutdown sequence ends with
// SIGTERM when the server has not exited: the bridge, its stdin still
// open, exits 0 at once (the signal context used to leave it blocked on
// its read).
func TestMCPBridgeExitsOnSIGTERM(t *testing.T) {
	if procBuildErr != nil {
		t.Fatal(procBuildErr)
	}
	cmd := exec.Command(procBinary, "mcp-bridge")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A ping answered: the bridge is up and reading.
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, `"result":{}`) {
		t.Fatalf("ping: %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("warren mcp-bridge after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(procBound):
		_ = cmd.Process.Kill()
		t.Fatal("warren mcp-bridge did not exit on SIGTERM")
	}
}
