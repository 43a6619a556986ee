package console

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

// fakeHandler answers every method with its name; events.subscribe sends
// the ready frame and one event, then waits for the client to go.
type fakeHandler struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeHandler) Handle(ctx context.Context, req *protocol.Request, out server.Stream) (any, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req.Method)
	f.mu.Unlock()
	switch req.Method {
	case "events.subscribe":
		_ = out.Event(map[string]any{"event": "subscribed"})
		_ = out.Event(map[string]any{"event": "turn.complete", "agent_id": "a1", "seq": int64(3)})
		<-ctx.Done()
		return nil, nil
	case "bad":
		return nil, protocol.Errorf(protocol.CodeNotFound, "no such thing")
	}
	return map[string]any{"method": req.Method}, nil
}

func (f *fakeHandler) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTest(t testing.TB) (*Console, *fakeHandler, *httptest.Server, *clock, *faultfs.Mem) {
	t.Helper()
	fsys := faultfs.NewMem()
	if err := fsys.MkdirAll("/h", 0o700); err != nil {
		t.Fatal(err)
	}
	h, clk := &fakeHandler{}, &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	c, err := New(Options{Handler: h, FS: fsys, Home: "/h", Logger: hclog.NewNullLogger(), Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, h, srv, clk, fsys
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// paired pairs and returns the session cookie.
func paired(t *testing.T, c *Console, srv *httptest.Server) *http.Cookie {
	t.Helper()
	code, _, err := c.Pair()
	if err != nil {
		t.Fatal(err)
	}
	res, err := noRedirect.Get(srv.URL + "/pair?code=" + code)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("pairing: %d", res.StatusCode)
	}
	for _, ck := range res.Cookies() {
		if ck.Name == CookieName {
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || len(ck.Value) != 64 {
				t.Fatalf("the session cookie: %+v", ck)
			}
			return ck
		}
	}
	t.Fatal("pairing set no cookie")
	return nil
}

func do(t *testing.T, srv *httptest.Server, method, path string, ck *http.Cookie, header bool, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if ck != nil {
		req.AddCookie(ck)
	}
	if header {
		req.Header.Set(HeaderName, "1")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestEveryRequestNeedsASession: without a session, a forged one or a
// revoked one, every path is 401 and no method runs.
func TestEveryRequestNeedsASession(t *testing.T) {
	c, h, srv, _, _ := newTest(t)
	forged := &http.Cookie{Name: CookieName, Value: strings.Repeat("ab", 32)}
	for _, ck := range []*http.Cookie{nil, forged} {
		for _, p := range []struct{ method, path string }{{"GET", "/"}, {"GET", "/static/app.js"}, {"POST", "/api/call"}, {"GET", "/api/events"}} {
			code, body := do(t, srv, p.method, p.path, ck, true, `{"id":1,"method":"agent.list"}`)
			if code != http.StatusUnauthorized || strings.Contains(body, "agent.list") {
				t.Errorf("%s %s with cookie %v: %d %q", p.method, p.path, ck != nil, code, body)
			}
		}
	}
	ck := paired(t, c, srv)
	if code, body := do(t, srv, "POST", "/api/call", ck, true, `{"id":1,"method":"agent.list"}`); code != 200 || !strings.Contains(body, `"result":{"method":"agent.list"}`) {
		t.Fatalf("a paired call: %d %s", code, body)
	}
	if n, err := c.Revoke(); err != nil || n != 1 {
		t.Fatalf("Revoke = %d, %v", n, err)
	}
	if code, _ := do(t, srv, "POST", "/api/call", ck, true, `{"id":1,"method":"agent.list"}`); code != http.StatusUnauthorized {
		t.Fatalf("a revoked session: %d", code)
	}
	if got := h.called(); len(got) != 1 {
		t.Fatalf("methods run: %v, want the paired call only", got)
	}
}

// TestPairingLinks: a link works once, within 5 minutes; pairing attempts
// are rate-limited; a session survives a restart of the console (its hash
// is in console.json) and the secret itself is not stored.
func TestPairingLinks(t *testing.T) {
	c, _, srv, clk, fsys := newTest(t)
	code, _, _ := c.Pair()
	if res, _ := noRedirect.Get(srv.URL + "/pair?code=" + code); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("first use: %d", res.StatusCode)
	}
	if res, _ := noRedirect.Get(srv.URL + "/pair?code=" + code); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second use: %d", res.StatusCode)
	}
	late, _, _ := c.Pair()
	clk.add(PairFor + time.Second)
	if res, _ := noRedirect.Get(srv.URL + "/pair?code=" + late); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after 5 minutes: %d", res.StatusCode)
	}
	clk.add(time.Minute) // a new minute for the limiter
	limited := false
	for range pairLimit + 1 {
		res, _ := noRedirect.Get(srv.URL + "/pair?code=guess")
		if res.StatusCode == http.StatusTooManyRequests {
			limited = true
		}
	}
	if !limited {
		t.Fatal("pairing attempts are not rate-limited")
	}
	clk.add(time.Minute)
	ck := paired(t, c, srv)
	c2, err := New(Options{Handler: &fakeHandler{}, FS: fsys, Home: "/h", Logger: hclog.NewNullLogger(), Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(c2)
	defer srv2.Close()
	if code, _ := do(t, srv2, "POST", "/api/call", ck, true, `{"id":1,"method":"agent.list"}`); code != 200 {
		t.Fatalf("the session after a restart: %d", code)
	}
	f, _ := fsys.OpenFile("/h/console.json", 0, 0)
	b, _ := io.ReadAll(f)
	f.Close()
	if strings.Contains(string(b), ck.Value) || !strings.Contains(string(b), hash(ck.Value)) {
		t.Fatalf("console.json: %s", b)
	}
}

// TestStateChangesNeedTheHeader: a POST without the console's header (a
// cross-site form) is refused before any method runs; errors keep the
// socket's codes; streaming methods are not calls.
func TestStateChangesNeedTheHeader(t *testing.T) {
	c, h, srv, _, _ := newTest(t)
	ck := paired(t, c, srv)
	if code, _ := do(t, srv, "POST", "/api/call", ck, false, `{"id":1,"method":"agent.terminate","params":{"agent_id":"a"}}`); code != http.StatusForbidden {
		t.Fatalf("without the header: %d", code)
	}
	if len(h.called()) != 0 {
		t.Fatalf("a method ran: %v", h.called())
	}
	if _, body := do(t, srv, "POST", "/api/call", ck, true, `{"id":7,"method":"bad"}`); body != `{"id":7,"error":{"code":1,"message":"no such thing"}}`+"\n" {
		t.Fatalf("an error: %q", body)
	}
	if _, body := do(t, srv, "POST", "/api/call", ck, true, `{"id":1,"method":`); !strings.Contains(body, `"code":2`) {
		t.Fatalf("a malformed request: %q", body)
	}
	if _, body := do(t, srv, "POST", "/api/call", ck, true, `{"id":1,"method":"events.subscribe"}`); !strings.Contains(body, "/api/events") {
		t.Fatalf("a streaming method as a call: %q", body)
	}
}

// TestEventsStream: /api/events is events.subscribe as server-sent events,
// each a frame of the socket's JSON framing.
func TestEventsStream(t *testing.T) {
	c, _, srv, _, _ := newTest(t)
	ck := paired(t, c, srv)
	req, _ := http.NewRequest("GET", srv.URL+"/api/events?deltas=1", nil)
	req.AddCookie(ck)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(res.Body)
	var lines []string
	for len(lines) < 2 && sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || lines[0] != `data: {"event":{"event":"subscribed"}}` || !strings.Contains(lines[1], `"event":"turn.complete"`) {
		t.Fatalf("the stream: %q", lines)
	}
}
