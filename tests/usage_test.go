package tests

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider/llmfake"
)

// usageSteps reads an agent's usage.step entries.
func usageSteps(t *testing.T, d *testDaemon, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(readLog(t, d, id)), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(l), &e) == nil && e["event"] == "usage.step" {
			out = append(out, e["data"].(map[string]any))
		}
	}
	return out
}

// TestUsageStepsAndSpend (SPEC 13, accounting): every model request is
// logged as usage.step with its cache tokens apart and priced from
// config.json's prices, the dollars computed by hand here; agent.inspect
// shows the agent's spend and its subtree's (a child on a model without a
// price counts its tokens, its requests as unpriced); after a kill -9
// between a turn's two requests, the spend is the sum of the logged
// steps, and the re-run's requests are charged again because they were
// made.
func TestUsageStepsAndSpend(t *testing.T) {
	an := llmfake.New(llmfake.Anthropic)
	defer an.Close()
	stall := make(chan struct{}, 1)
	stalls := 0
	an.Respond(func(r llmfake.Request) llmfake.Reply {
		_, msgs := r.Messages()
		pi, tools := promptIndex(msgs, "work")
		switch {
		case pi < 0:
			return llmfake.Reply{Text: "?"}
		case tools == 0:
			lc, _ := r.Tool("list_children")
			return llmfake.Reply{Calls: []llmfake.Call{lc.Call("c1", `{}`)}, InputTokens: 1000, CachedTokens: 600, CacheWriteTokens: 100, OutputTokens: 50}
		case strings.Contains(msgs[pi].Text, "crash") && stalls == 0:
			stalls++
			stall <- struct{}{}
			return llmfake.Reply{Text: "never", Stall: true, StallAfter: 1}
		}
		return llmfake.Reply{Text: "done", InputTokens: 1200, CachedTokens: 900, OutputTokens: 30}
	})
	oa := llmfake.New(llmfake.OpenAI)
	defer oa.Close()
	oa.Respond(func(llmfake.Request) llmfake.Reply {
		return llmfake.Reply{Text: "ok", InputTokens: 500, OutputTokens: 20}
	})
	d := newTestDaemon(t, modeBinary)
	llmHome(t, d, oa, an, map[string]any{"prices": map[string]any{
		"anthropic/fake-claude": map[string]any{"input_per_mtok": 3, "output_per_mtok": 15, "cache_read_per_mtok": 0.3, "cache_write_per_mtok": 3.75}}})
	d.Start()
	lead := d.createAgent("lead", "anthropic", "", "")
	w1 := d.createAgent("w1", "openai", "", lead)

	if res := d.callN("agent.send", map[string]any{"agent_id": lead, "message": "work"}); res["response"] != "done" {
		t.Fatalf("the turn: %v", res)
	}
	steps := usageSteps(t, d, lead)
	if len(steps) != 2 {
		t.Fatalf("usage.step x%d, want one per request (2)", len(steps))
	}
	// By hand: request 1 = 300 plain input x $3 + 600 cache reads x $0.30
	// + 100 cache writes x $3.75 + 50 output x $15 = $0.002205; request 2
	// = 300 x 3 + 900 x 0.3 + 30 x 15 = $0.00162 (per million tokens).
	want := []struct {
		in, out, cr, cw float64
		usd             float64
	}{{1000, 50, 600, 100, 0.002205}, {1200, 30, 900, 0, 0.00162}}
	for i, s := range steps {
		w := want[i]
		if s["input_tokens"] != w.in || s["output_tokens"] != w.out || s["cache_read_tokens"] != w.cr || s["cache_write_tokens"] != w.cw ||
			s["step"] != float64(i+1) || math.Abs(s["usd"].(float64)-w.usd) > 1e-12 {
			t.Errorf("usage.step %d: %v, want %+v", i+1, s, w)
		}
	}
	d.callN("agent.send", map[string]any{"agent_id": w1, "message": "hello"})
	if s := usageSteps(t, d, w1); len(s) != 1 || s[0]["usd"] != nil {
		t.Fatalf("the unpriced child's steps: %v", s)
	}
	in := d.callN("agent.inspect", map[string]any{"agent_id": lead})
	spent, sub := in["spent"].(map[string]any), in["subtree_spent"].(map[string]any)
	if num(spent["tokens"]) != 2280 || math.Abs(num(spent["usd"])-0.003825) > 1e-12 || num(spent["turns"]) != 1 || num(spent["requests"]) != 2 {
		t.Errorf("the lead's spend: %v", spent)
	}
	if num(sub["tokens"]) != 2800 || num(sub["turns"]) != 2 || num(sub["unpriced_requests"]) != 1 || num(sub["requests"]) != 3 {
		t.Errorf("the subtree's spend: %v", sub)
	}

	// A kill -9 between the two requests of a turn.
	go func() {
		_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": lead, "message": "work, then crash"})
	}()
	<-stall
	waitUntil(t, "the first request's usage.step", func() bool { return len(usageSteps(t, d, lead)) == 3 })
	d.Kill()
	d.Start()
	waitEvent(t, d, lead, "the re-run's turn.complete", func(ev string, data map[string]any) bool {
		return ev == "turn.complete" && strings.Contains(mustJSON(t, data), "done") && strings.Count(readLog(t, d, lead), `"event":"turn.complete"`) == 2
	})
	steps = usageSteps(t, d, lead)
	if len(steps) != 5 {
		t.Fatalf("usage.step x%d after the re-run, want 5: 2, the interrupted attempt's 1, and the re-run's 2 (made again, charged again)", len(steps))
	}
	var tokens float64
	for _, s := range steps {
		tokens += s["input_tokens"].(float64) + s["output_tokens"].(float64)
	}
	spent = d.callN("agent.inspect", map[string]any{"agent_id": lead})["spent"].(map[string]any)
	if num(spent["tokens"]) != tokens || num(spent["requests"]) != 5 || num(spent["turns"]) != 2 {
		t.Fatalf("after the crash the spend is %v, want the sum of the logged steps (%v tokens, 5 requests, 2 turns)", spent, tokens)
	}
}

// num reads a number of a reply (msgpack decodes whole numbers as int64 or
// uint64).
func num(v any) float64 {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case uint64:
		return float64(n)
	case float64:
		return n
	}
	return math.NaN()
}
