package llmfake

import (
	"encoding/json"
	"strings"
)

// The Gemini API as Gemini CLI speaks it (reference/providers.md 5.2):
// POST /v1beta/models/MODEL:streamGenerateContent?alt=sse with
// {contents:[{role:user|model, parts:[{text}|{functionCall}|{functionResponse}]}],
// systemInstruction, tools:[{functionDeclarations}]}, answered by
// `data: GenerateContentResponse` events:
//
//	{"candidates":[{"content":{"role":"model","parts":[{"text":"..."}]},"index":0}],"modelVersion":M,"responseId":ID}
//	... one per text piece, then one per functionCall part (whole args),
//	the last with "finishReason":"STOP" and "usageMetadata".
//
// :generateContent (and streamGenerateContent without alt=sse, a JSON
// array) get the same content in one body. :countTokens answers
// {"totalTokens":N}. Error bodies are {"error":{code,message,status}}; a
// mid-stream error (ErrorAfter) is a data event holding such an error.

func geminiChunk(m string, parts []any, finish string, usage map[string]any) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	v := map[string]any{"candidates": []any{cand}, "modelVersion": m, "responseId": "fake-response"}
	if usage != nil {
		v["usageMetadata"] = usage
	}
	return v
}

func geminiParts(rep Reply) (texts []any, calls []any) {
	for _, t := range split(rep.Text, rep.Chunk) {
		texts = append(texts, map[string]any{"text": t})
	}
	for _, c := range rep.Calls {
		var args any = map[string]any{}
		if c.Args != "" {
			_ = json.Unmarshal([]byte(c.Args), &args)
		}
		fc := map[string]any{"name": c.Name, "args": args}
		if c.ID != "" {
			fc["id"] = c.ID
		}
		calls = append(calls, map[string]any{"functionCall": fc})
	}
	return texts, calls
}

func geminiUsage(rep Reply, req Request) map[string]any {
	if rep.NoUsage {
		return nil
	}
	in, out, cached := usageOf(rep, req)
	return map[string]any{"promptTokenCount": in, "candidatesTokenCount": out, "totalTokenCount": in + out, "cachedContentTokenCount": cached}
}

// geminiEvents renders a reply as streamGenerateContent SSE events.
func geminiEvents(rep Reply, req Request) []string {
	m := model(req)
	var evs []string
	add := func(v map[string]any) { evs = append(evs, "data: "+mustJSON(v)+"\r\n\r\n") }
	texts, calls := geminiParts(rep)
	var chunks [][]any
	for _, t := range texts {
		chunks = append(chunks, []any{t})
	}
	if len(calls) > 0 {
		chunks = append(chunks, calls)
	}
	if len(chunks) == 0 {
		chunks = append(chunks, []any{map[string]any{"text": ""}})
	}
	for i, parts := range chunks {
		if i == len(chunks)-1 {
			add(geminiChunk(m, parts, "STOP", geminiUsage(rep, req)))
			continue
		}
		add(geminiChunk(m, parts, "", nil))
	}
	if rep.ErrorAfter > 0 && rep.ErrorAfter < len(evs) {
		typ := rep.ErrorType
		if typ == "" {
			typ = "INTERNAL"
		}
		evs = append(evs[:rep.ErrorAfter:rep.ErrorAfter], "data: "+mustJSON(map[string]any{"error": map[string]any{
			"code": 500, "message": rep.ErrorMessage, "status": typ}})+"\r\n\r\n")
	}
	return evs
}

// geminiWhole is the reply in one body: a GenerateContentResponse, or for
// streamGenerateContent without alt=sse a JSON array of one.
func geminiWhole(rep Reply, req Request, array bool) string {
	texts, calls := geminiParts(rep)
	var parts []any
	if rep.Text != "" {
		parts = append(parts, map[string]any{"text": rep.Text})
	} else if len(texts) == 0 && len(calls) == 0 {
		parts = append(parts, map[string]any{"text": ""})
	}
	parts = append(parts, calls...)
	v := geminiChunk(model(req), parts, "STOP", geminiUsage(rep, req))
	if array {
		return mustJSON([]any{v})
	}
	return mustJSON(v)
}

// streamed says whether a Gemini request asked for SSE.
func (r Request) streamed() bool {
	return strings.Contains(r.Path, ":streamGenerateContent") && strings.Contains("&"+r.Query+"&", "&alt=sse&")
}

// geminiMessages reads a Gemini request: systemInstruction is the system
// text; user text parts are user messages, model parts assistant messages
// (functionCall parts their Calls), and each functionResponse part a tool
// message whose CallID is the call's id, else its name.
func (r Request) geminiMessages() (system string, msgs []Msg) {
	type part struct {
		Text         string `json:"text"`
		FunctionCall *struct {
			ID   string          `json:"id"`
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		} `json:"functionCall"`
		FunctionResponse *struct {
			ID       string          `json:"id"`
			Name     string          `json:"name"`
			Response json.RawMessage `json:"response"`
		} `json:"functionResponse"`
	}
	var body struct {
		SystemInstruction *struct {
			Parts []part `json:"parts"`
		} `json:"systemInstruction"`
		Contents []struct {
			Role  string `json:"role"`
			Parts []part `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return "", nil
	}
	if body.SystemInstruction != nil {
		var ts []string
		for _, p := range body.SystemInstruction.Parts {
			ts = append(ts, p.Text)
		}
		system = strings.Join(ts, "")
	}
	for _, c := range body.Contents {
		role := "user"
		if c.Role == "model" {
			role = "assistant"
		}
		msg := Msg{Role: role}
		var texts []string
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				msg.Calls = append(msg.Calls, Call{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: string(p.FunctionCall.Args)})
			case p.FunctionResponse != nil:
				id := p.FunctionResponse.ID
				if id == "" {
					id = p.FunctionResponse.Name
				}
				msgs = append(msgs, Msg{Role: "tool", Text: geminiResponseText(p.FunctionResponse.Response), CallID: id})
			default:
				texts = append(texts, p.Text)
			}
		}
		msg.Text = strings.Join(texts, "")
		if msg.Text != "" || len(msg.Calls) > 0 {
			msgs = append(msgs, msg)
		}
	}
	return system, msgs
}

// geminiResponseText is a functionResponse's text: its "output" (or
// "content") string when it has one, else the whole response as JSON.
func geminiResponseText(raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		for _, k := range []string{"output", "content", "result"} {
			if v, ok := m[k]; ok {
				if s := textOf(v); s != "" {
					return s
				}
			}
		}
	}
	return string(raw)
}
