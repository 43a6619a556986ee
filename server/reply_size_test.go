package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/warren-dev/warren/protocol"
)

// TestReplyOverFrameLimitIsAnErrorJSON: a result whose JSON line is over
// the frame limit is not written (cut or whole): the client gets one
// complete error line, code 2, saying why and how to ask for less.
func TestReplyOverFrameLimitIsAnErrorJSON(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.path)
	if _, err := c.Write([]byte(`{"id":7,"method":"huge","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 64<<10 || bytes.Count(data, []byte("\n")) != 1 || data[len(data)-1] != '\n' {
		t.Fatalf("reply is %d bytes in %d lines; want one short error line", len(data), bytes.Count(data, []byte("\n")))
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("reply %q: %v", data, err)
	}
	wantJSONError(t, []map[string]any{m}, float64(7), protocol.CodeInvalid, "frame limit")
}

// TestReplyOverFrameLimitIsAnErrorNative: the same in the native framing,
// and the connection keeps serving.
func TestReplyOverFrameLimitIsAnErrorNative(t *testing.T) {
	ts := startServer(t, nil)
	cl := dialClient(t, ts.path)
	_, err := cl.Call(context.Background(), "huge", nil)
	pe := wantCode(t, err, protocol.CodeInvalid)
	if !strings.Contains(pe.Message, "frame limit") || !strings.Contains(pe.Message, "limit and since_seq") {
		t.Fatalf("error %q does not say the reply is over the frame limit and how to page", pe.Message)
	}
	if _, err := cl.Call(context.Background(), "trivial", nil); err != nil {
		t.Fatalf("the connection after an over-limit reply: %v", err)
	}
}
