package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// suspend sends "ask <prompt>" to a scripted agent and returns the
// suspended result (token, run_id, wait).
func suspend(t *testing.T, d *testDaemon, agent, prompt string) (token, runID string) {
	t.Helper()
	res := d.callN("agent.send", map[string]any{"agent_id": agent, "message": "ask " + prompt})
	token, _ = res["token"].(string)
	runID, _ = res["run_id"].(string)
	wait, _ := res["wait"].(map[string]any)
	if res["status"] != "suspended" || !strings.HasPrefix(token, "tok_") || runID == "" || wait["prompt"] != prompt {
		t.Fatalf("agent.send ask = %v, want status suspended with a token and the wait", res)
	}
	ins := d.callN("agent.inspect", map[string]any{"agent_id": agent})
	if ins["status"] != "suspended" {
		t.Fatalf("status while waiting = %v", ins["status"])
	}
	secret := token[strings.IndexByte(token, '.')+1:]
	if strings.Contains(fmt.Sprint(ins), secret) {
		t.Fatalf("agent.inspect shows the token's secret: %v", ins)
	}
	iw, _ := ins["wait"].(map[string]any)
	if iw == nil || iw["prompt"] != prompt || !strings.HasPrefix(token, fmt.Sprint(iw["token_id"])) {
		t.Fatalf("agent.inspect wait = %v, want the prompt and the token id of %s", ins["wait"], token[:strings.IndexByte(token, '.')])
	}
	return token, runID
}

func resume(d *testDaemon, agent, token, response string) (map[string]any, error) {
	return d.Client().Call(procCtx(d.t), "agent.resume", map[string]any{"agent_id": agent, "token": token, "response": response})
}

// TestSocketAwaitSuspendResume: a scripted agent calls await_input; the
// token resumes it once with the response as the tool's result; repeating
// the resume returns the same result; a wrong secret is code 5.
func TestSocketAwaitSuspendResume(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		script := writeScripts(t, d.dir)
		d.createAgent("asker", "scripted", script, "")
		token, runID := suspend(t, d, "asker", "deploy?")
		bad := token[:strings.IndexByte(token, '.')+1] + strings.Repeat("A", 43)
		_, err := resume(d, "asker", bad, "yes")
		wantCode(t, "resume with a wrong secret", err, 5)
		res, err := resume(d, "asker", token, "yes")
		if err != nil || res["response"] != "answer: yes" || res["run_id"] != runID {
			t.Fatalf("resume = %v, %v; want answer: yes for run %s", res, err, runID)
		}
		again, err := resume(d, "asker", token, "yes")
		if err != nil || again["response"] != "answer: yes" {
			t.Fatalf("repeated resume = %v, %v; want the same result", again, err)
		}
		_, err = resume(d, "asker", token, "a different answer")
		wantCode(t, "reusing a consumed token with another response", err, 5)
		if ins := d.callN("agent.inspect", map[string]any{"agent_id": "asker"}); ins["status"] != "idle" {
			t.Fatalf("status after resume = %v", ins["status"])
		}
		// Cancelling a wait makes the agent idle and rejects its token.
		token2, _ := suspend(t, d, "asker", "second?")
		c := d.callN("agent.cancel", map[string]any{"agent_id": "asker"})
		if c["status"] != "idle" {
			t.Fatalf("agent.cancel of a wait = %v", c)
		}
		_, err = resume(d, "asker", token2, "late")
		wantCode(t, "resume after cancel", err, 5)
	})
}

// TestSocketAwaitSurvivesKill: suspend, SIGKILL the daemon, restart: the
// wait is still there and its token resumes it; the script replays its
// history and receives the response as the result of await_input.
func TestSocketAwaitSurvivesKill(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	script := writeScripts(t, d.dir)
	d.createAgent("asker", "scripted", script, "")
	first := d.callN("agent.send", map[string]any{"agent_id": "asker", "message": "warm up"})
	if first["response"] != "turn 1: warm up" {
		t.Fatalf("first turn = %v", first)
	}
	token, runID := suspend(t, d, "asker", "after crash?")
	d.Kill()
	d.Start()
	ins := d.callN("agent.inspect", map[string]any{"agent_id": "asker"})
	if ins["status"] != "suspended" {
		t.Fatalf("status after kill -9 and restart = %v, want suspended (%v)", ins["status"], ins)
	}
	res, err := resume(d, "asker", token, "still here")
	if err != nil || res["response"] != "answer: still here" || res["run_id"] != runID {
		t.Fatalf("resume after restart = %v, %v", res, err)
	}
	// The script's state was rebuilt from the history: this is its third turn.
	next := d.callN("agent.send", map[string]any{"agent_id": "asker", "message": "count"})
	if next["response"] != "turn 3: count" {
		t.Fatalf("turn after the resumed one = %v, want turn 3", next)
	}
	// Kill again: the consumed token stays consumed.
	d.Kill()
	d.Start()
	_, err = resume(d, "asker", token, "twice")
	wantCode(t, "resume with a token consumed before a crash", err, 5)
}

// TestSocketAwaitUserMessageRevokes: a user message to a suspended agent
// revokes the token and starts a new run; the old token is then code 5.
func TestSocketAwaitUserMessageRevokes(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		script := writeScripts(t, d.dir)
		d.createAgent("asker", "scripted", script, "")
		token, runID := suspend(t, d, "asker", "approve?")
		res := d.callN("agent.send", map[string]any{"agent_id": "asker", "message": "never mind"})
		if res["status"] != "idle" || res["run_id"] == runID || !strings.Contains(fmt.Sprint(res["response"]), "never mind") {
			t.Fatalf("user message to a suspended agent = %v, want a new run's response", res)
		}
		_, err := resume(d, "asker", token, "yes")
		wantCode(t, "resume with a revoked token", err, 5)
		log := d.callN("agent.log", map[string]any{"agent_id": "asker"})
		if !strings.Contains(fmt.Sprint(log["events"]), "token.revoked") {
			t.Fatalf("no token.revoked in the log: %v", log)
		}
		if !protocol.IsCode(err, protocol.CodeTokenRejected) {
			t.Fatal(err)
		}
	})
}

// TestSocketAwaitDeadlineInterruptsTheWait: a wait whose deadline passes is
// expired by the daemon's sweep (run.interrupted wait_timeout, token.expired),
// the agent shows interrupted_waiting, and its token is refused with code 5.
func TestSocketAwaitDeadlineInterruptsTheWait(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		// Under "resume": "manual" the timed-out run stays for the
		// operator (under auto it moves on: TestTimedOutWaitMovesOn).
		d := newTestDaemon(t, mode)
		if err := os.MkdirAll(d.Home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.Home, "config.json"), []byte(`{"resume": "manual"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		d.Start()
		script := writeScripts(t, d.dir)
		d.createAgent("asker", "scripted", script, "")
		res := d.callN("agent.send", map[string]any{"agent_id": "asker", "message": "quick hurry?"})
		token, _ := res["token"].(string)
		if res["status"] != "suspended" || token == "" {
			t.Fatalf("agent.send quick = %v", res)
		}
		// The daemon's sweep fires at the deadline: wait for its events.
		cl := d.Client()
		ctx, cancel := context.WithTimeout(procCtx(t), 30*time.Second)
		defer cancel()
		seen := map[string]bool{}
		errDone := errors.New("done")
		err := cl.Stream(ctx, "events.subscribe", map[string]any{"agent_id": "asker", "since_seq": 0}, func(f protocol.Frame) error {
			if ev, _ := f.Event["event"].(string); ev != "" {
				seen[ev] = true
			}
			if seen["token.expired"] && seen["run.interrupted"] {
				return errDone
			}
			return nil
		})
		if !errors.Is(err, errDone) {
			t.Fatalf("waiting for the deadline sweep: %v (events seen: %v)", err, seen)
		}
		if ins := d.callN("agent.inspect", map[string]any{"agent_id": "asker"}); ins["status"] != "interrupted_waiting" {
			t.Fatalf("status after the deadline = %v, want interrupted_waiting", ins["status"])
		}
		_, err = resume(d, "asker", token, "too late")
		wantCode(t, "resume after the deadline", err, 5)
	})
}
