package tests

import (
	"strings"
	"testing"
)

// TestSocketUnwatchedChildWaitAnsweredByTokenID is the operator's scenario of
// SPEC 4: a root spawns a child; the child, woken by its parent's message,
// calls await_input while nobody watches (no client ever sees the secret);
// after a daemon restart the operator finds the wait with waits.list and
// answers it by token id; the child continues; a second answer with the same
// token id is code 5.
func TestSocketUnwatchedChildWaitAnsweredByTokenID(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		script := writeScripts(t, d.dir)
		d.createAgent("boss", "scripted", script, "")
		if res := d.callN("agent.send", map[string]any{"agent_id": "boss", "message": "spawn kid"}); !strings.HasPrefix(str(res["response"]), "spawned: ") {
			t.Fatalf("spawn = %v", res)
		}
		if res := d.callN("agent.send", map[string]any{"agent_id": "boss", "message": "send kid ask deploy?"}); !strings.HasPrefix(str(res["response"]), "sent: ") {
			t.Fatalf("send to the kid = %v", res)
		}
		waitEvent(t, d, "boss/kid", "run.waiting", func(ev string, _ map[string]any) bool { return ev == "run.waiting" })
		d.Restart()
		ws, _ := d.callN("waits.list", nil)["waits"].([]any)
		if len(ws) != 1 {
			t.Fatalf("waits.list after restart = %v, want the kid's wait", ws)
		}
		w, _ := ws[0].(map[string]any)
		tokID := str(w["token_id"])
		if w["path"] != "boss/kid" || w["kind"] != "approval" || w["prompt"] != "deploy?" || !strings.HasPrefix(tokID, "tok_") ||
			str(w["run_id"]) == "" || str(w["deadline"]) == "" || str(w["since"]) == "" || len(str(w["agent_id"])) != 32 {
			t.Fatalf("wait = %v", w)
		}
		if mode == modeBinary {
			// The same through the CLI: warren waits shows the wait and the
			// command that answers it; the answer prints the kid's reply.
			out := runCLI(t, d.Home, "waits").want(t, 0, "warren waits").stdout
			if !strings.Contains(out, "boss/kid") || !strings.Contains(out, tokID) || !strings.Contains(out, "deploy?") ||
				!strings.Contains(out, "warren agent resume boss/kid --token-id "+tokID+" RESPONSE --home "+d.Home) {
				t.Fatalf("warren waits printed:\n%s", out)
			}
			out = runCLI(t, d.Home, "agent", "resume", "boss/kid", "--token-id", tokID, "yes").want(t, 0, "agent resume --token-id").stdout
			if !strings.Contains(out, "answer: yes") {
				t.Fatalf("agent resume --token-id printed %q, want the kid's answer", out)
			}
			r := runCLI(t, d.Home, "agent", "resume", "boss/kid", "--token-id", tokID, "yes").want(t, 1, "a second answer by the same token id")
			if !strings.Contains(r.stderr, tokID) {
				t.Fatalf("second answer: stderr %q does not name the token id", r.stderr)
			}
		} else {
			res, err := d.Client().Call(procCtx(t), "agent.resume", map[string]any{"agent_id": "boss/kid", "token_id": tokID, "response": "yes"})
			if err != nil || res["response"] != "answer: yes" {
				t.Fatalf("resume by token id = %v, %v; want the kid to go on with answer: yes", res, err)
			}
			_, err = d.Client().Call(procCtx(t), "agent.resume", map[string]any{"agent_id": "boss/kid", "token_id": tokID, "response": "yes"})
			wantCode(t, "a second answer by the same token id", err, 5)
		}
		if ws, _ := d.callN("waits.list", nil)["waits"].([]any); len(ws) != 0 {
			t.Fatalf("waits.list after the answer = %v, want none", ws)
		}
	})
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
