package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

//go:embed static
var assets embed.FS

// CookieName is the session cookie; HeaderName the header only the
// console's own pages send (state-changing requests need it).
const (
	CookieName = "warren_session"
	HeaderName = "X-Warren-Console"
)

// maxBody bounds a request body (a request line of the socket's size).
const maxBody = 9 << 20

// Options configure a Console.
type Options struct {
	// Handler serves the socket's methods (the daemon's).
	Handler server.Handler
	FS      faultfs.FS
	Home    string // console.json is here
	Logger  hclog.Logger
	// Secure marks the cookie Secure (the listener has TLS).
	Secure bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Console is the web console's HTTP handler (doc.go).
type Console struct {
	opts Options
	acc  *access
	mux  *http.ServeMux
}

// New makes the console, reading its sessions.
func New(o Options) (*Console, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	acc, err := loadAccess(o.FS, filepath.Join(o.Home, "console.json"), o.Now)
	if err != nil {
		return nil, err
	}
	c := &Console{opts: o, acc: acc, mux: http.NewServeMux()}
	static, _ := fs.Sub(assets, "static")
	files := http.FileServerFS(static)
	c.mux.HandleFunc("GET /pair", c.pair)
	c.mux.Handle("GET /{$}", c.session(files))
	c.mux.Handle("GET /static/", c.session(http.StripPrefix("/static/", files)))
	c.mux.Handle("POST /api/call", c.session(c.state(http.HandlerFunc(c.call))))
	c.mux.Handle("GET /api/events", c.session(http.HandlerFunc(c.events)))
	return c, nil
}

// Pair makes a one-time pairing code (for console.pair).
func (c *Console) Pair() (string, time.Time, error) { return c.acc.newPairing() }

// Revoke ends every session (console.revoke).
func (c *Console) Revoke() (int, error) { return c.acc.revoke() }

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	c.mux.ServeHTTP(w, r)
}

// pair consumes a pairing code and sets the session cookie.
func (c *Console) pair(w http.ResponseWriter, r *http.Request) {
	secret, err := c.acc.pair(r.URL.Query().Get("code"))
	switch {
	case errors.Is(err, ErrRateLimited):
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	case errors.Is(err, ErrBadPairing):
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	case err != nil:
		c.opts.Logger.Error("console: pairing", "err", err)
		http.Error(w, "pairing failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: secret, Path: "/", HttpOnly: true, Secure: c.opts.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(SessionFor / time.Second)})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// session refuses a request without a live session.
func (c *Console) session(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(CookieName)
		if err != nil || !c.acc.valid(ck.Value) {
			http.Error(w, "not paired: run `warren console` on the daemon's machine and open the link it prints", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// state refuses a state-changing request that lacks the console's header
// (a cross-site form or fetch cannot set it without a preflight, which is
// never answered).
func (c *Console) state(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderName) != "1" {
			http.Error(w, "a request that changes state needs the header "+HeaderName+": 1 (the console's pages send it)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// call serves one of the socket's methods: the body is a request line of
// the socket's JSON framing, the answer its result or error frame.
func (c *Console) call(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "request body: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	req, err := protocol.DecodeJSONRequest(body)
	if err != nil {
		c.writeFrame(w, &protocol.Frame{Kind: protocol.KindError, Error: protocol.AsError(err)})
		return
	}
	if req.Method == "events.subscribe" || req.Method == "agent.stream" {
		c.writeFrame(w, &protocol.Frame{Kind: protocol.KindError, ID: req.ID, Error: protocol.Errorf(protocol.CodeInvalid,
			"%s streams: use GET /api/events (events.subscribe), or agent.send", req.Method)})
		return
	}
	res, err := c.opts.Handler.Handle(r.Context(), req, noStream{})
	if err != nil {
		c.writeFrame(w, &protocol.Frame{Kind: protocol.KindError, ID: req.ID, Error: protocol.AsError(err)})
		return
	}
	c.writeFrame(w, &protocol.Frame{Kind: protocol.KindResult, ID: req.ID, Result: res})
}

func (c *Console) writeFrame(w http.ResponseWriter, f *protocol.Frame) {
	line, err := protocol.AppendJSONFrame(nil, f)
	if err != nil {
		line, _ = protocol.AppendJSONFrame(nil, &protocol.Frame{Kind: protocol.KindError, ID: f.ID,
			Error: protocol.Errorf(protocol.CodeInternal, "encoding the answer: %v", err)})
	}
	_, _ = w.Write(line)
}

// events serves events.subscribe as server-sent events: each event frame
// of the socket's JSON framing is one "data:" line. Query: agent_id,
// since_seq, deltas=1.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	q := r.URL.Query()
	params := protocol.Params{"ready": true, "deltas": q.Get("deltas") == "1"}
	if id := q.Get("agent_id"); id != "" {
		params["agent_id"] = id
	}
	if s := q.Get("since_seq"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "since_seq must be a whole number of 0 or more", http.StatusBadRequest)
			return
		}
		params["since_seq"] = n
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	st := &sseStream{w: w, fl: fl}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	_, err := c.opts.Handler.Handle(ctx, &protocol.Request{Method: "events.subscribe", Params: params}, st)
	if err != nil && ctx.Err() == nil {
		_ = st.frame(&protocol.Frame{Kind: protocol.KindError, Error: protocol.AsError(err)})
	}
}

// noStream is the Stream of a method answered with a result.
type noStream struct{}

func (noStream) Chunk(string) error { return server.ErrNotStreaming }
func (noStream) Event(any) error    { return server.ErrNotStreaming }

// sseStream writes event frames as server-sent events.
type sseStream struct {
	mu sync.Mutex
	w  io.Writer
	fl http.Flusher
}

func (s *sseStream) Chunk(text string) error {
	return s.frame(&protocol.Frame{Kind: protocol.KindChunk, Chunk: text})
}

func (s *sseStream) Event(ev any) error {
	m, err := protocol.Normalize(ev)
	if err != nil {
		return err
	}
	mm, ok := m.(map[string]any)
	if !ok {
		return fmt.Errorf("an event must be an object, got %T", m)
	}
	return s.frame(&protocol.Frame{Kind: protocol.KindEvent, Event: mm})
}

func (s *sseStream) frame(f *protocol.Frame) error {
	line, err := protocol.AppendJSONFrame([]byte("data: "), f)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(append(line[:len(line)-1], '\n', '\n')); err != nil {
		return server.ErrClientGone
	}
	s.fl.Flush()
	return nil
}
