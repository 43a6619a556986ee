package llmfake

import (
	"encoding/json"
	"net/http"
	"strings"
)

// RateLimited is a 429 whose Retry-After is retryAfter (seconds, an HTTP
// date, or "" for none).
func (s *Server) RateLimited(retryAfter string) Reply {
	rep := Reply{Status: http.StatusTooManyRequests, Header: map[string]string{}}
	if retryAfter != "" {
		rep.Header["Retry-After"] = retryAfter
	}
	typ := "rate_limit_error"
	if s.api == Gemini {
		typ = "RESOURCE_EXHAUSTED"
	}
	rep.Body = s.errorBody(http.StatusTooManyRequests, typ, "Rate limit reached for requests")
	return rep
}

// Status is an error response with the API's error body (typ is the
// error's type, or its status such as UNAVAILABLE for Gemini).
func (s *Server) Status(code int, typ, message string) Reply {
	return Reply{Status: code, Body: s.errorBody(code, typ, message)}
}

func (s *Server) errorBody(code int, typ, message string) string {
	switch s.api {
	case Anthropic:
		return mustJSON(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}})
	case Gemini:
		return mustJSON(map[string]any{"error": map[string]any{"code": code, "message": message, "status": typ}})
	}
	return mustJSON(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": typ}})
}

// Msg is one message of a recorded request, in a wire-independent form.
type Msg struct {
	Role    string // user, assistant, tool (OpenAI tool messages and Anthropic tool_result blocks)
	Text    string
	Calls   []Call
	CallID  string // tool results: the call answered
	IsError bool
}

// Messages returns the request's system prompt and its messages in order
// (an Anthropic message with several blocks gives one Msg per tool result
// and one for the rest).
func (r Request) Messages() (system string, msgs []Msg) {
	switch r.api {
	case Responses:
		return r.responsesMessages()
	case Gemini:
		return r.geminiMessages()
	}
	var body struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return "", nil
	}
	system = textOf(body.System)
	for _, m := range body.Messages {
		if m.Role == "system" {
			system = textOf(m.Content)
			continue
		}
		if m.Role == "tool" {
			msgs = append(msgs, Msg{Role: "tool", Text: textOf(m.Content), CallID: m.ToolCallID})
			continue
		}
		msg := Msg{Role: m.Role}
		for _, tc := range m.ToolCalls {
			msg.Calls = append(msg.Calls, Call{ID: tc.ID, Name: tc.Function.Name, Args: tc.Function.Arguments})
		}
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			msg.Text = textOf(m.Content)
			msgs = append(msgs, msg)
			continue
		}
		var texts []string
		for _, b := range blocks {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_use":
				msg.Calls = append(msg.Calls, Call{ID: b.ID, Name: b.Name, Args: string(b.Input)})
			case "tool_result":
				msgs = append(msgs, Msg{Role: "tool", Text: textOf(b.Content), CallID: b.ToolUseID, IsError: b.IsError})
			}
		}
		msg.Text = strings.Join(texts, "")
		if msg.Text != "" || len(msg.Calls) > 0 {
			msgs = append(msgs, msg)
		}
	}
	return system, msgs
}

// textOf reads a string or a list of text blocks.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			parts = append(parts, b.Text)
		}
		return strings.Join(parts, "")
	}
	return ""
}

// Last is the last message of the request (zero Msg when there is none).
func (r Request) Last() Msg {
	_, msgs := r.Messages()
	if len(msgs) == 0 {
		return Msg{}
	}
	return msgs[len(msgs)-1]
}

// Tool is a tool a request offers the model; Namespace is set for a
// function inside a Responses namespace tool (Codex's MCP tools).
type Tool struct {
	Namespace string
	Name      string
}

// Tools lists the tools the request offers, in order, in any of the APIs.
func (r Request) Tools() []Tool {
	type fn struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		Tools                []fn `json:"tools"`
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	}
	var body struct {
		Tools []fn `json:"tools"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return nil
	}
	var out []Tool
	for _, t := range body.Tools {
		switch {
		case t.Function.Name != "":
			out = append(out, Tool{Name: t.Function.Name})
		case len(t.FunctionDeclarations) > 0:
			for _, d := range t.FunctionDeclarations {
				out = append(out, Tool{Name: d.Name})
			}
		case t.Type == "namespace":
			for _, sub := range t.Tools {
				out = append(out, Tool{Namespace: t.Name, Name: sub.Name})
			}
		case t.Name != "":
			out = append(out, Tool{Name: t.Name})
		}
	}
	return out
}

// Tool finds the offered tool that is warren's tool name under any
// agent's naming: exactly name, or name after a "_" or "__" prefix
// (mcp__warren__send_message, mcp_warren_send_message,
// warren_send_message, or send_message in the namespace mcp__warren).
func (r Request) Tool(name string) (Tool, bool) {
	for _, t := range r.Tools() {
		if t.Name == name || strings.HasSuffix(t.Name, "_"+name) {
			return t, true
		}
	}
	return Tool{}, false
}

// Call makes a call of the tool t with args.
func (t Tool) Call(id, args string) Call {
	return Call{ID: id, Name: t.Name, Args: args, Namespace: t.Namespace}
}
