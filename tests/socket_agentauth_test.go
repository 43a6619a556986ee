package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// authScript is a scripted agent that, in its turn, calls the daemon's
// socket with its own credential (warren_script.rpc) and reports what each
// attempt returned. "creds PATH" writes its credential to PATH; "env"
// answers with its whole environment as JSON.
const authScript = `import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warren_script import read_turn, done, replaying, rpc, RpcError

def attempt(method, **params):
    try:
        return {"result": rpc(method, **params)}
    except RpcError as e:
        return {"code": e.code, "message": e.message}

while True:
    msg = read_turn()
    words = msg.split(" ")
    if words[0] == "env":
        done(json.dumps(dict(os.environ)))
    elif words[0] == "creds":
        with open(words[1], "w") as f:
            f.write(os.environ.get("WARREN_AGENT_CREDENTIAL", ""))
        done("written")
    elif words[0] == "exit":
        live = not replaying()
        done("bye")
        if live:
            sys.exit(0)
    elif words[0] == "attack":
        out = {
            "as_other_root": attempt("tool.call", agent_id="rootB", tool="send_message",
                                     arguments={"recipient": "USER", "text": "forged"}),
            "to_user": attempt("tool.call", tool="send_message", arguments={"recipient": "USER", "text": "forged"}),
            "to_other_tree": attempt("tool.call", tool="send_message", arguments={"recipient": "rootB", "text": "forged"}),
            "create_in_other_tree": attempt("agent.create", name="evil", parent="rootB", instructions="x"),
            "spawn_as_other_root": attempt("tool.call", agent_id="rootB", tool="spawn_agent",
                                           arguments={"name": "evil", "instructions": "x"}),
            "metadata_as_other_root": attempt("tool.call", agent_id="rootB", tool="set_agent_metadata",
                                              arguments={"agent_name": "b1", "key": "owner", "value": "mallory"}),
            "metadata_of_other_tree": attempt("tool.call", tool="set_agent_metadata",
                                              arguments={"agent_name": "b1", "key": "owner", "value": "mallory"}),
            "list": attempt("agent.list"),
            "to_parent": attempt("tool.call", tool="send_message", arguments={"recipient": "rootA", "text": "hello parent"}),
        }
        done(json.dumps(out))
    else:
        done("turn: " + msg)
`

func writeAuthScript(t *testing.T, d *testDaemon) string {
	t.Helper()
	writeScripts(t, d.dir) // the helper library
	path := filepath.Join(d.dir, "authagent")
	if err := os.WriteFile(path, []byte("#!"+procPython+"\n"+authScript), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAgentCredentialScopesSocketCalls: a script that calls the socket with
// its credential acts as its own agent, in its running turn: it cannot
// message outside its routing, act as another tree's agent, create agents
// in another tree or set another tree's metadata, and its allowed call is a
// tool.call of its turn. Between turns the credential gets code 2; once its
// process has ended, or with a made-up value, code 5.
func TestAgentCredentialScopesSocketCalls(t *testing.T) {
	d := startTestDaemon(t, modeInProcess)
	script := writeAuthScript(t, d)
	rootA := d.createAgent("rootA", "scripted", script, "")
	a1 := d.createAgent("a1", "scripted", script, rootA)
	rootB := d.createAgent("rootB", "scripted", script, "")
	b1 := d.createAgent("b1", "scripted", script, rootB)

	res := d.callN("agent.send", map[string]any{"agent_id": a1, "message": "attack"})
	var out map[string]map[string]any
	if err := json.Unmarshal([]byte(res["response"].(string)), &out); err != nil {
		t.Fatalf("response %v: %v", res["response"], err)
	}
	code := func(k string) float64 { c, _ := out[k]["code"].(float64); return c }
	toolErr := func(k string) string {
		r, _ := out[k]["result"].(map[string]any)
		e, _ := r["error"].(string)
		return e
	}
	for _, k := range []string{"as_other_root", "create_in_other_tree", "spawn_as_other_root", "metadata_as_other_root", "list"} {
		if code(k) != protocol.CodeInvalid {
			t.Errorf("%s: %v, want code 2", k, out[k])
		}
	}
	for _, k := range []string{"to_user", "to_other_tree", "metadata_of_other_tree"} {
		if toolErr(k) == "" {
			t.Errorf("%s: %v, want a tool error (routing)", k, out[k])
		}
	}
	if r, _ := out["to_parent"]["result"].(map[string]any); r["status"] != "sent" {
		t.Fatalf("to_parent: %v, want sent", out["to_parent"])
	}

	// Nothing reached the operator or the other tree.
	if msgs, _ := d.callN("inbox.list", nil)["messages"].([]any); len(msgs) != 0 {
		t.Errorf("USER inbox: %v, want empty", msgs)
	}
	if md, _ := d.callN("agent.inspect", map[string]any{"agent_id": b1})["metadata"].(map[string]any); len(md) != 0 {
		t.Errorf("b1 metadata = %v, want none", md)
	}
	if kids, _ := d.callN("agent.inspect", map[string]any{"agent_id": rootB})["children"].([]any); len(kids) != 1 {
		t.Errorf("rootB children = %v, want only b1", kids)
	}
	if inbox, _ := d.callN("agent.inspect", map[string]any{"agent_id": rootB})["inbox"].([]any); len(inbox) != 0 {
		t.Errorf("rootB inbox = %v, want empty", inbox)
	}

	// The allowed call is a tool.call of a1's turn.
	lg := d.callN("agent.log", map[string]any{"agent_id": a1})
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
				if args, _ := data["args"].(map[string]any); args["recipient"] == "rootA" {
					callRun, _ = data["run_id"].(string)
				}
			}
		}
	}
	if runID == "" || callRun != runID {
		t.Fatalf("the socket call to the parent is logged with run %q, the turn's run is %q: %v", callRun, runID, evs)
	}

	// Between turns the process (and its credential) lives, but there is
	// no turn to join.
	credFile := filepath.Join(d.dir, "cred")
	d.callN("agent.send", map[string]any{"agent_id": a1, "message": "creds " + credFile})
	cred, err := os.ReadFile(credFile)
	if err != nil || !strings.HasPrefix(string(cred), "wac_") {
		t.Fatalf("credential %q, %v", cred, err)
	}
	call := func(params map[string]any) error {
		_, err := d.Client().Call(procCtx(t), "tool.call", params)
		return err
	}
	toParent := map[string]any{"credential": string(cred), "tool": "send_message",
		"arguments": map[string]any{"recipient": "rootA", "text": "late"}}
	err = call(toParent)
	wantCode(t, "credential between turns", err, protocol.CodeInvalid)
	if !strings.Contains(err.Error(), "no running turn") {
		t.Errorf("between turns: %v, want it to say there is no running turn", err)
	}
	wantCode(t, "made-up credential", call(map[string]any{"credential": "wac_" + strings.Repeat("0", 64),
		"tool": "list_children"}), protocol.CodeTokenRejected)

	// A process that ended loses its credential; its agent lives on.
	d.callN("agent.send", map[string]any{"agent_id": a1, "message": "exit"})
	deadline := time.Now().Add(procBound)
	for err = call(toParent); protocol.IsCode(err, protocol.CodeInvalid) && time.Now().Before(deadline); err = call(toParent) {
		time.Sleep(10 * time.Millisecond) // the daemon reaps the exited script; nothing signals that to a client
	}
	wantCode(t, "credential of a process that exited", err, protocol.CodeTokenRejected)

	// So does a process the daemon stopped: a fresh one got a fresh
	// credential, which a terminate revokes.
	d.callN("agent.send", map[string]any{"agent_id": a1, "message": "creds " + credFile})
	cred2, err := os.ReadFile(credFile)
	if err != nil || string(cred2) == string(cred) {
		t.Fatalf("the new process's credential %q (%v) is the old one", cred2, err)
	}
	d.callN("agent.terminate", map[string]any{"agent_id": a1})
	toParent["credential"] = string(cred2)
	wantCode(t, "credential of a stopped process", call(toParent), protocol.CodeTokenRejected)
	_ = rootB
}

// TestAgentProcessEnvironment: a scripted agent's environment holds the
// allow-listed variables of the daemon's, the entry's env_pass and env
// settings and the daemon's own variables, and no other variable of the
// daemon's environment (an API key set there does not reach it).
func TestAgentProcessEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-daemon-secret")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "daemon-secret")
	t.Setenv("WARRENTEST_PASS_ONE", "passed")
	t.Setenv("WARRENTEST_EXACT", "exact")
	t.Setenv("WARRENTEST_OTHER", "not passed")
	t.Setenv("LC_WARRENTEST", "allowed")
	forEachMode(t, func(t *testing.T, mode procMode) {
		d := newTestDaemon(t, mode)
		if err := os.MkdirAll(d.Home, 0o700); err != nil {
			t.Fatal(err)
		}
		cfg := `{"providers":{"scripted":{"env_pass":["WARRENTEST_PASS_*","WARRENTEST_EXACT"],"env":{"WARRENTEST_FIXED":"fixed"}}}}`
		if err := os.WriteFile(filepath.Join(d.Home, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		d.Start()
		script := writeAuthScript(t, d)
		id := d.createAgent("envy", "scripted", script, "")
		res := d.callN("agent.send", map[string]any{"agent_id": id, "message": "env"})
		var env map[string]string
		if err := json.Unmarshal([]byte(res["response"].(string)), &env); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "WARRENTEST_OTHER"} {
			if v, ok := env[k]; ok {
				t.Errorf("%s=%q reached the agent process", k, v)
			}
		}
		want := map[string]string{"WARRENTEST_PASS_ONE": "passed", "WARRENTEST_EXACT": "exact", "WARRENTEST_FIXED": "fixed",
			"LC_WARRENTEST": "allowed", "PATH": os.Getenv("PATH"), "WARREN_AGENT_ID": id, "WARREN_SOCKET": d.Sock}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s = %q, want %q", k, env[k], v)
			}
		}
		if !strings.HasPrefix(env["WARREN_AGENT_CREDENTIAL"], "wac_") {
			t.Errorf("WARREN_AGENT_CREDENTIAL = %q", env["WARREN_AGENT_CREDENTIAL"])
		}
		if len(env["WARREN_AGENT_PROCESS"]) != 32 {
			t.Errorf("WARREN_AGENT_PROCESS = %q, want the process's 32-hex marker", env["WARREN_AGENT_PROCESS"])
		}
		if !strings.HasPrefix(env["PYTHONPATH"], filepath.Join(d.Home, "python")) {
			t.Errorf("PYTHONPATH = %q, want the helper library first", env["PYTHONPATH"])
		}
		for k := range env {
			if !allowedName(k) {
				t.Errorf("unexpected variable %s in the agent's environment", k)
			}
		}
	})
}

// allowedName: the names an agent process may have in TestAgentProcessEnvironment
// (those the interpreter adds itself included).
func allowedName(k string) bool {
	switch k {
	case "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "PYTHONPATH",
		"WARREN_AGENT_ID", "WARREN_SOCKET", "WARREN_AGENT_CREDENTIAL", "WARREN_AGENT_PROCESS", "WARRENTEST_PASS_ONE", "WARRENTEST_EXACT", "WARRENTEST_FIXED",
		"LC_CTYPE": // set by Python's UTF-8 mode coercion
		return true
	}
	return strings.HasPrefix(k, "LC_")
}
