package acp

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/provider"
)

// FuzzAgentOutput feeds arbitrary agent output through the connection and
// the session's handlers (updates, permission requests under every
// policy, other requests): nothing panics, and the connection ends with an
// error or at EOF.
func FuzzAgentOutput(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"title":"mcp__warren__send_message"},"options":[{"optionId":"a","kind":"allow_once"}]}}`,
		`{"jsonrpc":"2.0","id":"x","method":"session/request_permission","params":{"options":null}}`,
		`{"jsonrpc":"2.0","id":8,"method":"fs/read_text_file","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":99999999999999999999999,"result":{}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"content":7}}}`,
		"not json\n",
		`{"jsonrpc":"1.0"}`,
		`{"jsonrpc":"2.0"}`,
	} {
		f.Add([]byte(seed + "\n"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, policy := range []string{PermAllow, PermDeny, PermAsk} {
			runFuzzInput(t, data, policy)
		}
	})
}

func runFuzzInput(t *testing.T, data []byte, policy string) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	defer inW.Close()
	go func() { _, _ = io.Copy(io.Discard, inR) }()
	p := New(Options{Name: "fuzz", MaxLine: 1 << 16, MaxTurnUpdates: 50, MaxTurnOutput: 1 << 10})
	s := &Session{p: p, st: Settings{Permissions: policy}, log: hclog.NewNullLogger(), id: "s"}
	t1 := &turnState{onChunk: func(string) {}, perms: make(chan *message, 16), flood: make(chan struct{}), maxText: 1 << 10}
	s.turn = t1
	c := newConn(inW, bufio.NewReader(bytes.NewReader(data)), 1<<16, nil)
	c.handle = func(m *message) { s.handle(c, m) }
	c.readLoop(c.out)
	if c.Err() == nil {
		t.Fatal("the connection did not end at the input's end")
	}
	tools := &fakeTools{fn: func(string, map[string]any) (map[string]any, error) {
		return map[string]any{"response": "allow"}, nil
	}}
	for {
		select {
		case m := <-t1.perms:
			_ = s.permission(context.Background(), c, t1, provider.TurnIO{Tools: tools}, m)
		default:
			return
		}
	}
}
