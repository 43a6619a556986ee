package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider/llmfake"
)

// TestLLMHistorySurvivesEvictionRestartAndSwitch: with one slot, two
// agents evict each other every turn; a restart drops every live session;
// a send switches one agent to the anthropic entry and back. Every request
// carries the agent's whole history as native messages.
func TestLLMHistorySurvivesEvictionRestartAndSwitch(t *testing.T) {
	echo := func(r llmfake.Request) llmfake.Reply {
		u := userTexts(r)
		return llmfake.Reply{Text: fmt.Sprintf("reply to %s", u[len(u)-1])}
	}
	oa := llmfake.New(llmfake.OpenAI)
	defer oa.Close()
	oa.Respond(echo)
	an := llmfake.New(llmfake.Anthropic)
	defer an.Close()
	an.Respond(echo)
	d := newTestDaemon(t, modeBinary)
	llmHome(t, d, oa, an, map[string]any{"pools": map[string]any{"default": 1}})
	d.Start()
	d.createAgent("a", "openai", "", "")
	d.createAgent("b", "openai", "", "")
	send := func(agent, msg string, extra map[string]any) {
		t.Helper()
		p := map[string]any{"agent_id": agent, "message": msg}
		for k, v := range extra {
			p[k] = v
		}
		if res := d.callN("agent.send", p); res["response"] != "reply to "+msg {
			t.Fatalf("send %s %q: %v", agent, msg, res)
		}
	}
	last := func(f *llmfake.Server, agent string) llmfake.Request {
		rs := requestsOf(f, agent)
		if len(rs) == 0 {
			t.Fatalf("no request for %s", agent)
		}
		return rs[len(rs)-1]
	}
	wantHistory := func(r llmfake.Request, users ...string) {
		t.Helper()
		_, msgs := r.Messages()
		var got []string
		for _, m := range msgs {
			got = append(got, m.Role+":"+m.Text)
		}
		var want []string
		for i, u := range users {
			want = append(want, "user:"+u)
			if i < len(users)-1 {
				want = append(want, "assistant:reply to "+u)
			}
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("messages\n got %q\nwant %q", got, want)
		}
	}
	send("a", "one", nil)
	send("b", "uno", nil)
	send("a", "two", nil) // a was evicted by b
	wantHistory(last(oa, "a"), "one", "two")
	send("b", "dos", nil)
	wantHistory(last(oa, "b"), "uno", "dos")
	waitEvent(t, d, "a", "its eviction", func(ev string, _ map[string]any) bool { return ev == "suspend.result" })

	d.Kill()
	d.Start()
	send("a", "three", nil)
	wantHistory(last(oa, "a"), "one", "two", "three")

	send("a", "four", map[string]any{"provider": "anthropic"})
	wantHistory(last(an, "a"), "one", "two", "three", "four")
	if m := last(an, "a").JSON()["model"]; m != "fake-claude" {
		t.Fatalf("anthropic request model %v, want the entry's default", m)
	}
	send("a", "five", map[string]any{"provider": "openai"})
	wantHistory(last(oa, "a"), "one", "two", "three", "four", "five")
	checkKeyNowhere(t, d)
}
