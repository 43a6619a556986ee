package openai_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/llm"
	"github.com/warren-dev/warren/provider/llmfake"
	catalog "github.com/warren-dev/warren/tools"
)

func TestRequestShapeAndStreaming(t *testing.T) {
	e := newEnv(t)
	e.set(func(st *llm.Settings) { st.Headers = map[string]string{"X-Title": "warren"} })
	e.fake.Push(llmfake.Reply{Text: "Hello there, operator.", Chunk: 5, InputTokens: 120, OutputTokens: 7, CachedTokens: 100})
	s := e.session()
	o := send(s, "hi", &tools{})
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.resp != "Hello there, operator." || strings.Join(o.chunks, "") != o.resp || len(o.chunks) < 4 {
		t.Fatalf("response %q chunks %q", o.resp, o.chunks)
	}
	if len(o.usage) != 1 || o.usage[0] != (provider.Usage{InputTokens: 120, OutputTokens: 7, CachedInputTokens: 100}) {
		t.Fatalf("usage %+v", o.usage)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.Method != "POST" {
		t.Fatalf("request %s %s", r.Method, r.Path)
	}
	for k, want := range map[string]string{"Authorization": "Bearer " + testKey, "Content-Type": "application/json",
		"Accept": "text/event-stream", "X-Title": "warren"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	b := body(t, r)
	if b["model"] != "gpt-test" || b["stream"] != true {
		t.Errorf("model/stream: %v %v", b["model"], b["stream"])
	}
	if so, _ := b["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options = %v", b["stream_options"])
	}
	if _, ok := b["max_tokens"]; ok {
		t.Errorf("max_tokens sent without a setting")
	}
	tl, _ := b["tools"].([]any)
	if len(tl) != len(catalog.Names()) {
		t.Fatalf("%d tools, want %d", len(tl), len(catalog.Names()))
	}
	for i, name := range catalog.Names() {
		td := tl[i].(map[string]any)
		fn := td["function"].(map[string]any)
		if td["type"] != "function" || fn["name"] != name || fn["description"] == "" {
			t.Errorf("tool %d = %v", i, td)
		}
		if params, _ := fn["parameters"].(map[string]any); params["type"] != "object" {
			t.Errorf("tool %s parameters = %v", name, fn["parameters"])
		}
	}
	msgs := b["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("messages = %v", msgs)
	}
	if m := msgs[0].(map[string]any); m["role"] != "system" || m["content"] != "You are a test agent." {
		t.Errorf("system message = %v", m)
	}
	if m := msgs[1].(map[string]any); m["role"] != "user" || m["content"] != "hi" {
		t.Errorf("user message = %v", m)
	}
	// The body's keys come in a fixed order, messages last.
	if !bytes.HasPrefix(r.Body, []byte(`{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"tools":[`)) ||
		!bytes.HasSuffix(r.Body, []byte(`]}`)) {
		t.Errorf("body layout: %.120s ... %s", r.Body, r.Body[len(r.Body)-20:])
	}
}

func TestToolLoopBatchesAStepAndAnswersByID(t *testing.T) {
	e := newEnv(t)
	e.fake.Push(
		llmfake.Reply{Text: "Let me ask.", Calls: []llmfake.Call{
			{ID: "call_a", Name: "send_message", Args: `{"recipient":"bob","text":"hello"}`},
			{ID: "call_b", Name: "list_children", Args: `{}`}}},
		llmfake.Reply{Calls: []llmfake.Call{{ID: "call_c", Name: "check_inbox", Args: ``}}},
		llmfake.Reply{Text: "All done."},
	)
	tc := &tools{answer: func(r provider.ToolRequest) (map[string]any, error) {
		if r.Tool == "list_children" {
			return map[string]any{"error": "no children"}, nil
		}
		return map[string]any{"ok": r.Tool}, nil
	}}
	o := send(e.session(), "go", tc)
	if o.err != nil || o.resp != "All done." {
		t.Fatalf("resp %q err %v", o.resp, o.err)
	}
	if len(tc.batches) != 2 || len(tc.batches[0]) != 2 || len(tc.batches[1]) != 1 {
		t.Fatalf("batches %+v", tc.batches)
	}
	if c := tc.batches[0][0]; c.Tool != "send_message" || c.Args["recipient"] != "bob" || c.Args["text"] != "hello" {
		t.Fatalf("first call %+v", c)
	}
	if len(o.usage) != 3 {
		t.Fatalf("%d usage reports, want one per request", len(o.usage))
	}
	reqs := e.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	_, msgs := reqs[1].Messages()
	// user, assistant (text + 2 calls), tool a, tool b
	if len(msgs) != 4 || msgs[1].Role != "assistant" || msgs[1].Text != "Let me ask." || len(msgs[1].Calls) != 2 {
		t.Fatalf("second request messages %+v", msgs)
	}
	if msgs[2].CallID != "call_a" || msgs[2].Text != `{"ok":"send_message"}` {
		t.Errorf("result a %+v", msgs[2])
	}
	if msgs[3].CallID != "call_b" || msgs[3].Text != `{"error":"no children"}` {
		t.Errorf("result b %+v", msgs[3])
	}
	if msgs[1].Calls[0].Args != `{"recipient":"bob","text":"hello"}` {
		t.Errorf("arguments sent back as %q", msgs[1].Calls[0].Args)
	}
	_, msgs = reqs[2].Messages()
	if len(msgs) != 6 || msgs[5].CallID != "call_c" {
		t.Fatalf("third request messages %+v", msgs)
	}
}

func TestServerQuirks(t *testing.T) {
	calls := []llmfake.Call{
		{ID: "call_1", Name: "send_message", Args: `{"recipient":"a","text":"x"}`},
		{ID: "call_2", Name: "send_message", Args: `{"recipient":"b","text":"y"}`},
	}
	cases := map[string]llmfake.Reply{
		"fragmented":            {Calls: calls},
		"whole args (ollama)":   {Calls: calls, WholeArgs: true},
		"parallel at index 0":   {Calls: calls, SameIndex: true},
		"comment lines":         {Calls: calls, Comments: true},
		"no [DONE]":             {Calls: calls, NoDone: true},
		"finish_reason stop":    {Calls: calls, StopAsFinish: true},
		"no usage chunk":        {Calls: calls, NoUsage: true},
		"whole args same index": {Calls: calls, WholeArgs: true, SameIndex: true},
	}
	for name, rep := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.fake.Push(rep, llmfake.Reply{Text: "fin"})
			tc := &tools{}
			o := send(e.session(), "go", tc)
			if o.err != nil || o.resp != "fin" {
				t.Fatalf("resp %q err %v", o.resp, o.err)
			}
			if len(tc.batches) != 1 || len(tc.batches[0]) != 2 ||
				tc.batches[0][0].Args["recipient"] != "a" || tc.batches[0][1].Args["recipient"] != "b" {
				t.Fatalf("batches %+v", tc.batches)
			}
			_, msgs := e.fake.Requests()[1].Messages()
			if msgs[2].CallID != "call_1" || msgs[3].CallID != "call_2" {
				t.Fatalf("results %+v", msgs)
			}
		})
	}
}

func TestInvalidArgumentsAndUnknownToolAreNeverRun(t *testing.T) {
	e := newEnv(t)
	e.fake.Push(llmfake.Reply{Calls: []llmfake.Call{
		{ID: "c1", Name: "send_message", Args: `{"recipient":"a",`},
		{ID: "c2", Name: "rm_rf", Args: `{}`},
		{ID: "c3", Name: "send_message", Args: `[1,2]`},
		{ID: "c4", Name: "list_children", Args: `{}`},
	}}, llmfake.Reply{Text: "ok"})
	tc := &tools{}
	o := send(e.session(), "go", tc)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if len(tc.batches) != 1 || len(tc.batches[0]) != 1 || tc.batches[0][0].Tool != "list_children" {
		t.Fatalf("ran %+v; only list_children is valid", tc.batches)
	}
	_, msgs := e.fake.Requests()[1].Messages()
	res := msgs[2:]
	if len(res) != 4 {
		t.Fatalf("results %+v", msgs)
	}
	for i, want := range []string{"not a JSON object", `unknown tool \"rm_rf\"`, "not a JSON object", `"ok":true`} {
		if res[i].CallID != []string{"c1", "c2", "c3", "c4"}[i] || !strings.Contains(res[i].Text, want) {
			t.Errorf("result %d = %+v, want it to contain %q", i, res[i], want)
		}
	}
}

func TestSuspendedRunEndsTheTurnAtOnce(t *testing.T) {
	e := newEnv(t)
	e.fake.Push(llmfake.Reply{Calls: []llmfake.Call{{ID: "c1", Name: "await_input", Args: `{"kind":"q","prompt":"?"}`}}},
		llmfake.Reply{Text: "must not be requested"})
	tc := &tools{answer: func(provider.ToolRequest) (map[string]any, error) {
		return nil, provider.ErrRunSuspended
	}}
	s := e.session()
	o := send(s, "go", tc)
	if !errors.Is(o.err, provider.ErrRunSuspended) {
		t.Fatalf("err = %v", o.err)
	}
	if n := e.fake.Count(); n != 1 {
		t.Fatalf("%d requests after the suspension", n)
	}
	// The turn did not join the history.
	o = send(s, "next", tc)
	_, msgs := e.fake.Requests()[1].Messages()
	if len(msgs) != 1 || msgs[0].Text != "next" {
		t.Fatalf("messages after a suspended turn %+v", msgs)
	}
}

func TestHistoryAsNativeMessages(t *testing.T) {
	e := newEnv(t)
	hist := []provider.Turn{
		{Message: "spawn a worker", Calls: []provider.ToolCall{
			{ID: "9f2c", Tool: "spawn_agent", Args: map[string]any{"name": "w", "instructions": "work"}, Result: map[string]any{"agent_id": "x1"}},
			{ID: "9f2d", Tool: "send_message", Args: map[string]any{"recipient": "zz", "text": "t"}, Error: "no such agent"},
		}, Response: "spawned"},
		{Message: "thanks", Calls: []provider.ToolCall{}, Response: "you're welcome"},
	}
	o := send(e.session(hist...), "next", &tools{})
	if o.err != nil {
		t.Fatal(o.err)
	}
	sys, msgs := e.fake.Requests()[0].Messages()
	if sys != "You are a test agent." {
		t.Fatalf("system %q", sys)
	}
	want := []llmfake.Msg{
		{Role: "user", Text: "spawn a worker"},
		{Role: "assistant", Calls: []llmfake.Call{
			{ID: "call_9f2c", Name: "spawn_agent", Args: `{"instructions":"work","name":"w"}`},
			{ID: "call_9f2d", Name: "send_message", Args: `{"recipient":"zz","text":"t"}`}}},
		{Role: "tool", CallID: "call_9f2c", Text: `{"agent_id":"x1"}`},
		{Role: "tool", CallID: "call_9f2d", Text: `{"error":"no such agent"}`},
		{Role: "assistant", Text: "spawned"},
		{Role: "user", Text: "thanks"},
		{Role: "assistant", Text: "you're welcome"},
		{Role: "user", Text: "next"},
	}
	if len(msgs) != len(want) {
		t.Fatalf("messages\n got %+v\nwant %+v", msgs, want)
	}
	for i := range want {
		if msgs[i].Role != want[i].Role || msgs[i].Text != want[i].Text || msgs[i].CallID != want[i].CallID ||
			len(msgs[i].Calls) != len(want[i].Calls) {
			t.Errorf("message %d = %+v, want %+v", i, msgs[i], want[i])
			continue
		}
		for j := range want[i].Calls {
			if msgs[i].Calls[j] != want[i].Calls[j] {
				t.Errorf("message %d call %d = %+v, want %+v", i, j, msgs[i].Calls[j], want[i].Calls[j])
			}
		}
	}
}

func TestCancelClosesTheStreamAtOnce(t *testing.T) {
	e := newEnv(t)
	e.fake.Push(llmfake.Reply{Text: "partial answer that never ends", Chunk: 4, Stall: true, StallAfter: 3})
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		_, err := e.session().Send(ctx, "go", provider.TurnIO{OnChunk: func(string) { got <- struct{}{} }})
		done <- err
	}()
	<-got // the stream is open and stalled after its first deltas
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if transient, _ := provider.IsTransient(err); transient {
		t.Fatalf("a cancel is not a transient provider error: %v", err)
	}
	<-e.fake.Released() // the server saw the connection close
}

func TestKeepAliveReusesConnections(t *testing.T) {
	e := newEnv(t)
	s := e.session()
	for i := 0; i < 5; i++ {
		if o := send(s, "hi", &tools{}); o.err != nil {
			t.Fatal(o.err)
		}
	}
	s2 := e.session()
	if o := send(s2, "hi", &tools{}); o.err != nil {
		t.Fatal(o.err)
	}
	if n := e.fake.Conns(); n != 1 {
		t.Fatalf("%d connections for 6 sequential requests of one entry, want 1", n)
	}
}

func TestPrefixStability(t *testing.T) {
	e := newEnv(t)
	e.fake.Push(
		llmfake.Reply{Text: "one"},
		llmfake.Reply{Calls: []llmfake.Call{{ID: "c1", Name: "list_children", Args: `{}`}}},
		llmfake.Reply{Text: "two"},
		llmfake.Reply{Text: "three"},
	)
	s := e.session()
	stats := s.(interface{ Stats() (int, int) })
	var encoded []int
	for _, p := range []string{"first", "second", "third"} {
		if o := send(s, p, &tools{}); o.err != nil {
			t.Fatal(o.err)
		}
		enc, _ := stats.Stats()
		encoded = append(encoded, enc)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		prev := bytes.TrimSuffix(reqs[i-1].Body, []byte("]}"))
		if !bytes.HasPrefix(reqs[i].Body, prev) {
			t.Fatalf("request %d does not begin with request %d's bytes:\n%s\n%s", i+1, i, prev, reqs[i].Body)
		}
	}
	// The third turn encodes only its new messages, not the whole history.
	if last := len(reqs[3].Body); encoded[2] > 200 || encoded[2] >= last/4 {
		t.Fatalf("third turn encoded %d bytes of a %d-byte request", encoded[2], last)
	}
}

func TestTextWithEscapesAndUnicodeStreamsIntact(t *testing.T) {
	text := "line one\nline \"two\"\ttab é 日本 \\ </end> \u2028"
	e := newEnv(t)
	e.fake.Push(llmfake.Reply{Text: text, Chunk: 3})
	o := send(e.session(), "go", &tools{})
	if o.err != nil || o.resp != text || strings.Join(o.chunks, "") != text {
		t.Fatalf("resp %q chunks %q err %v", o.resp, o.chunks, o.err)
	}
}
