package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/warren-dev/warren/provider/llm"
)

// Version is the anthropic-version header sent with every request.
const Version = "2023-06-01"

// DefaultMaxTokens is max_tokens when the entry sets none (the API requires
// one).
const DefaultMaxTokens = 8192

// Wire is the Messages API wire format (llm.Wire).
type Wire struct{}

var _ llm.Wire = Wire{}

// Type implements llm.Wire.
func (Wire) Type() string { return "anthropic" }

// Endpoint implements llm.Wire: {base_url}/v1/messages (a base URL that
// already ends in /v1 is accepted too).
func (Wire) Endpoint(base string) string {
	base = strings.TrimRight(base, "/")
	if strings.HasSuffix(base, "/v1") {
		return base + "/messages"
	}
	return base + "/v1/messages"
}

// Auth implements llm.Wire: x-api-key and anthropic-version.
func (Wire) Auth(h http.Header, key string) {
	if key != "" {
		h.Set("x-api-key", key)
	}
	h.Set("anthropic-version", Version)
}

type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

type textBlock struct {
	Type         string        `json:"type"`
	Text         string        `json:"text"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type toolDef struct {
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	InputSchema  map[string]any `json:"input_schema"`
	CacheControl *cacheControl  `json:"cache_control,omitempty"`
}

type head struct {
	Model     string      `json:"model"`
	MaxTokens int         `json:"max_tokens"`
	Stream    bool        `json:"stream"`
	System    []textBlock `json:"system,omitempty"`
	Tools     []toolDef   `json:"tools,omitempty"`
}

// AppendHead implements llm.Wire: model, max_tokens, stream, system (one
// text block) and tools, with cache_control breakpoints on the system block
// and the last tool, then "messages".
func (Wire) AppendHead(buf []byte, h llm.Head) ([]byte, bool, error) {
	hd := head{Model: h.Model, MaxTokens: h.MaxTokens, Stream: true}
	if hd.MaxTokens <= 0 {
		hd.MaxTokens = DefaultMaxTokens
	}
	if h.System != "" {
		hd.System = []textBlock{{Type: "text", Text: h.System, CacheControl: ephemeral}}
	}
	for i, t := range h.Tools {
		td := toolDef{Name: t.Name, Description: t.Description, InputSchema: t.JSONSchema()}
		if i == len(h.Tools)-1 {
			td.CacheControl = ephemeral
		}
		hd.Tools = append(hd.Tools, td)
	}
	b, err := json.Marshal(hd)
	if err != nil {
		return nil, false, err
	}
	buf = append(buf, b[:len(b)-1]...)
	buf = append(buf, `,"messages":[`...)
	return buf, true, nil
}

type toolUseBlock struct {
	Type         string          `json:"type"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

type toolResultBlock struct {
	Type         string        `json:"type"`
	ToolUseID    string        `json:"tool_use_id"`
	Content      string        `json:"content"`
	IsError      bool          `json:"is_error,omitempty"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type message struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

// AppendMessage implements llm.Wire: content blocks text, tool_use and
// tool_result (tool results are a user message); mark puts a cache_control
// breakpoint on the message's last block.
func (Wire) AppendMessage(buf []byte, m *llm.Message, mark bool) []byte {
	var cc *cacheControl
	if mark {
		cc = ephemeral
	}
	msg := message{Role: "user"}
	switch m.Role {
	case llm.RoleAssistant:
		msg.Role = "assistant"
		if m.Text != "" || len(m.Calls) == 0 {
			msg.Content = append(msg.Content, &textBlock{Type: "text", Text: nonEmpty(m.Text)})
		}
		for _, c := range m.Calls {
			msg.Content = append(msg.Content, &toolUseBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: inputObject(c.Args)})
		}
	case llm.RoleTool:
		for _, r := range m.Results {
			b := &toolResultBlock{Type: "tool_result", ToolUseID: r.CallID, Content: r.Content}
			if r.IsError {
				b.Content, b.IsError = nonEmpty(r.ErrText), true
			}
			msg.Content = append(msg.Content, b)
		}
	default:
		msg.Content = []any{&textBlock{Type: "text", Text: nonEmpty(m.Text)}}
	}
	if cc != nil && len(msg.Content) > 0 {
		switch b := msg.Content[len(msg.Content)-1].(type) {
		case *textBlock:
			b.CacheControl = cc
		case *toolUseBlock:
			b.CacheControl = cc
		case *toolResultBlock:
			b.CacheControl = cc
		}
	}
	// Only strings, booleans and valid JSON objects: Marshal cannot fail.
	out, _ := json.Marshal(msg)
	return append(buf, out...)
}

// nonEmpty: the API refuses empty text blocks.
func nonEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}

// inputObject is a tool_use input: the model's arguments when they are a
// JSON object, else {} (such a call was answered with an error, not run).
func inputObject(args string) json.RawMessage {
	a := strings.TrimSpace(args)
	if a == "" || a[0] != '{' || !json.Valid([]byte(a)) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(a)
}

// MarksLast implements llm.Wire: the last message carries a breakpoint.
func (Wire) MarksLast() bool { return true }

// Tail implements llm.Wire.
func (Wire) Tail() []byte { return []byte("]}") }

type errorEnvelope struct {
	Type  string `json:"type"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// ParseError implements llm.Wire: {"type":"error","error":{"type","message"}}.
func (Wire) ParseError(body []byte) llm.APIError {
	var e errorEnvelope
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return llm.APIError{}
	}
	return llm.APIError{Type: e.Error.Type, Message: e.Error.Message}
}
