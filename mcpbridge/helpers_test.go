package mcpbridge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
	wsrv "github.com/warren-dev/warren/server"
)

// testBound bounds every wait in these tests (a hang fails, never blocks).
const testBound = 20 * time.Second

// fakeDaemon is a real Unix socket server standing in for the daemon's
// tool.call with a credential (engine/agentauth.go): it records every
// request and answers from its handle function.
type fakeDaemon struct {
	sock   string
	mu     sync.Mutex
	reqs   []map[string]any
	active int // requests being handled now
	peak   int // the most handled at once
	handle func(ctx context.Context, p map[string]any) (any, error)
}

func startFakeDaemon(t testing.TB, handle func(ctx context.Context, p map[string]any) (any, error)) *fakeDaemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "mb")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDaemon{sock: filepath.Join(dir, "d.sock"), handle: handle}
	srv := wsrv.New(wsrv.Config{SocketPath: f.sock}, wsrv.HandlerFunc(
		func(ctx context.Context, req *protocol.Request, _ wsrv.Stream) (any, error) {
			if req.Method != "tool.call" {
				return nil, protocol.Errorf(protocol.CodeUnknownMethod, "fake daemon: unexpected method %s", req.Method)
			}
			f.mu.Lock()
			f.reqs = append(f.reqs, map[string]any(req.Params))
			f.active++
			f.peak = max(f.peak, f.active)
			f.mu.Unlock()
			defer func() {
				f.mu.Lock()
				f.active--
				f.mu.Unlock()
			}()
			return f.handle(ctx, req.Params)
		}), nil)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = os.RemoveAll(dir)
	})
	return f
}

func (f *fakeDaemon) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.reqs...)
}

// mcpClient drives a Serve over pipes, as an agent CLI drives the bridge.
type mcpClient struct {
	t      *testing.T
	in     *io.PipeWriter
	lines  chan string
	served chan error // Serve's return
}

func startBridge(t *testing.T, caller Caller, maxLine int) *mcpClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &mcpClient{t: t, in: inW, lines: make(chan string, 100), served: make(chan error, 1)}
	go func() {
		err := Serve(context.Background(), inR, outW, Options{Caller: caller, Version: "test", MaxLine: maxLine})
		outW.Close()
		c.served <- err
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 32<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() { inW.Close() })
	return c
}

func (c *mcpClient) sendRaw(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("writing to the bridge: %v", err)
	}
}

func (c *mcpClient) send(v map[string]any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// request sends a request with id and params.
func (c *mcpClient) request(id any, method string, params map[string]any) {
	c.t.Helper()
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	c.send(m)
}

// recv returns the next message the bridge wrote.
func (c *mcpClient) recv() map[string]any {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the bridge closed its output")
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			c.t.Fatalf("the bridge wrote a line that is not JSON: %q: %v", line, err)
		}
		if m["jsonrpc"] != "2.0" {
			c.t.Fatalf("the bridge wrote %q without jsonrpc 2.0", line)
		}
		return m
	case <-time.After(testBound):
		c.t.Fatal("no message from the bridge in time")
	}
	return nil
}

// call sends a request and returns its reply (which must carry the id).
func (c *mcpClient) call(id any, method string, params map[string]any) map[string]any {
	c.t.Helper()
	c.request(id, method, params)
	m := c.recv()
	if !sameID(m["id"], id) {
		c.t.Fatalf("reply %v has id %v, want %v", m, m["id"], id)
	}
	return m
}

func sameID(got, want any) bool {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	return string(g) == string(w)
}

// result returns a reply's result, failing on an error reply.
func result(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("reply %v has no result", m)
	}
	return r
}

// rpcErr returns a reply's error, failing on a result.
func rpcErr(t *testing.T, m map[string]any, code int) map[string]any {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("reply %v is not an error, want code %d", m, code)
	}
	if c, _ := e["code"].(float64); int(c) != code {
		t.Fatalf("error %v has code %v, want %d", e, e["code"], code)
	}
	if s, _ := e["message"].(string); s == "" {
		t.Fatalf("error %v has no message", e)
	}
	return e
}

// initialize runs the handshake with a protocol version.
func (c *mcpClient) initialize(version string) map[string]any {
	c.t.Helper()
	r := result(c.t, c.call(0, "initialize", map[string]any{"protocolVersion": version,
		"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "test", "version": "1"}}))
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return r
}

// toolCall calls a tool and returns the reply.
func (c *mcpClient) toolCall(id any, tool string, args any) map[string]any {
	c.t.Helper()
	p := map[string]any{"name": tool}
	if args != nil {
		p["arguments"] = args
	}
	return c.call(id, "tools/call", p)
}
