package tests

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/provider/llmfake"
)

// TestLLMTeamOnFakeOpenAI runs a team on the fake OpenAI server through
// the built daemon: the root spawns a child through a tool call, the child
// boots and messages back, the root is woken by the message. The requests
// carry the catalog's tools and the identity block, the key goes in the
// Authorization header and nowhere on disk, consecutive requests of a live
// session share their prefix, and turn.complete carries usage.
func TestLLMTeamOnFakeOpenAI(t *testing.T) {
	oa := llmfake.New(llmfake.OpenAI)
	defer oa.Close()
	oa.Respond(func(r llmfake.Request) llmfake.Reply {
		last := r.Last()
		switch agentOf(r) {
		case "lead":
			switch {
			case last.Role == "tool":
				return llmfake.Reply{Text: "spawned the worker"}
			case strings.Contains(last.Text, "Message from worker"):
				return llmfake.Reply{Text: "thanks, worker"}
			case strings.Contains(last.Text, "start"):
				return llmfake.Reply{Text: "Spawning.", Calls: []llmfake.Call{{ID: "call_sp", Name: "spawn_agent",
					Args: `{"name":"worker","instructions":"Report to your parent."}`}}}
			}
		case "worker":
			if last.Role == "tool" {
				return llmfake.Reply{Text: "reported"}
			}
			return llmfake.Reply{Calls: []llmfake.Call{{ID: "call_msg", Name: "send_message",
				Args: `{"recipient":"lead","text":"hello from worker"}`}}}
		}
		return llmfake.Reply{Status: 400, Body: `{"error":{"message":"unexpected request"}}`}
	})
	d := newTestDaemon(t, modeBinary)
	llmHome(t, d, oa, nil, nil)
	d.Start()

	provs := d.callN("daemon.providers", nil)
	var sawOpenAI bool
	for _, p := range provs["providers"].([]any) {
		pm := p.(map[string]any)
		if pm["name"] == "openai" {
			sawOpenAI = pm["key_set"] == true && pm["model"] == "fake-gpt" && pm["base_url"] == oa.BaseURL()
		}
	}
	if !sawOpenAI || strings.Contains(fmt.Sprint(provs), llmKey) {
		t.Fatalf("daemon.providers = %v", provs)
	}

	// No model given: the entry's default.
	res := d.callN("agent.create", map[string]any{"name": "lead", "instructions": "You lead.", "provider": "openai"})
	if res["agent_id"] == nil {
		t.Fatalf("create: %v", res)
	}
	out := d.callN("agent.send", map[string]any{"agent_id": "lead", "message": "start"})
	if out["response"] != "spawned the worker" {
		t.Fatalf("send: %v", out)
	}
	waitEvent(t, d, "lead", "the wake turn", func(ev string, data map[string]any) bool {
		return ev == "turn.complete" && data["response"] == "thanks, worker"
	})

	lead := requestsOf(oa, "lead")
	worker := requestsOf(oa, "worker")
	if len(lead) != 3 || len(worker) != 2 {
		t.Fatalf("%d lead and %d worker requests, want 3 and 2", len(lead), len(worker))
	}
	sys, _ := worker[0].Messages()
	if !strings.HasPrefix(sys, "Report to your parent.") || !strings.Contains(sys, `Your parent is "lead"`) {
		t.Fatalf("worker system prompt:\n%s", sys)
	}
	if h := lead[0].Header.Get("Authorization"); h != "Bearer "+llmKey {
		t.Fatalf("Authorization %q", h)
	}
	if b := lead[0].JSON(); b["model"] != "fake-gpt" || len(b["tools"].([]any)) < 17 {
		t.Fatalf("lead request: model %v, %d tools", b["model"], len(b["tools"].([]any)))
	}
	// The wake prompt is the user message of the third request, after the
	// whole first turn.
	if u := userTexts(lead[2]); len(u) != 2 || u[0] != "start" || !strings.Contains(u[1], "hello from worker") {
		t.Fatalf("lead's wake request user messages %q", u)
	}
	for i := 1; i < len(lead); i++ {
		prev := bytes.TrimSuffix(lead[i-1].Body, []byte("]}"))
		if !bytes.HasPrefix(lead[i].Body, prev) {
			t.Fatalf("lead request %d does not begin with request %d's bytes", i+1, i)
		}
	}
	// turn.complete carries the usage; inspect shows the totals.
	var usage map[string]any
	waitEvent(t, d, "lead", "turn.complete with usage", func(ev string, data map[string]any) bool {
		if ev == "turn.complete" {
			usage, _ = data["usage"].(map[string]any)
			return true
		}
		return false
	})
	if usage == nil || toF(usage["input_tokens"]) <= 0 || toF(usage["output_tokens"]) <= 0 {
		t.Fatalf("turn.complete usage = %v", usage)
	}
	ins := d.callN("agent.inspect", map[string]any{"agent_id": "lead"})
	if u, _ := ins["usage"].(map[string]any); u == nil || toF(u["input_tokens"]) <= toF(usage["input_tokens"]) {
		t.Fatalf("inspect usage = %v (first turn alone: %v)", ins["usage"], usage)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	checkKeyNowhere(t, d)
}

// TestLLMKillMidToolLoopThenResume: kill -9 of the daemon while the model
// is answering the result of a send_message call; after the restart the
// interrupted run is resumed: the model asks for the same call, the daemon
// answers it from the log, and the message went out once.
func TestLLMKillMidToolLoopThenResume(t *testing.T) {
	oa := llmfake.New(llmfake.OpenAI)
	defer oa.Close()
	var mu sync.Mutex
	stalled := make(chan struct{}, 1)
	stall := true
	oa.Respond(func(r llmfake.Request) llmfake.Reply {
		last := r.Last()
		if last.Role == "tool" {
			mu.Lock()
			s := stall
			stall = false
			mu.Unlock()
			if s {
				stalled <- struct{}{}
				return llmfake.Reply{Text: "never finished", Stall: true, StallAfter: 1}
			}
			return llmfake.Reply{Text: "finished after " + last.Text}
		}
		return llmfake.Reply{Calls: []llmfake.Call{{ID: "call_once", Name: "send_message", Args: `{"recipient":"USER","text":"exactly once"}`}}}
	})
	d := newTestDaemon(t, modeBinary)
	llmHome(t, d, oa, nil, map[string]any{"resume": "manual"}) // the operator re-runs it
	d.Start()
	d.createAgent("k", "openai", "", "")
	sendErr := make(chan error, 1)
	go func() {
		_, err := d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": "k", "message": "go"})
		sendErr <- err
	}()
	<-stalled
	d.Kill()
	<-sendErr
	d.Start()
	if st := d.callN("agent.inspect", map[string]any{"agent_id": "k"}); st["status"] != "interrupted_startup" {
		t.Fatalf("status after the kill = %v", st["status"])
	}
	res := d.callN("agent.resume", map[string]any{"agent_id": "k"})
	if r, _ := res["response"].(string); !strings.HasPrefix(r, "finished after") || !strings.Contains(r, `"status"`) && !strings.Contains(r, "message_id") {
		t.Fatalf("resume = %v", res)
	}
	var fromK []any // the SYSTEM notice of the interrupted run aside
	for _, m := range d.callN("inbox.list", nil)["messages"].([]any) {
		if m.(map[string]any)["from"] == "k" {
			fromK = append(fromK, m)
		}
	}
	if len(fromK) != 1 || !strings.Contains(fmt.Sprint(fromK[0]), "exactly once") {
		t.Fatalf("USER received %d messages from k: %v", len(fromK), fromK)
	}
	reqs := oa.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4 (two per attempt)", len(reqs))
	}
	// The replayed result is the recorded one.
	_, before := reqs[1].Messages()
	_, after := reqs[3].Messages()
	if before[len(before)-1].Text != after[len(after)-1].Text {
		t.Fatalf("replayed result %q differs from the recorded %q", after[len(after)-1].Text, before[len(before)-1].Text)
	}
	checkKeyNowhere(t, d)
}

// toF reads a JSON or msgpack number.
func toF(v any) float64 {
	var f float64
	_, _ = fmt.Sscan(fmt.Sprint(v), &f)
	return f
}
