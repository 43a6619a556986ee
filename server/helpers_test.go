package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/warren-dev/warren/protocol"
)

// fakeHandler serves the test methods.
type fakeHandler struct {
	release  chan struct{} // "wait" blocks until closed
	started  chan string   // "block" and "wait" report their start here
	ctxDone  chan string   // "block" reports its context cancellation here
	floodErr chan error    // "flood" reports the error that stopped it
}

func newFake() *fakeHandler {
	return &fakeHandler{release: make(chan struct{}), started: make(chan string, 100), ctxDone: make(chan string, 100), floodErr: make(chan error, 10)}
}

func (f *fakeHandler) Handle(ctx context.Context, req *protocol.Request, out Stream) (any, error) {
	p := req.Params
	switch req.Method {
	case "echo":
		return map[string]any(p), nil
	case "trivial":
		return map[string]any{"ok": true}, nil
	case "nil":
		return nil, nil
	case "greet":
		name, err := p.String("name")
		if err != nil {
			return nil, err
		}
		n, err := p.OptInt("times", 1)
		if err != nil {
			return nil, err
		}
		return map[string]any{"greeting": fmt.Sprintf("hello %s x%d", name, n)}, nil
	case "wait":
		tag, _ := p.OptString("tag", "")
		f.started <- tag
		select {
		case <-f.release:
			return map[string]any{"tag": tag}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "block":
		tag, _ := p.OptString("tag", "")
		f.started <- tag
		<-ctx.Done()
		f.ctxDone <- tag
		return nil, ctx.Err()
	case "stream":
		n, err := p.OptInt("n", 3)
		if err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			if err := out.Chunk(fmt.Sprintf("c%d", i)); err != nil {
				return nil, err
			}
		}
		if err := out.Event(struct {
			Seq int `json:"seq"`
		}{n}); err != nil {
			return nil, err
		}
		return map[string]any{"ignored": true}, nil
	case "streamfail":
		if err := out.Chunk("partial"); err != nil {
			return nil, err
		}
		return nil, protocol.Errorf(protocol.CodeNotFound, "agent %q not found", "ghost")
	case "chunkplain":
		return map[string]any{"err": fmt.Sprint(out.Chunk("x"))}, nil
	case "flood":
		big := strings.Repeat("x", 1<<20)
		for {
			if err := out.Chunk(big); err != nil {
				f.floodErr <- err
				return nil, err
			}
		}
	case "fail":
		return nil, errors.New("disk on fire")
	case "panic":
		panic("handler bug")
	case "huge":
		// A result whose encoding is over the frame limit.
		return map[string]any{"data": strings.Repeat("x", protocol.MaxFrame)}, nil
	case "badresult":
		return map[string]any{"ch": make(chan int)}, nil
	}
	return nil, protocol.Errorf(protocol.CodeUnknownMethod, "unknown method: %s", req.Method)
}

var testStreaming = map[string]bool{"stream": true, "streamfail": true, "block": true, "flood": true}

type testServer struct {
	*Server
	path    string
	fake    *fakeHandler
	logs    *syncBuffer
	served  chan error
	stopped bool
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// shortDir returns a short temporary directory (t.TempDir paths can exceed
// the 107-byte socket limit).
func shortDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startServer starts a server with the fake handler; mod adjusts the config.
func startServer(t testing.TB, mod func(*Config)) *testServer {
	t.Helper()
	cfg := Config{SocketPath: filepath.Join(shortDir(t), "d.sock"), StreamingMethods: testStreaming}
	if mod != nil {
		mod(&cfg)
	}
	logs := &syncBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})
	fake := newFake()
	ts := &testServer{Server: New(cfg, fake, logger), path: cfg.SocketPath, fake: fake, logs: logs, served: make(chan error, 1)}
	if err := ts.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { ts.served <- ts.Serve(context.Background()) }()
	t.Cleanup(func() { ts.stop(t) })
	return ts
}

func (ts *testServer) stop(t testing.TB) {
	if ts.stopped {
		return
	}
	ts.stopped = true
	if err := ts.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if err := <-ts.served; err != nil {
		t.Errorf("serve: %v", err)
	}
}

func dialRaw(t testing.TB, path string) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// jsonExchange sends body Substrat-style (write, half-close) and returns
// every reply line, read to EOF.
func jsonExchange(t testing.TB, path string, body []byte) []map[string]any {
	t.Helper()
	c := dialRaw(t, path)
	if _, err := c.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	return readJSONLines(t, c)
}

func readJSONLines(t testing.TB, r io.Reader) []map[string]any {
	t.Helper()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("reply line %q is not a JSON object: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("reply does not end with a newline: %q", data)
	}
	return out
}

// wantJSONError checks a single-line error reply.
func wantJSONError(t testing.TB, lines []map[string]any, id any, code int, mention string) {
	t.Helper()
	if len(lines) != 1 {
		t.Fatalf("got %d reply lines %v, want 1", len(lines), lines)
	}
	l := lines[0]
	if v, ok := l["id"]; !ok || v != id {
		t.Fatalf("reply id = %#v (present %v), want %#v: %v", v, ok, id, l)
	}
	e, _ := l["error"].(map[string]any)
	if e == nil || e["code"] != float64(code) {
		t.Fatalf("reply %v, want error code %d", l, code)
	}
	if msg, _ := e["message"].(string); !bytes.Contains([]byte(msg), []byte(mention)) {
		t.Fatalf("error message %q does not mention %q", msg, mention)
	}
}

// writeNative writes one native request frame on c.
func writeNative(t testing.TB, c net.Conn, req *protocol.Request) {
	t.Helper()
	b, err := protocol.EncodeNativeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// readNative reads one frame sent by the server.
func readNative(t testing.TB, r io.Reader) *protocol.Frame {
	t.Helper()
	payload, err := protocol.ReadNativeFrame(r, protocol.MaxFrame)
	if err != nil {
		t.Fatalf("read native frame: %v", err)
	}
	f, err := protocol.DecodeNativeFrame(payload)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// wantEOF reads r to the end and fails if anything but EOF comes.
func wantEOF(t testing.TB, r io.Reader) {
	t.Helper()
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading to EOF: %v", err)
	}
	if len(rest) != 0 {
		t.Fatalf("unexpected trailing data % x", rest)
	}
}

func wantCode(t testing.TB, err error, code int) *protocol.Error {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("error = %v (%T), want *protocol.Error code %d", err, err, code)
	}
	return pe
}

func dialClient(t testing.TB, path string) *protocol.Client {
	t.Helper()
	c, err := protocol.Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
