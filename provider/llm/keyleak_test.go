package llm_test

// The key never leaves the provider (SPEC 7 "Keys", issue 31 D1): a
// hostile server plants the key, its runs and its escaped forms in every
// field and header of every response shape, and the real request path
// (net/http client, both wires, the tool loop) runs against it; neither
// the error, nor the response, nor the streamed text, nor a tool call's
// arguments (logged by the daemon as tool.call), nor the log (the
// provider's own, and the daemon's retry WARN of the error) holds 8
// consecutive characters of the key, raw or decoded.
//
//	go test -run 'TestKeyNeverLeaks|FuzzKeyNeverLeaks' ./provider/llm/
//	go test -run '^$' -fuzz FuzzKeyNeverLeaks -fuzztime 60s ./provider/llm/

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/anthropic"
	"github.com/warren-dev/warren/provider/llm"
	"github.com/warren-dev/warren/provider/openai"
)

const hostileKey = "sk-proj-ZZSECRETKEY0123456789abcdefTOPSECRETzz"

// rawServer answers each request with the bytes reply gives for the
// request's index (the whole HTTP response: status line, headers, body),
// then closes the connection.
type rawServer struct {
	ln    net.Listener
	mu    sync.Mutex
	reply func(n int) []byte
	n     int
	wg    sync.WaitGroup
}

func newRawServer(t testing.TB) *rawServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	s.mu.Lock()
	n, reply := s.n, s.reply
	s.n++
	s.mu.Unlock()
	_, _ = c.Write(reply(n))
}

func (s *rawServer) set(reply func(n int) []byte) {
	s.mu.Lock()
	s.reply, s.n = reply, 0
	s.mu.Unlock()
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

// response renders an HTTP/1.1 response that closes its connection.
func response(status string, header [][2]string, body string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %s\r\n", status)
	for _, h := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	fmt.Fprintf(&b, "Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return b.Bytes()
}

func sse(body string) []byte {
	return response("200 OK", [][2]string{{"Content-Type", "text/event-stream"}}, body)
}

// jsonString is s as a JSON string, HTML characters left as they are.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// recorder is the turn's tool caller: what it got is what the daemon
// would log as tool.call.
type recorder struct {
	mu   sync.Mutex
	args []string
}

func (r *recorder) CallTool(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
	b, _ := json.Marshal(args)
	r.mu.Lock()
	r.args = append(r.args, tool+" "+string(b))
	r.mu.Unlock()
	return map[string]any{"ok": true}, nil
}

// outcome is everything a turn against the hostile server let out.
type outcome struct {
	resp   string
	err    error
	chunks string
	calls  []string
	log    string
}

// run sends one turn through api's provider to srv, the key in the
// daemon's environment; the error is logged as the daemon's retry WARN
// logs it.
func run(t testing.TB, srv *rawServer, api string, key string) outcome {
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Output: &lockedWriter{w: &logBuf, mu: &logMu}, Level: hclog.Trace, JSONFormat: true})
	opts := llm.Options{Name: "hos", Logger: logger, MaxSteps: 2, Getenv: func(string) string { return key },
		Settings: func() llm.Settings {
			return llm.Settings{BaseURL: srv.url() + "/v1", APIKeyEnv: "HOSTILE_KEY", Timeout: 5 * time.Second}
		}}
	var p *llm.Provider
	if api == "anthropic" {
		p = anthropic.New(opts)
	} else {
		p = openai.New(opts)
	}
	s, err := p.Create(context.Background(), provider.Spec{AgentID: "a1", Model: "m", System: "sys"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	var chunks strings.Builder
	var o outcome
	o.resp, o.err = s.Send(context.Background(), "hi", provider.TurnIO{Tools: rec, OnChunk: func(c string) { chunks.WriteString(c) }})
	if o.err != nil {
		logger.Warn("transient provider error; retrying", "agent", "a1", "attempt", 1, "err", o.err)
		logger.Error("turn failed", "err", o.err.Error())
	}
	o.chunks = chunks.String()
	o.calls = rec.args
	logMu.Lock()
	o.log = logBuf.String()
	logMu.Unlock()
	return o
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// leak names where o holds a run of the key, "" when nowhere.
func (o outcome) leak(key string) string {
	errText := ""
	if o.err != nil {
		errText = o.err.Error()
	}
	for _, f := range []struct{ name, text string }{
		{"error", errText}, {"response", o.resp}, {"streamed text", o.chunks},
		{"tool call arguments", strings.Join(o.calls, "\n")}, {"log", o.log},
	} {
		if run := llm.KeyLeak(f.text, key); run != "" {
			return fmt.Sprintf("%s holds %q: %.600s", f.name, run, f.text)
		}
	}
	return ""
}

// TestKeyNeverLeaks covers, one subtest each, the paths by which the
// adversarial run (issue 31 D1) got the key onto disk and output.
func TestKeyNeverLeaks(t *testing.T) {
	srv := newRawServer(t)
	K := hostileKey
	done := func(api string) []byte {
		if api == "anthropic" {
			return sse(anthropicText("done"))
		}
		return sse(openaiText("done"))
	}
	cases := []struct {
		name  string
		api   string
		reply func(n int) []byte
		want  string // the error must still say this
	}{
		{"reason_phrase", "openai", func(int) []byte {
			return response("400 Bad key "+K, [][2]string{{"Content-Type", "application/json"}}, `{}`)
		}, "HTTP 400"},
		{"html_body_200", "openai", func(int) []byte {
			return response("200 OK", [][2]string{{"Content-Type", "text/html"}}, "<html><body>Your key "+K+" is not valid here</body></html>")
		}, "HTML page"},
		{"openai_error_event_type_code", "openai", func(int) []byte {
			return sse(`data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n" +
				`data: {"error":{"type":"rate_limit_` + K + `","code":"` + K + `","message":"slow down"}}` + "\n\n")
		}, "slow down"},
		{"anthropic_error_event_type", "anthropic", func(int) []byte {
			return sse("event: error\ndata: " + `{"type":"error","error":{"type":"overloaded_` + K + `","message":"Overloaded"}}` + "\n\n")
		}, "Overloaded"},
		{"redirect_location", "openai", func(int) []byte {
			return response("307 Temporary Redirect", [][2]string{{"Location", "http://127.0.0.2:18081/v1?key=" + K}}, "")
		}, "redirect"},
		{"snippet_cut_keeps_a_prefix", "openai", func(int) []byte {
			return response("400 Bad Request", [][2]string{{"Content-Type", "text/plain"}}, strings.Repeat("x", 177)+" "+K)
		}, "HTTP 400"},
		{"tool_call_arguments", "openai", func(n int) []byte {
			if n > 0 {
				return done("openai")
			}
			return sse(openaiCall("send_message", `{"to":"USER","message":"`+K+`"}`, 0))
		}, ""},
		{"streamed_text_across_deltas", "anthropic", func(int) []byte {
			return sse(anthropicText("the key is ", K[:5], K[5:11], K[11:17], K[17:], " ok"))
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv.set(c.reply)
			o := run(t, srv, c.api, K)
			if l := o.leak(K); l != "" {
				t.Fatalf("the key leaked: %s", l)
			}
			if c.want != "" && (o.err == nil || !strings.Contains(o.err.Error(), c.want)) {
				t.Fatalf("error %v does not say %q", o.err, c.want)
			}
			if c.want == "" && o.err != nil {
				t.Fatalf("the turn failed: %v", o.err)
			}
		})
	}
}

// openaiText is a Chat Completions stream of the deltas.
func openaiText(deltas ...string) string {
	var b strings.Builder
	for _, d := range deltas {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"finish_reason\":null}]}\n\n", jsonString(d))
	}
	b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	return b.String()
}

// openaiCall is a stream of one tool call whose arguments come in pieces
// of size bytes (0: whole).
func openaiCall(name, args string, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":%s,\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n", jsonString(name))
	for _, p := range pieces(args, size) {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":%s}}]},\"finish_reason\":null}]}\n\n", jsonString(p))
	}
	b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
	return b.String()
}

func pieces(s string, size int) []string {
	if size <= 0 || size >= len(s) {
		return []string{s}
	}
	var out []string
	for len(s) > size {
		out = append(out, s[:size])
		s = s[size:]
	}
	return append(out, s)
}

const anthropicStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"

const anthropicStop = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// anthropicText is a Messages stream of one text block of the deltas.
func anthropicText(deltas ...string) string {
	var b strings.Builder
	b.WriteString(anthropicStart)
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for _, d := range deltas {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%s}}\n\n", jsonString(d))
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString(anthropicStop)
	return b.String()
}

// anthropicCall is a Messages stream of one tool_use block whose input
// comes as partial JSON in pieces of size bytes.
func anthropicCall(id, name, args string, size int) string {
	var b strings.Builder
	b.WriteString(anthropicStart)
	fmt.Fprintf(&b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":%s,\"name\":%s,\"input\":{}}}\n\n", jsonString(id), jsonString(name))
	for _, p := range pieces(args, size) {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":%s}}\n\n", jsonString(p))
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString(anthropicStop)
	return b.String()
}

// keyForm is the key, or a run of it of 8 bytes or more, as a server may
// echo it: raw, JSON-escaped (once or twice), percent-encoded (once or
// twice), as HTML character references, or mixed. Every form is valid
// inside a JSON string as it is.
func keyForm(key string, form uint8, pad uint16) string {
	n := len(key)
	at := int(pad)
	switch form % 12 {
	case 1: // a prefix (a snippet's cut)
		return key[:8+at%(n-7)]
	case 2: // a suffix
		return key[n-8-at%(n-7):]
	case 3: // a middle run
		from := at % (n - 7)
		return key[from : from+8+(at/7)%(n-from-7)]
	case 4:
		return each(key, func(c byte) string { return fmt.Sprintf(`\u%04x`, c) })
	case 5:
		return each(key, func(c byte) string { return fmt.Sprintf(`\\u%04X`, c) })
	case 6:
		return each(key, func(c byte) string { return fmt.Sprintf("%%%02X", c) })
	case 7:
		return each(key, func(c byte) string { return fmt.Sprintf("%%25%02x", c) })
	case 8:
		return each(key, func(c byte) string { return fmt.Sprintf("&#%d;", c) })
	case 9:
		return each(key, func(c byte) string { return fmt.Sprintf("&#x%x", c) })
	case 10: // mixed, character by character
		var b strings.Builder
		for i := 0; i < n; i++ {
			switch (at >> (i % 16)) & 3 {
			case 0:
				b.WriteByte(key[i])
			case 1:
				fmt.Fprintf(&b, `\u%04x`, key[i])
			case 2:
				fmt.Fprintf(&b, "%%%02x", key[i])
			default:
				fmt.Fprintf(&b, "&#%d;", key[i])
			}
		}
		return b.String()
	case 11:
		return "Bearer " + key
	}
	return key
}

func each(s string, f func(byte) string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteString(f(s[i]))
	}
	return b.String()
}

// safe keeps the characters of s that need no escaping anywhere (status
// line, header, JSON string, SSE line), at most 300 of them.
func safe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 300; i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(" .,:!?-_()", c) >= 0 {
			b.WriteByte(c)
		}
	}
	return b.String()
}

var statuses = []string{"400 Bad Request", "401 Unauthorized", "403 Forbidden", "404 Not Found", "408 Request Timeout",
	"409 Conflict", "422 Unprocessable Entity", "429 Too Many Requests", "500 Internal Server Error", "502 Bad Gateway",
	"503 Service Unavailable", "529 Overloaded", "301 Moved Permanently", "302 Found", "303 See Other",
	"307 Temporary Redirect", "308 Permanent Redirect"}

// hostileReply is one hostile response shape with the key planted where
// fields says.
func hostileReply(api string, shape, form, fields uint8, pad uint16, chunk uint8, filler string) func(n int) []byte {
	key := hostileKey
	plant := keyForm(key, form, pad)
	fill := safe(filler)
	// in is the text of a field: the plant (with filler and padding
	// around it) when bit says so, else filler.
	in := func(bit uint8) string {
		if fields&bit == 0 {
			return fill
		}
		return fill + strings.Repeat("p", int(pad)%250) + plant
	}
	size := int(chunk%16) + 1
	anth := api == "anthropic"
	done := func() []byte {
		if anth {
			return sse(anthropicText("done"))
		}
		return sse(openaiText("done"))
	}
	errBody := func() string {
		if anth {
			return `{"type":"error","error":{"type":"` + in(32) + `","message":"` + in(64) + `"}}`
		}
		switch chunk % 3 {
		case 1:
			return `{"error":"` + in(32) + `"}`
		case 2:
			return `{"message":"` + in(32) + `"}`
		}
		return `{"error":{"message":"` + in(32) + `","type":"` + in(64) + `","code":"` + in(128) + `","param":"` + in(16) + `"}}`
	}
	switch shape % 9 {
	case 0: // an HTTP error: reason phrase, headers, body
		status := statuses[int(pad)%len(statuses)]
		if fields&1 != 0 {
			status = status[:3] + " " + in(1)
		}
		var h [][2]string
		ct := "application/json"
		if fields&16 != 0 {
			ct += "; charset=" + in(16)
		}
		body := errBody()
		switch chunk % 5 {
		case 3:
			ct, body = "text/plain", strings.Repeat("x", int(pad)%260)+" "+in(32)
		case 4:
			ct, body = "text/html", "<html><body><h1>Error</h1><p>"+strings.Repeat("y", int(pad)%260)+in(32)+"</p></body></html>"
		}
		h = append(h, [2]string{"Content-Type", ct})
		if fields&2 != 0 {
			h = append(h, [2]string{"Location", "http://127.0.0.2:1/v1/" + in(2)})
		}
		if fields&4 != 0 {
			h = append(h, [2]string{"Retry-After", in(4)}, [2]string{"retry-after-ms", in(4)})
		}
		if fields&8 != 0 {
			h = append(h, [2]string{"X-Leak", in(8)}, [2]string{"WWW-Authenticate", "Bearer error=" + in(8)}, [2]string{"x-should-retry", in(8)})
		}
		return func(int) []byte { return response(status, h, body) }
	case 1: // 200, not an event stream
		cts := []string{"text/html", "text/plain", "application/json", "application/json", "application/xml"}
		ct := cts[int(chunk)%len(cts)]
		body := strings.Repeat("z", int(pad)%260) + " " + in(1)
		switch {
		case ct == "application/json" && chunk%2 == 0:
			body = errBody()
		case ct == "application/json":
			body = `{"id":"` + in(1) + `","choices":[{"message":{"content":"` + in(2) + `"}}]}`
		}
		return func(int) []byte { return response("200 OK", [][2]string{{"Content-Type", ct}}, body) }
	case 2: // streamed text, the plant cut into deltas
		text := strings.Split("a "+in(1)+" b", "")
		var deltas []string
		for s := strings.Join(text, ""); len(s) > 0; {
			k := min(size, len(s))
			deltas = append(deltas, s[:k])
			s = s[k:]
		}
		return func(int) []byte {
			if anth {
				return sse(anthropicText(deltas...))
			}
			return sse(openaiText(deltas...))
		}
	case 3: // a tool call: arguments, name, id
		name := "send_message"
		if fields&4 != 0 {
			name = in(4)
		}
		args := `{"to":"USER","message":"` + in(2) + `"}`
		id := "call_" + safe(filler)
		if fields&8 != 0 {
			id = in(8)
		}
		return func(n int) []byte {
			if n > 0 {
				return done()
			}
			if anth {
				return sse(anthropicCall(id, name, args, size))
			}
			return sse(openaiCall(name, args, size))
		}
	case 4: // an error event after HTTP 200
		return func(int) []byte {
			if anth {
				return sse(anthropicStart + "event: error_" + in(1) + "\ndata: " + errBody() + "\n\n")
			}
			return sse(`data: {"choices":[{"index":0,"delta":{"content":"` + in(1) + `"},"finish_reason":null}]}` + "\n\n" +
				"data: " + errBody() + "\n\n")
		}
	case 5: // a malformed event
		return func(int) []byte {
			pre := `data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}` + "\n\n"
			if anth {
				pre = anthropicStart
			}
			return sse(pre + "data: {not json " + in(1) + "\n\n")
		}
	case 6: // the stream cut, cleanly or not
		return func(int) []byte {
			body := openaiText("a ", in(1))
			if anth {
				body = anthropicText("a ", in(1))
			}
			body = body[:len(body)-40]
			r := response("200 OK", [][2]string{{"Content-Type", "text/event-stream"}}, body)
			if fields&2 != 0 {
				r = bytes.Replace(r, []byte(fmt.Sprintf("Content-Length: %d", len(body))), []byte(fmt.Sprintf("Content-Length: %d", len(body)+100)), 1)
			}
			return r
		}
	case 7: // a response net/http cannot parse
		return func(int) []byte {
			switch chunk % 3 {
			case 0:
				return []byte("HTTP/1.1 4" + in(1) + " x\r\n\r\n")
			case 1:
				return []byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n" + in(1) + "\r\n\r\n")
			}
			return []byte(in(1) + "\r\n\r\n")
		}
	default: // comments and unknown fields around a good answer
		return func(int) []byte {
			ok := openaiText("fine")
			if anth {
				ok = anthropicText("fine")
			}
			return sse(": " + in(1) + "\n" + "x-" + in(2) + ": 1\n" + "id: " + in(4) + "\n\n" + ok)
		}
	}
}

// FuzzKeyNeverLeaks plants the key in every field and header of every
// response shape (hostileReply) and runs a turn against it. Its seed
// corpus (every shape, every form, fields spread) runs in go test.
func FuzzKeyNeverLeaks(f *testing.F) {
	for shape := uint8(0); shape < 9; shape++ {
		for form := uint8(0); form < 12; form++ {
			for _, api := range []uint8{0, 1} {
				fields := uint8(0xFF)
				if (shape+form)%3 == 1 {
					fields = 0x55 << (form % 2)
				}
				f.Add(api, shape, form, fields, uint16(shape)*31+uint16(form)*17, shape+form, "hostile")
			}
		}
	}
	srv := newRawServer(f)
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, api, shape, form, fields uint8, pad uint16, chunk uint8, filler string) {
		mu.Lock()
		defer mu.Unlock()
		name := "openai"
		if api%2 == 1 {
			name = "anthropic"
		}
		srv.set(hostileReply(name, shape, form, fields, pad, chunk, filler))
		o := run(t, srv, name, hostileKey)
		if l := o.leak(hostileKey); l != "" {
			t.Fatalf("%s shape %d form %d fields %#x: the key leaked: %s", name, shape%9, form%12, fields, l)
		}
	})
}
