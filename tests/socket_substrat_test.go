package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// substratRaw drives the JSON framing exactly as Substrat's client does:
// connect, write one line, shutdown(SHUT_WR), read to EOF. It returns the
// raw bytes the daemon wrote.
func substratRaw(t testing.TB, sock string, body []byte) []byte {
	t.Helper()
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(body); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := conn.CloseWrite(); err != nil {
		t.Fatalf("shutdown(SHUT_WR): %v", err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read to EOF: %v", err)
	}
	return out
}

// oneLine decodes a reply that must be exactly one '\n'-terminated JSON
// object.
func oneLine(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	if len(raw) == 0 || raw[len(raw)-1] != '\n' || bytes.Count(raw, []byte("\n")) != 1 {
		t.Fatalf("reply is not exactly one line: %q", raw)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("reply %q: %v", raw, err)
	}
	return m
}

// TestSocketSubstratFraming sends raw Substrat-style requests: the id is
// echoed verbatim (string, number), results and errors are single lines,
// the stream is chunk lines then done, and errors carry the exact codes.
func TestSocketSubstratFraming(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		req := func(id any, method string, params any) map[string]any {
			t.Helper()
			b, _ := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
			return oneLine(t, substratRaw(t, d.Sock, append(b, '\n')))
		}
		r := req("req-1", "agent.create", map[string]any{"name": "sub", "instructions": "x", "provider": "inproc", "model": "echo"})
		res, _ := r["result"].(map[string]any)
		if r["id"] != "req-1" || res["name"] != "sub" || len(fmt.Sprint(res["agent_id"])) != 32 {
			t.Fatalf("agent.create reply = %v", r)
		}
		r = req(42, "agent.send", map[string]any{"agent_id": "sub", "message": "hi"})
		res, _ = r["result"].(map[string]any)
		if r["id"] != float64(42) || res["response"] != "echo: hi" {
			t.Fatalf("agent.send reply = %v", r)
		}
		// params may be absent
		raw := substratRaw(t, d.Sock, []byte(`{"id":"x","method":"agent.list"}`+"\n"))
		if m := oneLine(t, raw); m["id"] != "x" || m["result"] == nil {
			t.Fatalf("agent.list without params = %s", raw)
		}
		// errors: exact code, id echoed
		for _, c := range []struct {
			method string
			params any
			code   float64
		}{
			{"agent.inspect", map[string]any{"agent_id": "ghost"}, 1},
			{"agent.inspect", map[string]any{}, 2},
			{"agent.inspect", map[string]any{"agent_id": true}, 2},
			{"agent.send", map[string]any{"agent_id": "sub", "message": []int{1}}, 2},
			{"nope", map[string]any{}, 4},
			{"agent.resume", map[string]any{"agent_id": "sub", "token": "tok_x.y", "response": "r"}, 5},
		} {
			r := req("e", c.method, c.params)
			e, _ := r["error"].(map[string]any)
			if r["id"] != "e" || e["code"] != c.code || e["message"] == "" {
				t.Fatalf("%s %v: reply %v, want error code %v", c.method, c.params, r, c.code)
			}
		}
		// agent.stream: chunk frames, then done, one per line
		b, _ := json.Marshal(map[string]any{"id": "s", "method": "agent.stream", "params": map[string]any{"agent_id": "sub", "message": "yo"}})
		raw = substratRaw(t, d.Sock, append(b, '\n'))
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		if len(lines) < 2 || lines[len(lines)-1] != `{"done":true}` {
			t.Fatalf("agent.stream lines = %q", lines)
		}
		var text strings.Builder
		for _, l := range lines[:len(lines)-1] {
			var f map[string]any
			if err := json.Unmarshal([]byte(l), &f); err != nil {
				t.Fatalf("stream line %q: %v", l, err)
			}
			s, ok := f["chunk"].(string)
			if !ok {
				t.Fatalf("stream line %q is not a chunk frame", l)
			}
			text.WriteString(s)
		}
		if text.String() != "echo: yo" {
			t.Fatalf("streamed text = %q", text.String())
		}
		// a stream error is one frame with id null
		b, _ = json.Marshal(map[string]any{"id": "s", "method": "agent.stream", "params": map[string]any{"agent_id": "ghost", "message": "yo"}})
		m := oneLine(t, substratRaw(t, d.Sock, append(b, '\n')))
		if e, _ := m["error"].(map[string]any); m["id"] != nil || e["code"] != float64(1) {
			t.Fatalf("agent.stream of an unknown agent = %v, want id null and code 1", m)
		}
	})
}

// substratClientPy mimics Substrat's rpc.py sync_call: AF_UNIX, sendall of
// the JSON line, shutdown(SHUT_WR), read until EOF, parse one line.
const substratClientPy = `import json, socket, sys

def sync_call(path, method, params, timeout=120.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    try:
        s.sendall((json.dumps({"id": "req-1", "method": method, "params": params}) + "\n").encode())
        s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    resp = json.loads(buf.decode())
    if "error" in resp:
        raise RuntimeError("rpc error %d: %s" % (resp["error"]["code"], resp["error"]["message"]))
    return resp["result"]

path = sys.argv[1]
out = {}
out["create"] = sync_call(path, "agent.create", {"name": "py", "instructions": "from python", "provider": "inproc", "model": "echo"})
out["child"] = sync_call(path, "agent.create", {"name": "pykid", "instructions": "kid", "provider": "inproc", "model": "echo", "parent": "py"})
out["list"] = sync_call(path, "agent.list", {})
out["send"] = sync_call(path, "agent.send", {"agent_id": "py", "message": "from substrat"})
out["tool"] = sync_call(path, "tool.call", {"agent_id": "py", "tool": "send_message", "arguments": {"recipient": "USER", "text": "hi user"}})
out["inbox"] = sync_call(path, "inbox.list", {})
try:
    sync_call(path, "agent.inspect", {"agent_id": "ghost"})
except RuntimeError as e:
    out["missing"] = str(e)
print(json.dumps(out))
`

// TestSocketSubstratPythonClient runs a Python copy of Substrat's client
// against the daemon: create, list, send, tool.call and inbox.list work
// unchanged, and an unknown agent is error code 1.
func TestSocketSubstratPythonClient(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		py := filepath.Join(d.dir, "rpc.py")
		if err := os.WriteFile(py, []byte(substratClientPy), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "python3", py, d.Sock)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python client: %v\n%s", err, stderr.String())
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(out, &raw); err != nil {
			t.Fatalf("python output %q: %v", out, err)
		}
		got := map[string]map[string]any{}
		for _, k := range []string{"create", "child", "list", "send", "tool", "inbox"} {
			var m map[string]any
			if err := json.Unmarshal(raw[k], &m); err != nil {
				t.Fatalf("python result %s = %s: %v", k, raw[k], err)
			}
			got[k] = m
		}
		var missing string
		_ = json.Unmarshal(raw["missing"], &missing)
		id, _ := got["create"]["agent_id"].(string)
		if len(id) != 32 || got["create"]["name"] != "py" {
			t.Fatalf("create = %v", got["create"])
		}
		if !strings.Contains(fmt.Sprint(got["list"]["agents"]), "py/pykid") {
			t.Fatalf("list = %v", got["list"])
		}
		if got["send"]["response"] != "echo: from substrat" {
			t.Fatalf("send = %v", got["send"])
		}
		if got["tool"]["status"] != "sent" || got["tool"]["message_id"] == nil {
			t.Fatalf("tool.call = %v", got["tool"])
		}
		if !strings.Contains(fmt.Sprint(got["inbox"]["messages"]), "hi user") {
			t.Fatalf("inbox = %v", got["inbox"])
		}
		if !strings.HasPrefix(missing, "rpc error 1:") {
			t.Fatalf("inspect of an unknown agent from python = %q, want rpc error 1", missing)
		}
	})
}
