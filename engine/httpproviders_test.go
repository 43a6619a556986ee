package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider/llmfake"
	"github.com/warren-dev/warren/schema"
)

const httpTestKey = "sk-daemon-test-key-000111"

func httpConfig(t *testing.T, provs map[string]any) config.Config {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"providers": provs, "retry_base_delay_ms": 1})
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func httpHarness(t *testing.T, provs map[string]any) *harness {
	return newHarness(t, func(h *harness) {
		h.cfg = httpConfig(t, provs)
		h.getenv = func(k string) string {
			if k == "K" {
				return httpTestKey
			}
			return ""
		}
	})
}

func TestHTTPCreateWithoutAModelNamesTheEntry(t *testing.T) {
	h := httpHarness(t, map[string]any{})
	_, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "x", Provider: "openai"})
	if codeOf(err) != protocol.CodeInvalid || !strings.Contains(err.Error(), `"openai"`) || !strings.Contains(err.Error(), "--model") {
		t.Fatalf("err = %v (code %d)", err, codeOf(err))
	}
	_, err = h.c.CreateAgent(context.Background(), CreateSpec{Name: "y", Provider: "nosuch"})
	if codeOf(err) != protocol.CodeInvalid || !strings.Contains(err.Error(), "openai") {
		t.Fatalf("unknown entry: %v", err)
	}
}

func TestHTTPSettingsReloadApplyToTheNextTurn(t *testing.T) {
	f1, f2 := llmfake.New(llmfake.OpenAI), llmfake.New(llmfake.OpenAI)
	defer f1.Close()
	defer f2.Close()
	h := httpHarness(t, map[string]any{"local": map[string]any{"type": "openai", "base_url": f1.BaseURL(), "model": "m1",
		"api_key_env": "K", "headers": map[string]any{"X-Trace": "one"}}})
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "r", Provider: "local", Instructions: "Be brief."})
	if err != nil {
		t.Fatal(err)
	}
	h.send(id, "first")
	h.c.ApplyConfig(httpConfig(t, map[string]any{"local": map[string]any{"type": "openai", "base_url": f2.BaseURL(), "model": "m1",
		"api_key_env": "K", "headers": map[string]any{"X-Trace": "two"}, "max_tokens": 77}}))
	h.send(id, "second")
	if f1.Count() != 1 || f2.Count() != 1 {
		t.Fatalf("requests: %d to the old base URL, %d to the new", f1.Count(), f2.Count())
	}
	r := f2.Requests()[0]
	if r.Header.Get("X-Trace") != "two" || r.JSON()["max_tokens"] != 77.0 || r.Header.Get("Authorization") != "Bearer "+httpTestKey {
		t.Fatalf("after the reload: headers %v max_tokens %v", r.Header, r.JSON()["max_tokens"])
	}
	sys, msgs := r.Messages()
	if len(msgs) != 3 || msgs[0].Text != "first" {
		t.Fatalf("the history did not follow the reload: %+v", msgs)
	}
	if !strings.HasPrefix(sys, "Be brief.\n\n# Who you are") || !strings.Contains(sys, `You are the agent "r"`) ||
		!strings.Contains(sys, "You are a root agent") {
		t.Fatalf("system prompt:\n%s", sys)
	}
}

func TestHTTPRetriesAreTheDaemonsOneAttemptOneRequest(t *testing.T) {
	f := llmfake.New(llmfake.OpenAI)
	defer f.Close()
	h := httpHarness(t, map[string]any{"openai": map[string]any{"base_url": f.BaseURL(), "model": "m", "api_key_env": "K"}})
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "r", Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	f.Push(f.RateLimited("2"), f.Status(503, "server_error", "busy"), llmfake.Reply{Text: "finally"})
	res := h.send(id, "go")
	if res.Err != nil || res.Response != "finally" {
		t.Fatalf("turn: %+v", res)
	}
	if f.Count() != 3 {
		t.Fatalf("%d requests for 3 attempts", f.Count())
	}
	if len(h.delays) != 2 || h.delays[0] != 2*time.Second {
		t.Fatalf("retry delays %v; the first must honour Retry-After: 2", h.delays)
	}

	f.Push(f.Status(401, "invalid_request_error", "Incorrect API key provided: sk-d***111"))
	res, err = h.c.Send(context.Background(), id, "again", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "HTTP 401") || !strings.Contains(res.Err.Error(), "Incorrect API key provided") {
		t.Fatalf("401 turn: %+v", res)
	}
	if f.Count() != 4 {
		t.Fatalf("a permanent error was retried: %d requests", f.Count())
	}
	ins, _ := h.c.Inspect(context.Background(), id)
	if le := ins.LastError; !strings.Contains(le, "HTTP 401") || strings.Contains(le, httpTestKey) {
		t.Fatalf("last_error = %q", le)
	}
}

func TestHTTPTextDeltasReachEventSubscribers(t *testing.T) {
	f := llmfake.New(llmfake.OpenAI)
	defer f.Close()
	h := httpHarness(t, map[string]any{"openai": map[string]any{"base_url": f.BaseURL(), "model": "m", "api_key_env": "K"}})
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "r", Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	deltas, cancel := h.c.bus.SubscribeWith(id, true)
	defer cancel()
	plain, cancel2 := h.c.bus.Subscribe(id)
	defer cancel2()
	f.Push(llmfake.Reply{Text: "streamed in pieces", Chunk: 4})
	if res := h.send(id, "go"); res.Response != "streamed in pieces" {
		t.Fatalf("turn %+v", res)
	}
	var text strings.Builder
	for len(deltas) > 0 {
		if ev := <-deltas; ev.Delta != "" {
			text.WriteString(ev.Delta)
		}
	}
	if text.String() != "streamed in pieces" {
		t.Fatalf("deltas %q", text.String())
	}
	for len(plain) > 0 {
		if ev := <-plain; ev.Delta != "" {
			t.Fatalf("a subscriber without deltas got one: %+v", ev)
		}
	}
}

func TestResetStartsAFreshContextAndSurvivesARestart(t *testing.T) {
	f := llmfake.New(llmfake.OpenAI)
	defer f.Close()
	h := httpHarness(t, map[string]any{"openai": map[string]any{"base_url": f.BaseURL(), "model": "m", "api_key_env": "K"}})
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "r", Provider: "openai", Instructions: "Keep going."})
	if err != nil {
		t.Fatal(err)
	}
	h.send(id, "one")
	h.send(id, "two")
	if err := h.c.Reset(id); err != nil {
		t.Fatal(err)
	}
	h.send(id, "three")
	users := func() []string {
		reqs := f.Requests()
		_, msgs := reqs[len(reqs)-1].Messages()
		var out []string
		for _, m := range msgs {
			out = append(out, m.Role+":"+m.Text)
		}
		return out
	}
	if got := users(); len(got) != 1 || got[0] != "user:three" {
		t.Fatalf("after the reset the request carries %q", got)
	}
	sys, _ := f.Requests()[2].Messages()
	if !strings.HasPrefix(sys, "Keep going.") {
		t.Fatalf("system prompt after the reset: %q", sys)
	}
	h.restart()
	h.send(id, "four")
	if got := users(); len(got) != 3 || got[0] != "user:three" || got[2] != "user:four" {
		t.Fatalf("after a restart the request carries %q", got)
	}
	// The log keeps every turn.
	es, _ := h.c.Log(context.Background(), id, 0)
	n := 0
	for _, e := range es {
		if e.Event == schema.TurnComplete {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d turn.complete entries in the log, want 4", n)
	}
}

func TestSpawnOnAnEntryWithoutAModelIsAToolError(t *testing.T) {
	f := llmfake.New(llmfake.OpenAI)
	defer f.Close()
	h := httpHarness(t, map[string]any{"openai": map[string]any{"base_url": f.BaseURL(), "model": "m", "api_key_env": "K"}})
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "lead", Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	f.Push(llmfake.Reply{Calls: []llmfake.Call{{ID: "c1", Name: "spawn_agent", Args: `{"name":"w","instructions":"x","provider":"ollama"}`}}},
		llmfake.Reply{Text: "ok"})
	h.send(id, "spawn")
	_, msgs := f.Requests()[1].Messages()
	res := msgs[len(msgs)-1]
	if res.CallID != "c1" || !strings.Contains(res.Text, `\"ollama\" has no default model`) {
		t.Fatalf("spawn result %+v", res)
	}
	if kids := h.c.tree.Children(id); len(kids) != 0 {
		t.Fatalf("a child was spawned: %v", kids)
	}
}

func TestCancelClosesTheHTTPStreamAndFreesTheSlot(t *testing.T) {
	f := llmfake.New(llmfake.OpenAI)
	defer f.Close()
	h := httpHarness(t, map[string]any{"openai": map[string]any{"base_url": f.BaseURL(), "model": "m", "api_key_env": "K"}})
	h.cfg.Pools["default"] = 1
	h.c.ApplyConfig(h.cfg)
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "r", Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	f.Push(llmfake.Reply{Text: "never ending", Chunk: 2, Stall: true, StallAfter: 2}, llmfake.Reply{Text: "fine again"})
	chunk := make(chan struct{}, 64)
	done := make(chan TurnResult, 1)
	go func() {
		res, _ := h.c.Send(context.Background(), id, "go", "", "", func(string) { chunk <- struct{}{} })
		done <- res
	}()
	<-chunk // the stream is open
	if err := h.c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	<-f.Released() // the server saw the connection close
	if res := <-done; res.Err == nil || !strings.Contains(res.Err.Error(), "cancel") {
		t.Fatalf("cancelled turn: %+v", res)
	}
	if res := h.send(id, "again"); res.Response != "fine again" {
		t.Fatalf("the next turn: %+v", res)
	}
}
