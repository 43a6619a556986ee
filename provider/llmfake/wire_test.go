package llmfake

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// sseEvents posts body to url and reads the SSE stream: each event's name
// (from "event:", "" when absent) and its data decoded.
func sseEvents(t *testing.T, url, body string) (string, []string, []map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var names []string
	var datas []map[string]any
	name := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var m map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
				t.Fatalf("data line %q: %v", line, err)
			}
			names, datas = append(names, name), append(datas, m)
			name = ""
		}
	}
	return resp.Header.Get("Content-Type"), names, datas
}

// TestResponsesStream: a reply with text and a namespaced call streams as
// Codex reads it: typed events whose event name is the data's type, with
// increasing sequence numbers; the text deltas and argument deltas add up
// to the done items; response.completed carries the output and usage.
func TestResponsesStream(t *testing.T) {
	s := New(Responses)
	defer s.Close()
	s.Push(Reply{Text: "hello there, Codex", Chunk: 5, Calls: []Call{{ID: "call_a", Namespace: "mcp__warren", Name: "send_message", Args: `{"recipient":"lead","text":"hi"}`}}})
	ct, names, evs := sseEvents(t, s.BaseURL()+"/responses", `{"model":"mock-model","stream":true,"input":[]}`)
	if ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var text, args string
	var done []map[string]any
	for i, e := range evs {
		if e["type"] != names[i] {
			t.Fatalf("event %d named %q holds type %v", i, names[i], e["type"])
		}
		if e["sequence_number"] != float64(i) {
			t.Fatalf("event %d has sequence_number %v", i, e["sequence_number"])
		}
		switch names[i] {
		case "response.output_text.delta":
			text += e["delta"].(string)
		case "response.function_call_arguments.delta":
			args += e["delta"].(string)
		case "response.output_item.done":
			done = append(done, e["item"].(map[string]any))
		}
	}
	if names[0] != "response.created" || names[len(names)-1] != "response.completed" {
		t.Fatalf("events %v", names)
	}
	if text != "hello there, Codex" || args != `{"recipient":"lead","text":"hi"}` {
		t.Fatalf("text %q, args %q", text, args)
	}
	if len(done) != 2 || done[0]["type"] != "message" || done[1]["type"] != "function_call" ||
		done[1]["namespace"] != "mcp__warren" || done[1]["name"] != "send_message" || done[1]["call_id"] != "call_a" || done[1]["arguments"] != args {
		t.Fatalf("done items %v", done)
	}
	final := evs[len(evs)-1]["response"].(map[string]any)
	usage, _ := final["usage"].(map[string]any)
	if final["status"] != "completed" || final["id"] == "" || len(final["output"].([]any)) != 2 || usage["total_tokens"] == nil {
		t.Fatalf("completed %v", final)
	}
}

// TestResponsesFailedMidStream: ErrorAfter ends the stream with
// response.failed carrying the error.
func TestResponsesFailedMidStream(t *testing.T) {
	s := New(Responses)
	defer s.Close()
	s.Push(Reply{Text: "partial answer", ErrorAfter: 4, ErrorType: "server_error", ErrorMessage: "boom"})
	_, names, evs := sseEvents(t, s.BaseURL()+"/responses", `{"model":"m","input":"x"}`)
	last := evs[len(evs)-1]
	resp, _ := last["response"].(map[string]any)
	errObj, _ := resp["error"].(map[string]any)
	if len(names) != 5 || names[4] != "response.failed" || errObj["message"] != "boom" || errObj["code"] != "server_error" {
		t.Fatalf("events %v, last %v", names, last)
	}
}

// A Codex request as the study recorded it (trimmed): developer messages,
// the environment context, the user, an earlier namespaced call and its
// output, reasoning; MCP tools as a namespace tool.
const codexBody = `{"model":"mock-model","instructions":"You are Codex.","stream":true,"store":false,
"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>"}]},
{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}]},
{"type":"message","role":"user","content":[{"type":"input_text","text":"Tell the lead hello."}]},
{"type":"reasoning","summary":[],"encrypted_content":null},
{"type":"function_call","namespace":"mcp__warren","name":"send_message","arguments":"{\"recipient\":\"lead\"}","call_id":"call_1"},
{"type":"function_call_output","call_id":"call_1","output":"{\"message_id\":\"m1\"}"},
{"type":"message","role":"assistant","content":[{"type":"output_text","text":"sent"}]}],
"tools":[{"type":"function","name":"shell","parameters":{}},
{"type":"namespace","name":"mcp__warren","description":"warren","tools":[{"type":"function","name":"send_message","parameters":{}},{"type":"function","name":"spawn_agent","parameters":{}}]}]}`

// TestResponsesRequestParsing: Messages and Tools read Codex's request.
func TestResponsesRequestParsing(t *testing.T) {
	r := Request{Body: []byte(codexBody), api: Responses}
	sys, msgs := r.Messages()
	if sys != "You are Codex.\n<permissions instructions>" {
		t.Fatalf("system %q", sys)
	}
	if len(msgs) != 5 || msgs[1].Text != "Tell the lead hello." || msgs[2].Role != "assistant" ||
		len(msgs[2].Calls) != 1 || msgs[2].Calls[0].Namespace != "mcp__warren" || msgs[2].Calls[0].ID != "call_1" ||
		msgs[3].Role != "tool" || msgs[3].CallID != "call_1" || msgs[3].Text != `{"message_id":"m1"}` || msgs[4].Text != "sent" {
		t.Fatalf("messages %+v", msgs)
	}
	tool, ok := r.Tool("send_message")
	if !ok || tool != (Tool{Namespace: "mcp__warren", Name: "send_message"}) {
		t.Fatalf("Tool(send_message) = %v %v; tools %v", tool, ok, r.Tools())
	}
	if c := tool.Call("c9", "{}"); c.Namespace != "mcp__warren" || c.Name != "send_message" {
		t.Fatalf("call %+v", c)
	}
}

// TestGeminiStream: streamGenerateContent?alt=sse answers data events of
// GenerateContentResponse: text pieces, then the functionCall parts with
// whole args, the last one with finishReason STOP and usageMetadata; the
// model is the one named in the path.
func TestGeminiStream(t *testing.T) {
	s := New(Gemini)
	defer s.Close()
	s.Push(Reply{Text: "hello Gemini", Chunk: 4, Calls: []Call{{Name: "mcp_warren_send_message", Args: `{"recipient":"lead","text":"hi"}`}}})
	_, names, evs := sseEvents(t, s.BaseURL()+"/v1beta/models/mock-model:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`)
	var text string
	var calls []any
	for i, e := range evs {
		if names[i] != "" || e["modelVersion"] != "mock-model" {
			t.Fatalf("event %d: name %q, %v", i, names[i], e)
		}
		c := e["candidates"].([]any)[0].(map[string]any)
		for _, p := range c["content"].(map[string]any)["parts"].([]any) {
			pm := p.(map[string]any)
			if fc, ok := pm["functionCall"]; ok {
				calls = append(calls, fc)
			} else {
				text += pm["text"].(string)
			}
		}
		if last := i == len(evs)-1; last != (c["finishReason"] == "STOP") || last != (e["usageMetadata"] != nil) {
			t.Fatalf("event %d of %d: finish %v usage %v", i, len(evs), c["finishReason"], e["usageMetadata"])
		}
	}
	fc, _ := calls[0].(map[string]any)
	args, _ := fc["args"].(map[string]any)
	if text != "hello Gemini" || len(calls) != 1 || fc["name"] != "mcp_warren_send_message" || args["recipient"] != "lead" {
		t.Fatalf("text %q, calls %v", text, calls)
	}
}

// TestGeminiWholeAndCount: :generateContent answers one JSON body,
// streamGenerateContent without alt=sse a JSON array, :countTokens a
// count, and an error status the Gemini error body.
func TestGeminiWholeAndCount(t *testing.T) {
	s := New(Gemini)
	defer s.Close()
	s.Push(Reply{Text: "whole answer"}, Reply{Text: "in an array"}, s.Status(503, "UNAVAILABLE", "overloaded"))
	get := func(path string) (int, string) {
		resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(`{"contents":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := get("/v1beta/models/m:generateContent"); code != 200 || !strings.HasPrefix(b, `{"candidates":[{"content":{"parts":[{"text":"whole answer"}]`) {
		t.Fatalf("generateContent: %d %s", code, b)
	}
	if code, b := get("/v1beta/models/m:streamGenerateContent"); code != 200 || !strings.HasPrefix(b, `[{"candidates"`) || !strings.Contains(b, "in an array") {
		t.Fatalf("streamGenerateContent without alt=sse: %d %s", code, b)
	}
	if code, b := get("/v1beta/models/m:countTokens"); code != 200 || !strings.HasPrefix(b, `{"totalTokens":`) {
		t.Fatalf("countTokens: %d %s", code, b)
	}
	if code, b := get("/v1beta/models/m:streamGenerateContent"); code != 503 || b != `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}` {
		t.Fatalf("error: %d %s", code, b)
	}
	if code, _ := get("/v1/chat/completions"); code != 404 {
		t.Fatalf("a Chat Completions path on the Gemini fake: %d", code)
	}
	if s.Count() != 3 {
		t.Fatalf("recorded %d requests, want the 3 generation calls", s.Count())
	}
}

// TestGeminiRequestParsing: Messages and Tools read Gemini CLI's request.
func TestGeminiRequestParsing(t *testing.T) {
	body := `{"systemInstruction":{"role":"user","parts":[{"text":"You are Gemini CLI."}]},
"contents":[{"role":"user","parts":[{"text":"<session_context>"},{"text":"Tell the lead hello."}]},
{"role":"model","parts":[{"functionCall":{"id":"fc1","name":"mcp_warren_send_message","args":{"recipient":"lead"}}}]},
{"role":"user","parts":[{"functionResponse":{"id":"fc1","name":"mcp_warren_send_message","response":{"output":"{\"message_id\":\"m1\"}"}}}]}],
"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"mcp_warren_send_message"}]}]}`
	r := Request{Body: []byte(body), api: Gemini, Path: "/v1beta/models/mock-model:streamGenerateContent"}
	sys, msgs := r.Messages()
	if sys != "You are Gemini CLI." || len(msgs) != 3 || msgs[0].Text != "<session_context>Tell the lead hello." ||
		msgs[1].Role != "assistant" || msgs[1].Calls[0].Name != "mcp_warren_send_message" || msgs[1].Calls[0].Args != `{"recipient":"lead"}` ||
		msgs[2].Role != "tool" || msgs[2].CallID != "fc1" || msgs[2].Text != `{"message_id":"m1"}` {
		t.Fatalf("system %q, messages %+v", sys, msgs)
	}
	if tool, ok := r.Tool("send_message"); !ok || tool.Name != "mcp_warren_send_message" {
		t.Fatalf("Tool = %v %v", tool, ok)
	}
	if model(r) != "mock-model" {
		t.Fatalf("model %q", model(r))
	}
}

// TestToolNamingAcrossAPIs: Tool finds warren's tool under each agent's
// naming and not a tool that merely contains the name.
func TestToolNamingAcrossAPIs(t *testing.T) {
	for _, c := range []struct {
		api  API
		body string
		want string
	}{
		{Anthropic, `{"tools":[{"name":"Bash"},{"name":"mcp__warren__send_message"}]}`, "mcp__warren__send_message"},
		{OpenAI, `{"tools":[{"type":"function","function":{"name":"warren_send_message"}}]}`, "warren_send_message"},
		{OpenAI, `{"tools":[{"type":"function","function":{"name":"send_messages"}}]}`, ""},
	} {
		tool, _ := Request{Body: []byte(c.body), api: c.api}.Tool("send_message")
		if tool.Name != c.want {
			t.Fatalf("%s %s: got %q, want %q", c.api, c.body, tool.Name, c.want)
		}
	}
}
