package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/protocol"
)

// TestSocketBoundedInboxAndPaging drives the limits of config.json and the
// paged methods over the socket (issue 16): a send to a full inbox is a
// clear tool error and nothing accepted is lost (also across a restart);
// instructions over the message limit are code 2; agent.inspect's inbox and
// agent.log page with limit and since_seq in both framings.
func TestSocketBoundedInboxAndPaging(t *testing.T) {
	d := newTestDaemon(t, modeInProcess)
	if err := os.MkdirAll(d.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"limits":{"inbox_messages":3,"message_bytes":1000}}`
	if err := os.WriteFile(filepath.Join(d.Home, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Start()
	root := d.createAgent("root", "inproc", "echo", "")
	kid := d.createAgent("kid", "inproc", "echo", root)
	// Gated, the kid takes no turn: its inbox only fills.
	d.callN("tool.call", map[string]any{"agent_id": root, "tool": "gate", "arguments": map[string]any{"agent_name": "kid"}})
	for i := 0; i < 4; i++ {
		res := d.callN("tool.call", map[string]any{"agent_id": root, "tool": "send_message",
			"arguments": map[string]any{"recipient": "kid", "text": strings.Repeat("t", 900)}})
		e, _ := res["error"].(string)
		if (i < 3) != (e == "") {
			t.Fatalf("send %d: %v", i, res)
		}
		if i == 3 && !strings.Contains(e, "limits.inbox_messages") {
			t.Fatalf("the refusal does not name the limit: %q", e)
		}
	}
	_, err := d.Client().Call(procCtx(t), "agent.create", map[string]any{"name": "big", "instructions": strings.Repeat("i", 1001)})
	wantCode(t, "agent.create with instructions over the message limit", err, protocol.CodeInvalid)

	inboxPages := func() []int {
		var sizes []int
		params := map[string]any{"agent_id": kid, "limit": 2}
		for len(sizes) < 5 {
			res := d.callN("agent.inspect", params)
			in, _ := res["inbox"].([]any)
			sizes = append(sizes, len(in))
			next, ok := res["inbox_next_seq"]
			if !ok {
				return sizes
			}
			params["since_seq"] = next
		}
		t.Fatalf("inbox paging does not end: %v", sizes)
		return nil
	}
	if got := inboxPages(); len(got) != 2 || got[0] != 2 || got[1] != 1 {
		t.Fatalf("inbox pages of 2: %v, want [2 1]", got)
	}
	d.Restart()
	if got := inboxPages(); len(got) != 2 || got[0]+got[1] != 3 {
		t.Fatalf("after a restart, inbox pages %v: the 3 accepted messages must all be there", got)
	}

	// agent.log pages, native and JSON framing alike.
	total := len(d.callN("agent.log", map[string]any{"agent_id": root, "limit": 10000})["events"].([]any))
	for _, framing := range []string{"native", "json"} {
		call := func(p map[string]any) map[string]any {
			if framing == "native" {
				return d.callN("agent.log", p)
			}
			res, err := protocol.CallJSON(procCtx(t), d.Sock, "agent.log", p)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		seen := 0
		since := any(0)
		for page := 0; page <= total; page++ {
			res := call(map[string]any{"agent_id": root, "since_seq": since, "limit": 2})
			evs, _ := res["events"].([]any)
			if len(evs) > 2 {
				t.Fatalf("%s: a page of %d events with limit 2", framing, len(evs))
			}
			seen += len(evs)
			if more, _ := res["more"].(bool); !more {
				break
			}
			since = res["next_seq"]
		}
		if seen != total {
			t.Fatalf("%s: pages gave %d events, want %d", framing, seen, total)
		}
	}
}
