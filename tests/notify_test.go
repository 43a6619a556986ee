package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// notifySinkConfig is a command sink that appends each notification to
// dir/attempts and fails while dir/block exists.
func notifySinkConfig(dir string) map[string]any {
	return map[string]any{"type": "command", "name": "file",
		"argv": []string{"/bin/sh", "-c", "cat >> " + filepath.Join(dir, "attempts") + " && test ! -e " + filepath.Join(dir, "block")}}
}

// attempts reads the notifications the sink was given.
func attempts(t *testing.T, dir string) []map[string]any {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, "attempts"))
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if l != "" && json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// waitUntil polls cond (another process's files: no notification) until
// it holds, failing after a bound.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(procReadyDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, procReadyDeadline)
		}
		time.Sleep(10 * time.Millisecond) // files of another process have no change notification
	}
}

// TestNotificationSurvivesAKill is SPEC 14's delivery promise with a real
// daemon: an agent waits for approval while the sink fails; the daemon is
// killed (-9) before the sink took it; after the start the notification
// is delivered with the same id, carries the command that answers the
// wait (which works as printed) and never the token's secret; notify.jsonl
// records the acknowledgement, daemon.status and `warren notify log` show
// it, and `warren notify test` reaches the sink.
func TestNotificationSurvivesAKill(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, modeBinary)
	sinkDir := filepath.Join(d.dir, "sink")
	writeFile(t, filepath.Join(sinkDir, "block"), "")
	writeFile(t, filepath.Join(d.Home, "config.json"), mustJSON(t, map[string]any{"notify": []any{notifySinkConfig(sinkDir)}}))
	d.Start()
	script := writeScripts(t, d.dir)
	id := d.createAgent("lead", "scripted", script, "")
	sent := make(chan map[string]any, 1)
	go func() {
		res, _ := d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": id, "message": "ask ship it?"})
		sent <- res
	}()
	res := <-sent
	secret, _ := res["token"].(string)
	if secret == "" {
		t.Fatalf("agent.send of a wait returned no token: %v", res)
	}
	waitUntil(t, "a first attempt at the notification", func() bool { return len(attempts(t, sinkDir)) > 0 })
	first := attempts(t, sinkDir)[0]
	if first["kind"] != "run.waiting" || first["path"] != "lead" || first["wait_kind"] != "approval" || first["text"] != "ship it?" {
		t.Fatalf("the notification: %v", first)
	}
	if strings.Contains(readFile(t, filepath.Join(d.Home, "notify.jsonl")), `"ack"`) {
		t.Fatal("notify.jsonl records an acknowledgement the sink refused")
	}

	d.Kill()
	if err := os.Remove(filepath.Join(sinkDir, "block")); err != nil {
		t.Fatal(err)
	}
	d.Start()
	waitUntil(t, "the acknowledgement after the restart", func() bool {
		b, _ := os.ReadFile(filepath.Join(d.Home, "notify.jsonl"))
		return strings.Contains(string(b), `"ack":"`+first["id"].(string)+`"`)
	})
	all := attempts(t, sinkDir)
	last := all[len(all)-1]
	if last["id"] != first["id"] || last["token_id"] != first["token_id"] {
		t.Fatalf("delivered after the restart: %v, want the same id as %v", last, first)
	}
	if b := readFile(t, filepath.Join(sinkDir, "attempts")); strings.Contains(b, secret) {
		t.Fatal("a notification carries the token's secret")
	}

	// The command it carries answers the wait, as printed.
	cmd := strings.Fields(strings.Replace(last["command"].(string), "RESPONSE", "yes", 1))
	if cmd[0] != "warren" || cmd[len(cmd)-2] != "--home" {
		t.Fatalf("the command %q", last["command"])
	}
	runCLI(t, d.Home, cmd[1:len(cmd)-2]...).want(t, 0, "the notification's command")
	waitEvent(t, d, id, "the answered run's turn.complete", func(ev string, data map[string]any) bool {
		return ev == "turn.complete" && strings.Contains(mustJSON(t, data), "answer: yes")
	})

	st := d.callN("daemon.status", nil)
	if n, _ := st["notify"].(map[string]any); n == nil || len(n["sinks"].([]any)) != 1 {
		t.Fatalf("daemon.status notify: %v", st["notify"])
	}
	if out := runCLI(t, d.Home, "notify", "log").want(t, 0, "notify log").stdout; !strings.Contains(out, `"ack":"`+first["id"].(string)+`"`) {
		t.Fatalf("notify log: %s", out)
	}
	if out := runCLI(t, d.Home, "notify", "test").want(t, 0, "notify test").stdout; !strings.Contains(out, "file: delivered") {
		t.Fatalf("notify test: %s", out)
	}
	if got := attempts(t, sinkDir); got[len(got)-1]["kind"] != "test" {
		t.Fatalf("the sink did not get the test: %v", got[len(got)-1])
	}
}

// TestRootMessageToUserIsNotified: a root agent's message to USER is a
// notification (kind message), its sender named; a child's message to its
// parent is not.
func TestRootMessageToUserIsNotified(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, modeBinary)
	sinkDir := filepath.Join(d.dir, "sink")
	if err := os.MkdirAll(sinkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(d.Home, "config.json"), mustJSON(t, map[string]any{"notify": []any{notifySinkConfig(sinkDir)}}))
	d.Start()
	script := writeScripts(t, d.dir)
	lead := d.createAgent("lead", "scripted", script, "")
	d.createAgent("w1", "scripted", script, lead)
	d.callN("agent.send", map[string]any{"agent_id": lead, "message": "send USER all-done"})
	d.callN("agent.send", map[string]any{"agent_id": "lead/w1", "message": "send lead from-the-worker"})
	waitUntil(t, "the message's notification", func() bool {
		for _, a := range attempts(t, sinkDir) {
			if a["kind"] == "message" {
				return true
			}
		}
		return false
	})
	for _, a := range attempts(t, sinkDir) {
		if a["kind"] == "message" && (a["text"] != "all-done" || a["path"] != "lead" || !strings.HasPrefix(a["id"].(string), "USER:")) {
			t.Errorf("the message notification: %v", a)
		}
		if strings.Contains(mustJSON(t, a), "from-the-worker") {
			t.Errorf("a child's message to its parent was notified: %v", a)
		}
	}
}
