package tests

import (
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider/llmfake"
)

// TestBudgetsDownTheTree is SPEC 13 with a real daemon and the fake
// OpenAI server (each request reports 500 tokens): a root with a token
// budget grants two children envelopes (spawn_agent's budget), a grant
// larger than what remains is refused as a tool error; the child that
// runs out suspends on a wait of kind budget while the other goes on; the
// root's remaining is right at each step; the wait survives a kill -9; and
// `warren agent budget --add` resumes the run.
func TestBudgetsDownTheTree(t *testing.T) {
	oa := llmfake.New(llmfake.OpenAI)
	defer oa.Close()
	oa.Respond(func(llmfake.Request) llmfake.Reply {
		return llmfake.Reply{Text: "worked", InputTokens: 400, OutputTokens: 100}
	})
	d := newTestDaemon(t, modeBinary)
	llmHome(t, d, oa, nil, nil)
	d.Start()
	lead := d.callN("agent.create", map[string]any{"name": "lead", "provider": "openai", "budget": map[string]any{"tokens": 3000}})["agent_id"].(string)
	remaining := func() float64 {
		t.Helper()
		r := d.callN("agent.inspect", map[string]any{"agent_id": lead})["remaining"].(map[string]any)
		return num(r["tokens"])
	}
	spawn := func(name string, tokens int) map[string]any {
		t.Helper()
		return d.callN("tool.call", map[string]any{"agent_id": lead, "tool": "spawn_agent", "arguments": map[string]any{
			"name": name, "instructions": "work", "budget": map[string]any{"tokens": tokens}}})
	}
	for _, w := range []string{"w1", "w2"} {
		if res := spawn(w, 1000); res["error"] != nil {
			t.Fatalf("granting %s: %v", w, res)
		}
	}
	if got := remaining(); got != 1000 {
		t.Fatalf("the lead's remaining after two grants of 1000: %v, want 1000", got)
	}
	if res := spawn("w3", 2000); !strings.Contains(mustJSON(t, res), "more than the 1000 left") {
		t.Fatalf("a grant larger than the remaining: %v", res)
	}
	// Each child's bootstrap turn made one request (500 tokens).
	for _, w := range []string{"lead/w1", "lead/w2"} {
		waitEvent(t, d, w, "the bootstrap turn.complete", func(ev string, _ map[string]any) bool { return ev == "turn.complete" })
	}
	if res := d.callN("agent.send", map[string]any{"agent_id": "lead/w1", "message": "more"}); res["response"] != "worked" {
		t.Fatalf("w1's second turn: %v", res)
	}
	// w1 has spent its 1000: its next turn suspends on its budget.
	res := d.callN("agent.send", map[string]any{"agent_id": "lead/w1", "message": "even more"})
	if res["status"] != "suspended" {
		t.Fatalf("w1 past its budget: %v, want suspended", res)
	}
	waits := d.callN("waits.list", nil)["waits"].([]any)
	if len(waits) != 1 || waits[0].(map[string]any)["kind"] != "budget" || !strings.Contains(waits[0].(map[string]any)["prompt"].(string), "token budget of lead/w1 is spent") {
		t.Fatalf("the waits: %v", waits)
	}
	// w2 goes on within its own envelope.
	if res := d.callN("agent.send", map[string]any{"agent_id": "lead/w2", "message": "more"}); res["response"] != "worked" {
		t.Fatalf("w2: %v", res)
	}
	// The lead: 3000 - w1's 1000 - w2's 1000 spent = 1000 (their envelopes are spent).
	if got := remaining(); got != 1000 {
		t.Fatalf("the lead's remaining: %v, want 1000", got)
	}

	out := runCLI(t, d.Home, "agent", "list", "--wide").want(t, 0, "agent list --wide").stdout
	if !strings.Contains(out, "BUDGET LEFT") || !strings.Contains(out, "1000 tokens") || !strings.Contains(out, "(2000 tokens, 4 turns)") {
		t.Fatalf("agent list --wide:\n%s", out)
	}

	d.Kill()
	d.Start()
	waits = d.callN("waits.list", nil)["waits"].([]any)
	if len(waits) != 1 || waits[0].(map[string]any)["kind"] != "budget" {
		t.Fatalf("the budget wait after a kill -9: %v", waits)
	}
	runCLI(t, d.Home, "agent", "budget", "lead/w1", "--add", "--tokens", "1000").want(t, 0, "agent budget --add")
	waitEvent(t, d, "lead/w1", "the resumed run's turn.complete", func(ev string, _ map[string]any) bool {
		return ev == "turn.complete" && strings.Count(readLog(t, d, d.callN("agent.inspect", map[string]any{"agent_id": "lead/w1"})["agent_id"].(string)), `"event":"turn.complete"`) == 3
	})
	if n := len(d.callN("waits.list", nil)["waits"].([]any)); n != 0 {
		t.Fatalf("%d waits after the raise", n)
	}
}
