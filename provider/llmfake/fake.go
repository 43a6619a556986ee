// Package llmfake is a fake LLM server for offline tests: an httptest
// server speaking OpenAI Chat Completions (POST /chat/completions, also
// under /v1), the Anthropic Messages API (POST /v1/messages), the OpenAI
// Responses API (POST /responses, also under /v1; Codex's dialect with
// namespaced function calls) or the Gemini API (POST
// /v1beta/models/MODEL:streamGenerateContent?alt=sse and :generateContent,
// Gemini CLI's dialect), streaming
// the wire shapes real servers send, with the quirks of compatible servers
// on demand (fragmented or whole tool arguments, parallel calls sharing
// index 0, comment lines, a usage chunk with empty choices, an error object
// or event after HTTP 200, EOF without [DONE], 429 with Retry-After, 5xx,
// 529, a stalled stream, garbage, HTML, a huge line, an endless stream).
//
// Replies come from a queue (Push) or, when the queue is empty, from a
// Responder function; every request is recorded with its headers and body.
package llmfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// API selects the wire format.
type API string

// The APIs.
const (
	OpenAI    API = "openai"
	Anthropic API = "anthropic"
	// Responses is the OpenAI Responses API as Codex speaks it.
	Responses API = "responses"
	// Gemini is the Gemini API (generativelanguage) as Gemini CLI speaks it.
	Gemini API = "gemini"
)

// Call is a tool call the fake model makes.
type Call struct {
	ID   string
	Name string
	Args string // JSON text
	// Namespace (Responses only) is the namespace tool the function belongs
	// to: Codex offers MCP tools as {"type":"namespace","name":"mcp__warren",
	// "tools":[...]} and runs only calls that name it.
	Namespace string
}

// Reply is what the fake answers to one request.
type Reply struct {
	// Status, Header and Body make a plain (error) response when Status is
	// set and not 200.
	Status int
	Header map[string]string
	Body   string

	// A streamed reply: Text (sent in Chunk-sized deltas, default 8 bytes)
	// then Calls.
	Text  string
	Chunk int
	Calls []Call
	// Usage reported at the end (zero: computed from the sizes).
	InputTokens, OutputTokens, CachedTokens int
	// CacheWriteTokens: Anthropic's cache_creation_input_tokens (part of
	// InputTokens, as CachedTokens is).
	CacheWriteTokens int
	NoUsage          bool

	// Quirks.
	WholeArgs    bool // OpenAI: each call's arguments in one chunk (Ollama)
	SameIndex    bool // OpenAI: parallel calls all with index 0 (proxies)
	Comments     bool // ": PROCESSING" comment lines between events
	NoDone       bool // OpenAI: end after finish_reason without [DONE]
	StopAsFinish bool // OpenAI: finish_reason "stop" even with tool calls
	// CutAfter ends the stream (closing the connection) after this many
	// events; 0: never.
	CutAfter int
	// ErrorAfter sends an error object/event after this many events, then
	// ends: ErrorType/ErrorMessage (HTTP status stays 200).
	ErrorAfter   int
	ErrorType    string
	ErrorMessage string
	// Stall sends the first StallAfter events and then nothing until the
	// client goes away.
	Stall      bool
	StallAfter int
	// Raw is sent verbatim as a 200 body with RawType as Content-Type
	// (default text/event-stream); RawRepeat repeats it (endless: -1).
	Raw       string
	RawType   string
	RawRepeat int
}

// Request is one recorded request.
type Request struct {
	Method string
	Path   string
	Query  string // the raw query (Gemini: alt=sse)
	Header http.Header
	Body   []byte
	api    API
}

// JSON decodes the body.
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Responder computes a reply when the queue is empty.
type Responder func(req Request) Reply

// Server is a fake LLM server.
type Server struct {
	*httptest.Server
	api API

	mu        sync.Mutex
	queue     []Reply
	requests  []Request
	responder Responder
	// gone is closed by Close; stalled handlers wait on it or the client.
	gone chan struct{}
	once sync.Once
	// conns counts the TCP connections clients opened (keep-alive reuse
	// shows as fewer connections than requests).
	conns int
	// released receives one value each time a stalled stream ends because
	// its client went away.
	released chan struct{}
	// busy is the wall time spent in handlers of recorded requests.
	busy time.Duration
}

// New starts a fake server for api. The default responder answers "ok".
func New(api API) *Server {
	s := &Server{api: api, gone: make(chan struct{}), released: make(chan struct{}, 64)}
	s.responder = func(Request) Reply { return Reply{Text: "ok"} }
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Server.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.Server.Start()
	return s
}

// Close stops the server, releasing stalled streams.
func (s *Server) Close() {
	s.once.Do(func() { close(s.gone) })
	s.Server.CloseClientConnections()
	s.Server.Close()
}

// BaseURL is the base_url an entry uses: the server URL plus /v1 for
// OpenAI and Responses (so the endpoint is /v1/chat/completions or
// /v1/responses) and the bare URL for Anthropic (endpoint /v1/messages) and
// Gemini (GOOGLE_GEMINI_BASE_URL; endpoint /v1beta/models/...).
func (s *Server) BaseURL() string {
	if s.api == OpenAI || s.api == Responses {
		return s.URL + "/v1"
	}
	return s.URL
}

// Push queues replies, answered in order before the responder.
func (s *Server) Push(r ...Reply) {
	s.mu.Lock()
	s.queue = append(s.queue, r...)
	s.mu.Unlock()
}

// Respond sets the responder.
func (s *Server) Respond(f Responder) {
	s.mu.Lock()
	s.responder = f
	s.mu.Unlock()
}

// Requests returns the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Conns is the number of connections clients opened.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Released yields a value each time a stalled stream ended because its
// client closed the connection.
func (s *Server) Released() <-chan struct{} { return s.released }

// Count is the number of requests so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Busy is the total wall time the server spent answering recorded requests
// (from reading the body to the end of the response), so benchmarks can
// subtract the fake's own time.
func (s *Server) Busy() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 256<<20))
	req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, api: s.api}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK) // a client's connectivity probe
		return
	}
	if s.api == Gemini && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, ":countTokens") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"totalTokens":%d}`, tokens(len(body)))
		return
	}
	if r.Method != http.MethodPost || !s.routed(r.URL.Path) {
		http.Error(w, fmt.Sprintf(`{"error":{"message":"fake %s server: no route %s %s","type":"invalid_request_error"}}`, s.api, r.Method, r.URL.Path), http.StatusNotFound)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	var rep Reply
	if len(s.queue) > 0 {
		rep, s.queue = s.queue[0], s.queue[1:]
		s.mu.Unlock()
	} else {
		f := s.responder
		s.mu.Unlock()
		rep = f(req)
	}
	s.write(w, r, req, rep)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	s.mu.Lock()
	s.busy += time.Since(start)
	s.mu.Unlock()
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, req Request, rep Reply) {
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	switch {
	case rep.Status != 0 && rep.Status != http.StatusOK:
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(rep.Status)
		_, _ = io.WriteString(w, rep.Body)
	case rep.Raw != "":
		writeRaw(w, r, rep)
	case s.api == Gemini && !req.streamed():
		// :generateContent, or streamGenerateContent without alt=sse
		// (a JSON array): the chunks merged, no events.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, geminiWhole(rep, req, strings.Contains(req.Path, ":streamGenerateContent")))
	default:
		s.writeEvents(w, r, rep, s.events(rep, req))
	}
}

// writeRaw writes rep.Raw as the body, rep.RawRepeat more times (< 0:
// until the client goes).
func writeRaw(w http.ResponseWriter, r *http.Request, rep Reply) {
	ct := rep.RawType
	if ct == "" {
		ct = "text/event-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	for i := 0; rep.RawRepeat < 0 || i <= rep.RawRepeat; i++ {
		if _, err := io.WriteString(w, rep.Raw); err != nil {
			return
		}
		if r.Context().Err() != nil {
			return
		}
	}
}

// events are the server-sent events of rep in the server's API.
func (s *Server) events(rep Reply, req Request) []string {
	switch s.api {
	case OpenAI:
		return openAIEvents(rep, req)
	case Responses:
		return responsesEvents(rep, req)
	case Gemini:
		return geminiEvents(rep, req)
	default:
		return anthropicEvents(rep, req)
	}
}

// writeEvents streams events, stalling or cutting the stream where rep
// says.
func (s *Server) writeEvents(w http.ResponseWriter, r *http.Request, rep Reply, events []string) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	for i, ev := range events {
		if rep.Stall && i == rep.StallAfter {
			flush(flusher)
			select {
			case <-r.Context().Done():
				select {
				case s.released <- struct{}{}:
				default:
				}
			case <-s.gone:
			}
			return
		}
		if rep.CutAfter > 0 && i == rep.CutAfter {
			flush(flusher)
			cut(w)
			return
		}
		if rep.Comments {
			_, _ = io.WriteString(w, ": PROCESSING\n\n")
		}
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		flush(flusher)
	}
}

// routed says whether path is the API's generation endpoint.
func (s *Server) routed(path string) bool {
	switch s.api {
	case OpenAI:
		return strings.HasSuffix(path, "/chat/completions")
	case Responses:
		return strings.HasSuffix(path, "/responses")
	case Gemini:
		return strings.Contains(path, "/models/") &&
			(strings.HasSuffix(path, ":streamGenerateContent") || strings.HasSuffix(path, ":generateContent"))
	}
	return strings.HasSuffix(path, "/v1/messages")
}

func flush(f http.Flusher) {
	if f != nil {
		f.Flush()
	}
}

// cut closes the connection without ending the chunked body.
func cut(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
		}
	}
}

// split cuts s into pieces of n bytes (on rune boundaries).
func split(s string, n int) []string {
	if n <= 0 {
		n = 8
	}
	var out []string
	for len(s) > 0 {
		k := n
		if k >= len(s) {
			k = len(s)
		} else {
			for k < len(s) && (s[k]&0xC0) == 0x80 {
				k++
			}
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func tokens(n int) int { return n/4 + 1 }
