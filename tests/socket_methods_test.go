package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/warren-dev/warren/protocol"
)

// rpcFunc is one request over one framing.
type rpcFunc func(ctx context.Context, method string, params map[string]any) (map[string]any, error)

// framing is a named way to call the daemon.
type framing struct {
	name string
	call rpcFunc
}

// framings returns both framings of SPEC 8.1 against d: native msgpack on
// the shared client, and Substrat's newline JSON (one connection each).
func (d *testDaemon) framings() []framing {
	c := d.Client()
	return []framing{
		{"msgpack", c.Call},
		{"json", func(ctx context.Context, m string, p map[string]any) (map[string]any, error) {
			return protocol.CallJSON(ctx, d.Sock, m, p)
		}},
	}
}

// TestSocketEveryMethod drives every method of SPEC 8.1's table over both
// framings, with the daemon in-process and as the binary: the success
// result's fields and each error case's exact code.
func TestSocketEveryMethod(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		for _, fr := range d.framings() {
			t.Run(fr.name, func(t *testing.T) { checkEveryMethod(t, d, fr) })
		}
		// daemon.shutdown last: it stops the daemon, which removes its socket.
		res, err := d.Client().Call(procCtx(t), "daemon.shutdown", nil)
		if err != nil {
			t.Fatalf("daemon.shutdown: %v", err)
		}
		if res["status"] != "shutting_down" {
			t.Fatalf("daemon.shutdown result = %v", res)
		}
		<-d.Exited()
		if _, err := os.Stat(d.Sock); !os.IsNotExist(err) {
			t.Fatalf("socket still there after daemon.shutdown: %v", err)
		}
	})
}

func checkEveryMethod(t *testing.T, d *testDaemon, fr framing) {
	ctx := procCtx(t)
	call := fr.call
	p := fr.name // agent name prefix, unique per framing
	must := func(method string, params map[string]any) map[string]any {
		t.Helper()
		res, err := call(ctx, method, params)
		if err != nil {
			t.Fatalf("%s %v: %v", method, params, err)
		}
		return res
	}
	fails := func(code int, method string, params map[string]any) {
		t.Helper()
		_, err := call(ctx, method, params)
		wantCode(t, fmt.Sprintf("%s %v", method, params), err, code)
	}

	// agent.create
	lead := must("agent.create", map[string]any{"name": p + "lead", "instructions": "lead", "provider": "inproc", "model": "echo",
		"metadata": map[string]any{"team": "a"}})
	leadID, _ := lead["agent_id"].(string)
	if len(leadID) != 32 || lead["name"] != p+"lead" {
		t.Fatalf("agent.create result = %v", lead)
	}
	kid := must("agent.create", map[string]any{"name": "kid", "instructions": "k", "provider": "inproc", "model": "echo", "parent": p + "lead"})
	kidID, _ := kid["agent_id"].(string)
	fails(2, "agent.create", map[string]any{"instructions": "no name"})
	fails(2, "agent.create", map[string]any{"name": 7})
	fails(2, "agent.create", map[string]any{"name": "bad name!"})
	fails(2, "agent.create", map[string]any{"name": "USER"})
	fails(2, "agent.create", map[string]any{"name": p + "lead", "provider": "inproc", "model": "echo"})
	fails(2, "agent.create", map[string]any{"name": p + "x", "provider": "nosuchprovider"})
	fails(2, "agent.create", map[string]any{"name": p + "x", "metadata": "notamap"})
	fails(1, "agent.create", map[string]any{"name": p + "x", "provider": "inproc", "model": "echo", "parent": "nosuchparent"})

	// agent.list
	list := must("agent.list", nil)
	agents, _ := list["agents"].([]any)
	var kidRow map[string]any
	for _, a := range agents {
		m, _ := a.(map[string]any)
		if m["agent_id"] == kidID {
			kidRow = m
		}
	}
	if kidRow == nil || kidRow["path"] != p+"lead/kid" || kidRow["parent_id"] != leadID || kidRow["provider"] != "inproc" ||
		kidRow["model"] != "echo" || kidRow["status"] == nil || kidRow["pending"] == nil {
		t.Fatalf("agent.list row of kid = %v (list %v)", kidRow, list)
	}

	// agent.inspect, by path, bare name and id
	for _, ref := range []string{p + "lead", leadID} {
		ins := must("agent.inspect", map[string]any{"agent_id": ref})
		if ins["agent_id"] != leadID || ins["name"] != p+"lead" || ins["path"] != p+"lead" {
			t.Fatalf("agent.inspect %s = %v", ref, ins)
		}
		children, _ := ins["children"].([]any)
		if len(children) != 1 {
			t.Fatalf("agent.inspect %s children = %v", ref, ins["children"])
		}
		if _, ok := ins["inbox"].([]any); !ok {
			t.Fatalf("agent.inspect %s has no inbox list: %v", ref, ins)
		}
	}
	fails(1, "agent.inspect", map[string]any{"agent_id": "nosuchagent"})
	fails(1, "agent.inspect", map[string]any{"agent_id": strings.Repeat("ab", 16)})
	fails(2, "agent.inspect", map[string]any{})
	fails(2, "agent.inspect", map[string]any{"agent_id": 12})
	fails(2, "agent.inspect", map[string]any{"agent_id": ""})

	// agent.send
	sent := must("agent.send", map[string]any{"agent_id": p + "lead", "message": "hello"})
	if sent["response"] != "echo: hello" || sent["status"] != "idle" || len(fmt.Sprint(sent["run_id"])) != 32 {
		t.Fatalf("agent.send result = %v", sent)
	}
	fails(1, "agent.send", map[string]any{"agent_id": "nosuchagent", "message": "x"})
	fails(2, "agent.send", map[string]any{"agent_id": p + "lead"})
	fails(2, "agent.send", map[string]any{"agent_id": p + "lead", "message": 3})
	fails(2, "agent.send", map[string]any{"message": "x"})
	fails(2, "agent.send", map[string]any{"agent_id": p + "lead", "message": "x", "provider": "nosuchprovider"})

	// tool.call: success, a tool-level error is a normal result, RPC errors
	tc := must("tool.call", map[string]any{"agent_id": p + "lead", "tool": "send_message",
		"arguments": map[string]any{"recipient": "USER", "text": "report from " + p}})
	msgID, _ := tc["message_id"].(string)
	if msgID == "" || tc["status"] != "sent" {
		t.Fatalf("tool.call send_message = %v", tc)
	}
	te := must("tool.call", map[string]any{"agent_id": p + "lead", "tool": "nosuchtool", "arguments": map[string]any{}})
	if _, ok := te["error"].(string); !ok {
		t.Fatalf("tool.call of an unknown tool must be a result {error}, got %v", te)
	}
	te = must("tool.call", map[string]any{"agent_id": p + "lead", "tool": "send_message", "arguments": map[string]any{"recipient": 5}})
	if _, ok := te["error"].(string); !ok {
		t.Fatalf("tool.call with bad arguments must be a result {error}, got %v", te)
	}
	lc := must("tool.call", map[string]any{"agent_id": p + "lead", "tool": "list_children"})
	if !strings.Contains(fmt.Sprint(lc), "kid") {
		t.Fatalf("tool.call list_children without arguments = %v", lc)
	}
	fails(1, "tool.call", map[string]any{"agent_id": "nosuchagent", "tool": "list_children", "arguments": map[string]any{}})
	fails(2, "tool.call", map[string]any{"agent_id": p + "lead", "arguments": map[string]any{}})
	fails(2, "tool.call", map[string]any{"agent_id": p + "lead", "tool": "list_children", "arguments": "x"})

	// inbox.list drains the USER inbox
	inbox := must("inbox.list", nil)
	if !strings.Contains(fmt.Sprint(inbox["messages"]), msgID) || !strings.Contains(fmt.Sprint(inbox["messages"]), "report from "+p) {
		t.Fatalf("inbox.list = %v, want message %s", inbox, msgID)
	}
	if again := must("inbox.list", nil); strings.Contains(fmt.Sprint(again), msgID) {
		t.Fatalf("inbox.list must drain: second call still has %s: %v", msgID, again)
	}

	// agent.cancel: nothing to cancel is invalid
	fails(2, "agent.cancel", map[string]any{"agent_id": p + "lead"})
	fails(1, "agent.cancel", map[string]any{"agent_id": "nosuchagent"})
	fails(2, "agent.cancel", map[string]any{})

	// agent.resume
	fails(2, "agent.resume", map[string]any{"agent_id": p + "lead"})
	fails(5, "agent.resume", map[string]any{"agent_id": p + "lead", "token": "garbage", "response": "x"})
	fails(5, "agent.resume", map[string]any{"agent_id": p + "lead", "token": "tok_0123456789abcdef." + strings.Repeat("A", 43), "response": "x"})
	fails(2, "agent.resume", map[string]any{"agent_id": p + "lead", "response": "no token"})
	fails(1, "agent.resume", map[string]any{"agent_id": "nosuchagent"})
	fails(2, "agent.resume", map[string]any{"agent_id": p + "lead", "token": 5})

	// agent.log
	lg := must("agent.log", map[string]any{"agent_id": p + "lead"})
	evs, _ := lg["events"].([]any)
	if len(evs) < 4 {
		t.Fatalf("agent.log has %d events, want created, session, turn start and complete: %v", len(evs), lg)
	}
	first, _ := evs[0].(map[string]any)
	if first["event"] != "agent.created" || fmt.Sprint(first["seq"]) != "1" {
		t.Fatalf("agent.log first event = %v", first)
	}
	since := must("agent.log", map[string]any{"agent_id": p + "lead", "since_seq": 2})
	sevs, _ := since["events"].([]any)
	if len(sevs) != len(evs)-2 {
		t.Fatalf("agent.log since_seq 2 has %d events, want %d", len(sevs), len(evs)-2)
	}
	fails(1, "agent.log", map[string]any{"agent_id": "nosuchagent"})
	fails(2, "agent.log", map[string]any{"agent_id": p + "lead", "since_seq": "two"})
	fails(2, "agent.log", map[string]any{"agent_id": p + "lead", "since_seq": -1})

	// daemon.status
	st := must("daemon.status", nil)
	if fmt.Sprint(st["pid"]) != fmt.Sprint(d.Pid()) || len(fmt.Sprint(st["boot_id"])) != 32 || st["version"] == nil ||
		st["uptime_s"] == nil || st["agents"] == nil {
		t.Fatalf("daemon.status = %v (pid %d)", st, d.Pid())
	}
	pools, _ := st["pools"].(map[string]any)
	if _, ok := pools["default"].(map[string]any); !ok {
		t.Fatalf("daemon.status pools = %v", st["pools"])
	}

	// agent.terminate: not while it has children; a leaf works; then gone
	fails(2, "agent.terminate", map[string]any{"agent_id": p + "lead"})
	fails(1, "agent.terminate", map[string]any{"agent_id": "nosuchagent"})
	term := must("agent.terminate", map[string]any{"agent_id": p + "lead/kid"})
	if term["agent_id"] != kidID || term["status"] != "terminated" {
		t.Fatalf("agent.terminate = %v", term)
	}
	fails(1, "agent.inspect", map[string]any{"agent_id": p + "lead/kid"})
	fails(1, "agent.send", map[string]any{"agent_id": kidID, "message": "x"})

	// unknown method
	fails(4, "no.such.method", nil)
	fails(4, "agent.frobnicate", map[string]any{"agent_id": p + "lead"})
}
