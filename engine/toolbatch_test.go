package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
)

// registerStepper registers the "stepper" program: its prompt is a list of
// calls "tool:recipient" (tool "send" is send_message), made as one model
// step; it responds with the results as JSON.
func registerStepper(h *harness) {
	h.prov.Register("stepper", func(_ context.Context, t *inproc.Turn) (string, error) {
		var calls []provider.ToolRequest
		for i, f := range strings.Fields(t.Prompt) {
			tool, to, _ := strings.Cut(f, ":")
			if tool == "send" {
				calls = append(calls, provider.ToolRequest{Tool: "send_message",
					Args: map[string]any{"recipient": to, "text": fmt.Sprintf("m%d", i)}})
			} else {
				calls = append(calls, provider.ToolRequest{Tool: tool})
			}
		}
		rs, err := t.CallBatch(calls)
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(rs)
		return string(b), err
	})
}

// stepTree makes a root running the stepper with children c1 and c2, wake
// turns off so the children's inboxes can be read.
func stepTree(t *testing.T, setup ...func(h *harness)) (h *harness, root, c1, c2 string) {
	h = newHarness(t, append([]func(*harness){func(h *harness) { h.noWake = true }}, setup...)...)
	registerStepper(h)
	root = h.create("root", "", "stepper")
	c1 = h.create("c1", root, "echo")
	c2 = h.create("c2", root, "echo")
	return h, root, c1, c2
}

// runStep runs one stepper turn and returns its decoded results and the
// number of writes to the root's WAL file during it.
func runStep(t *testing.T, h *harness, root, prompt string) ([]map[string]any, int) {
	t.Helper()
	before := len(h.fs.Ops())
	res := h.send(root, prompt)
	if res.Err != nil {
		t.Fatalf("turn %q: %v", prompt, res.Err)
	}
	writes := 0
	for _, op := range h.fs.Ops()[before:] {
		if op.Kind == faultfs.OpWrite && strings.HasSuffix(op.Path, root+"/events.pending") {
			writes++
		}
	}
	var rs []map[string]any
	if err := json.Unmarshal([]byte(res.Response), &rs); err != nil {
		t.Fatalf("stepper response %q: %v", res.Response, err)
	}
	return rs, writes
}

// inboxTexts lists an agent's pending message texts in order.
func inboxTexts(h *harness, id string) string {
	a, _ := h.c.agent(id)
	var out []string
	for _, m := range pendingOf(a) {
		out = append(out, m.Payload)
	}
	return strings.Join(out, ",")
}

// toolCallRecipients lists the recipients of the root's logged tool.call
// entries in log order, checking that they have consecutive seqs.
func toolCallRecipients(t *testing.T, h *harness, root string) string {
	t.Helper()
	es, err := h.c.Log(context.Background(), root, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var last uint64
	for _, e := range es {
		if e.Event != schema.ToolCall {
			continue
		}
		if last != 0 && e.Seq != last+1 {
			t.Fatalf("tool.call entries are not consecutive: seq %d after %d", e.Seq, last)
		}
		last = e.Seq
		var d schema.ToolCallData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%v", d.Tool, d.Args["recipient"]))
	}
	return strings.Join(out, ",")
}

func TestOneStepOfSendsRunsTogether(t *testing.T) {
	h, root, c1, c2 := stepTree(t)
	rs, writes := runStep(t, h, root, "send:c1 send:c1 send:c2 send:nobody")
	if len(rs) != 4 || rs[0]["status"] != "sent" || rs[1]["status"] != "sent" || rs[2]["status"] != "sent" {
		t.Fatalf("results %v", rs)
	}
	if e, _ := rs[3]["error"].(string); !strings.Contains(e, "nobody") {
		t.Fatalf("the send to an unknown agent gave %v, want a tool error naming it", rs[3])
	}
	if rs[0]["message_id"] == rs[1]["message_id"] {
		t.Fatal("two sends of one step got the same message id")
	}
	// turn.start, the step's four tool.call entries as one group, and
	// turn.complete: three pending-file writes. One by one it is six.
	if writes != 3 {
		t.Fatalf("%d writes to the root's WAL, want 3 (the step logged as one batch)", writes)
	}
	if got := toolCallRecipients(t, h, root); got != "send_message:c1,send_message:c1,send_message:c2,send_message:nobody" {
		t.Fatalf("logged calls %s", got)
	}
	if got := inboxTexts(h, c1); got != "m0,m1" {
		t.Fatalf("c1's inbox %q, want m0,m1 in step order", got)
	}
	if got := inboxTexts(h, c2); got != "m2" {
		t.Fatalf("c2's inbox %q", got)
	}
	// The messages and the calls survive a power loss (they were
	// acknowledged), and recovery rebuilds the same inboxes.
	h.crash(faultfs.PowerLoss)
	if got := inboxTexts(h, c1) + "|" + inboxTexts(h, c2); got != "m0,m1|m2" {
		t.Fatalf("inboxes after a power loss %q", got)
	}
}

func TestOneStepWithOtherToolsRunsCallByCall(t *testing.T) {
	h, root, c1, c2 := stepTree(t)
	rs, writes := runStep(t, h, root, "send:c1 list_children send:c2")
	if len(rs) != 3 || rs[0]["status"] != "sent" || rs[2]["status"] != "sent" {
		t.Fatalf("results %v", rs)
	}
	if kids, _ := rs[1]["children"].([]any); len(kids) != 2 {
		t.Fatalf("list_children in the step gave %v", rs[1])
	}
	if writes != 5 {
		t.Fatalf("%d writes to the root's WAL, want 5 (turn.start, three calls one by one, turn.complete)", writes)
	}
	if got := toolCallRecipients(t, h, root); got != "send_message:c1,list_children:<nil>,send_message:c2" {
		t.Fatalf("logged calls %s", got)
	}
	if inboxTexts(h, c1) != "m0" || inboxTexts(h, c2) != "m2" {
		t.Fatalf("inboxes %q %q", inboxTexts(h, c1), inboxTexts(h, c2))
	}
}

func TestOneStepRespectsTheInboxBound(t *testing.T) {
	h, root, c1, _ := stepTree(t, func(h *harness) { h.maxInbox = 2 })
	rs, _ := runStep(t, h, root, "send:c1 send:c1 send:c1 send:c2")
	if rs[0]["status"] != "sent" || rs[1]["status"] != "sent" || rs[3]["status"] != "sent" {
		t.Fatalf("results %v", rs)
	}
	if e, _ := rs[2]["error"].(string); !strings.Contains(e, "inbox") {
		t.Fatalf("the third send to a 2-message inbox gave %v, want an inbox-full tool error", rs[2])
	}
	if got := inboxTexts(h, c1); got != "m0,m1" {
		t.Fatalf("c1's inbox %q, want m0,m1", got)
	}
}
