package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/warren-dev/warren/provider/llm"
)

// Wire is the Chat Completions wire format (llm.Wire).
type Wire struct{}

var _ llm.Wire = Wire{}

// Type implements llm.Wire.
func (Wire) Type() string { return "openai" }

// Endpoint implements llm.Wire: {base_url}/chat/completions.
func (Wire) Endpoint(base string) string { return strings.TrimRight(base, "/") + "/chat/completions" }

// Auth implements llm.Wire: Authorization: Bearer KEY when there is a key.
func (Wire) Auth(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

type function struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  map[string]any `json:"parameters"`
}

type tool struct {
	Type     string   `json:"type"`
	Function function `json:"function"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type head struct {
	Model         string        `json:"model"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	MaxTokens     int           `json:"max_tokens,omitempty"`
	Tools         []tool        `json:"tools,omitempty"`
}

// AppendHead implements llm.Wire: model, stream, stream_options,
// max_tokens, tools, then "messages" with the system message first.
func (Wire) AppendHead(buf []byte, h llm.Head) ([]byte, bool, error) {
	hd := head{Model: h.Model, Stream: true, StreamOptions: streamOptions{IncludeUsage: true}, MaxTokens: h.MaxTokens}
	for _, t := range h.Tools {
		hd.Tools = append(hd.Tools, tool{Type: "function", Function: function{Name: t.Name, Description: t.Description, Parameters: t.JSONSchema()}})
	}
	b, err := json.Marshal(hd)
	if err != nil {
		return nil, false, err
	}
	buf = append(buf, b[:len(b)-1]...)
	buf = append(buf, `,"messages":[`...)
	if h.System == "" {
		return buf, true, nil
	}
	buf = appendJSON(buf, textMessage{Role: "system", Content: h.System})
	return buf, false, nil
}

type textMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type callFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function callFunction `json:"function"`
}

type assistantMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type toolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

func appendJSON(buf []byte, v any) []byte {
	// Only strings and slices of them are encoded: Marshal cannot fail.
	b, _ := json.Marshal(v)
	return append(buf, b...)
}

// AppendMessage implements llm.Wire: user and assistant messages; tool
// results as one "tool" message per result.
func (Wire) AppendMessage(buf []byte, m *llm.Message, _ bool) []byte {
	switch m.Role {
	case llm.RoleAssistant:
		am := assistantMessage{Role: "assistant"}
		if m.Text != "" || len(m.Calls) == 0 {
			t := m.Text
			am.Content = &t
		}
		for _, c := range m.Calls {
			am.ToolCalls = append(am.ToolCalls, toolCall{ID: c.ID, Type: "function", Function: callFunction{Name: c.Name, Arguments: c.Args}})
		}
		return appendJSON(buf, am)
	case llm.RoleTool:
		for i, r := range m.Results {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendJSON(buf, toolMessage{Role: "tool", ToolCallID: r.CallID, Content: r.Content})
		}
		return buf
	default:
		return appendJSON(buf, textMessage{Role: "user", Content: m.Text})
	}
}

// MarksLast implements llm.Wire: OpenAI caches prefixes automatically.
func (Wire) MarksLast() bool { return false }

// Tail implements llm.Wire.
func (Wire) Tail() []byte { return []byte("]}") }

// errorBody is an error object: {"error": {...}} or {"error": "text"}.
type errorBody struct {
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
}

type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// ParseError implements llm.Wire.
func (Wire) ParseError(body []byte) llm.APIError {
	var eb errorBody
	if json.Unmarshal(body, &eb) != nil {
		return llm.APIError{}
	}
	return parseErrorValue(eb.Error, eb.Message)
}

func parseErrorValue(raw json.RawMessage, message string) llm.APIError {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return llm.APIError{Message: message}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return llm.APIError{Message: s}
	}
	var eo errorObject
	if json.Unmarshal(raw, &eo) != nil {
		return llm.APIError{Message: string(raw)}
	}
	ae := llm.APIError{Type: eo.Type, Message: eo.Message}
	code := bytes.TrimSpace(eo.Code)
	if len(code) > 0 && string(code) != "null" {
		if json.Unmarshal(code, &s) == nil {
			ae.Code = s
		} else {
			ae.Code = string(code) // numeric (OpenRouter)
		}
	}
	return ae
}
