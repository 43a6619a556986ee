package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBadInputGetsJSONRPCErrors: garbage, batches, wrong versions, bad ids
// and unknown methods get the JSON-RPC error the spec gives them (with the
// request's id when it can be read); notifications and responses get no
// reply; the bridge goes on serving after each.
func TestBadInputGetsJSONRPCErrors(t *testing.T) {
	c, d := liveBridge(t)
	cases := []struct {
		line string
		code int
		id   any
	}{
		{`garbage`, CodeParseError, nil},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"`, CodeParseError, nil},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, CodeInvalidRequest, nil},
		{`[1,`, CodeParseError, nil},
		{`"just a string"`, CodeInvalidRequest, nil},
		{`{"jsonrpc":"1.0","id":2,"method":"ping"}`, CodeInvalidRequest, 2.0},
		{`{"id":3,"method":"ping"}`, CodeInvalidRequest, 3.0},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, CodeInvalidRequest, nil},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, CodeInvalidRequest, nil},
		{`{"jsonrpc":"2.0","id":"m","method":5}`, CodeInvalidRequest, "m"},
		{`{"jsonrpc":"2.0","id":4}`, CodeInvalidRequest, 4.0},
		{`{"jsonrpc":"2.0","id":5,"method":"server/discover"}`, CodeMethodNotFound, 5.0},
		{`{"jsonrpc":"2.0","id":6,"method":"resources/list"}`, CodeMethodNotFound, 6.0},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[1]}`, -1, 7.0}, // tools/list ignores params
		{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":[1]}`, CodeInvalidParams, 8.0},
		{`{"jsonrpc":"2.0","id":9,"method":"initialize","params":"x"}`, CodeInvalidParams, 9.0},
		{"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{\"name\":\"send_message\",\"arguments\":{\"recipient\":\"p\",\"text\":\"\xff\xfe\"}}}", -1, 10.0},
	}
	for _, tc := range cases {
		c.sendRaw(tc.line)
		m := c.recv()
		if !sameID(m["id"], tc.id) {
			t.Errorf("%s: reply id %v, want %v", tc.line, m["id"], tc.id)
		}
		if tc.code == -1 {
			result(t, m)
			continue
		}
		rpcErr(t, m, tc.code)
	}
	// No reply to these; the ping after them is answered next.
	for _, line := range []string{
		``, `   `, "\r",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"notifications/whatever","params":{"x":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":"bad"}`,
		`{"jsonrpc":"2.0","id":77,"result":{}}`,
		`{"jsonrpc":"2.0","id":78,"error":{"code":1,"message":"x"}}`,
		`{"method":"notifications/initialized"}`,
	} {
		c.sendRaw(line)
	}
	result(t, c.call("after", "ping", nil))
	if n := len(d.requests()); n != 1 {
		t.Fatalf("the daemon got %d requests, want only the valid tools/call", n)
	}
}

// TestOverlongMessageIsRefusedWithItsID: a line over the limit is consumed
// and refused with -32600 (with its id, read from the line's start); the
// daemon never sees it and the next request is served.
func TestOverlongMessageIsRefusedWithItsID(t *testing.T) {
	d := startFakeDaemon(t, agentDaemon)
	c := startBridge(t, NewDaemon(Config{Socket: d.sock, Credential: "wac_live"}), 4096)
	huge := strings.Repeat("x", 100_000)
	c.sendRaw(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"send_message","arguments":{"recipient":"p","text":"` + huge + `"}}}`)
	e := rpcErr(t, c.recv(), CodeInvalidRequest)
	if !strings.Contains(e["message"].(string), "over the bridge's limit of 4096 bytes") {
		t.Errorf("message %q", e["message"])
	}
	// The id after the params cannot be recovered: null.
	c.sendRaw(`{"jsonrpc":"2.0","params":{"x":"` + huge + `"},"id":43,"method":"tools/call"}`)
	if m := c.recv(); m["id"] != nil {
		t.Errorf("id %v, want null", m["id"])
	}
	result(t, c.call(44, "ping", nil))
	if n := len(d.requests()); n != 0 {
		t.Fatalf("the daemon got %d requests", n)
	}
}

// TestCancelledCallIsCancelledAndUnanswered: notifications/cancelled
// cancels a call in flight (the daemon's request context ends) and the
// call gets no reply; ping is answered while the call runs.
func TestCancelledCallIsCancelledAndUnanswered(t *testing.T) {
	ended := make(chan error, 1)
	d := startFakeDaemon(t, func(ctx context.Context, p map[string]any) (any, error) {
		if p["tool"] == "await_input" {
			<-ctx.Done()
			ended <- ctx.Err()
			return nil, ctx.Err()
		}
		return agentDaemon(ctx, p)
	})
	c := startBridge(t, NewDaemon(Config{Socket: d.sock, Credential: "wac_live"}), 0)
	c.request("slow", "tools/call", map[string]any{"name": "await_input", "arguments": map[string]any{"kind": "k", "prompt": "p", "timeout": 60}})
	waitFor(t, func() bool { return len(d.requests()) == 1 })
	result(t, c.call("p1", "ping", nil)) // answered while the call blocks
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": "slow", "reason": "user"}})
	select {
	case <-ended:
	case <-time.After(testBound):
		t.Fatal("the daemon's request was not cancelled")
	}
	// Calls are answered in order: had the cancelled one been answered,
	// its reply would come before this one.
	if m := c.toolCall("next", "list_children", nil); m["id"] != "next" {
		t.Fatalf("got %v", m)
	}
}

// TestCallsReachTheDaemonOneAtATimeInOrder: calls sent back to back reach
// the daemon in the order sent, never two at once, and each is answered.
func TestCallsReachTheDaemonOneAtATimeInOrder(t *testing.T) {
	c, d := liveBridge(t)
	const n = 20
	for i := range n {
		c.request(i, "tools/call", map[string]any{"name": "send_message", "arguments": map[string]any{"recipient": "p", "text": fmt.Sprint(i)}})
	}
	for i := range n {
		m := c.recv()
		if !sameID(m["id"], i) {
			t.Fatalf("reply %d has id %v", i, m["id"])
		}
		result(t, m)
	}
	reqs := d.requests()
	for i, p := range reqs {
		if got := p["arguments"].(map[string]any)["text"]; got != fmt.Sprint(i) {
			t.Fatalf("the daemon's call %d carried %v", i, got)
		}
	}
	if d.peak != 1 {
		t.Fatalf("the daemon handled %d calls at once, want 1", d.peak)
	}
}

// TestConnectionBrokenDuringACall: a daemon whose connection drops after
// it read the request gives -32001 saying the outcome is unknown.
func TestConnectionBrokenDuringACall(t *testing.T) {
	dir, err := os.MkdirTemp("", "mb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4)
			_, _ = io.ReadFull(conn, buf) // the request has arrived
			conn.Close()
		}
	}()
	c := startBridge(t, NewDaemon(Config{Socket: sock, Credential: "wac_live"}), 0)
	e := rpcErr(t, c.toolCall(1, "send_message", map[string]any{"recipient": "p", "text": "x"}), CodeUnreachable)
	if data, _ := e["data"].(map[string]any); data["outcome"] != "unknown" || !strings.Contains(e["message"].(string), "may or may not have run") {
		t.Fatalf("error %v", e)
	}
}

// TestEndOfInputAnswersTheCallsReceived: a client that writes its
// requests and closes stdin still gets every reply; Serve returns nil.
func TestEndOfInputAnswersTheCallsReceived(t *testing.T) {
	d := startFakeDaemon(t, agentDaemon)
	var in bytes.Buffer
	for i := range 3 {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_children"}}`+"\n", i)
	}
	in.WriteString(`{"jsonrpc":"2.0","id":"last","method":"ping"}`) // no final newline
	var out bytes.Buffer
	if err := Serve(context.Background(), &in, &out, Options{Caller: NewDaemon(Config{Socket: d.sock, Credential: "wac_live"})}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d replies: %q", len(lines), out.String())
	}
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil || m["result"] == nil {
			t.Fatalf("reply %q", l)
		}
	}
}

// TestBrokenOutputEndsServe: when stdout is gone Serve returns the write
// error instead of reading on.
func TestBrokenOutputEndsServe(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	outR.Close()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), inR, outW, Options{Caller: NewDaemon(Config{})}) }()
	go func() { _, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n") }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "writing to stdout") {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(testBound):
		t.Fatal("Serve went on with a broken stdout")
	}
	inW.Close()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(time.Millisecond) // polling the fake daemon's record; it signals nothing
	}
}

// FuzzServe: any input lines, and every output line is a JSON-RPC 2.0
// message; Serve never panics.
func FuzzServe(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send_message","arguments":{"recipient":"p","text":"x"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`,
		`[{"jsonrpc":"2.0"}]`, `{"id":"x"`, "\x00\xff", `{"jsonrpc":"2.0","id":1e999,"method":"ping"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		var out bytes.Buffer
		err := Serve(context.Background(), strings.NewReader(input), &out, Options{Caller: echoCaller{}, MaxLine: 512})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil || m["jsonrpc"] != "2.0" || (m["result"] == nil) == (m["error"] == nil) {
				t.Fatalf("output line %q", l)
			}
		}
	})
}

type echoCaller struct{}

func (echoCaller) CallTool(_ context.Context, tool string, args map[string]any) (map[string]any, error) {
	return map[string]any{"tool": tool, "args": args}, nil
}

// TestContextEndStopsServe: when ctx ends (the command's SIGTERM) Serve
// returns at once though its input stays open and a call is in flight;
// the call is cancelled at the daemon and nothing more is written.
func TestContextEndStopsServe(t *testing.T) {
	ended := make(chan struct{})
	d := startFakeDaemon(t, func(ctx context.Context, p map[string]any) (any, error) {
		<-ctx.Done()
		close(ended)
		return nil, ctx.Err()
	})
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	defer outR.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, inR, outW, Options{Caller: NewDaemon(Config{Socket: d.sock, Credential: "wac_live"})})
	}()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_children"}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(d.requests()) == 1 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v, want nil for a requested stop", err)
		}
	case <-time.After(testBound):
		t.Fatal("Serve did not return when its context ended")
	}
	select {
	case <-ended:
	case <-time.After(testBound):
		t.Fatal("the call in flight was not cancelled at the daemon")
	}
}
