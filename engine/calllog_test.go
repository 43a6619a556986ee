package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
)

// toolsInLog lists the tool names of the tool.call entries and the turn
// events in an agent's log, in log order.
func toolsInLog(h *harness, id string) []string {
	var out []string
	for _, e := range h.entries(id) {
		switch e.Event {
		case schema.ToolCall:
			out = append(out, fmt.Sprint(dataOf(h.t, e)["tool"]))
		case schema.TurnStart, schema.TurnComplete, schema.TurnFailed:
			out = append(out, e.Event)
		}
	}
	return out
}

// newHeldHarness is a harness without wake turns on a filesystem that can
// hold an fsync. The test defers hold.let().
func newHeldHarness(t *testing.T) (*harness, *holdFS) {
	hold := newHoldFS()
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.wrapFS = func(fsys faultfs.FS) faultfs.FS { hold.FS = fsys; return hold }
	})
	return h, hold
}

// TestSendReturnsBeforeItsToolCallEntryIsDurable: inside a turn a
// send_message call returns once its message is durable in the recipient's
// log, while its own tool.call entry is still being written; a later call
// of another tool waits for it, so the log holds the calls in call order
// and before turn.complete.
func TestSendReturnsBeforeItsToolCallEntryIsDurable(t *testing.T) {
	h, hold := newHeldHarness(t)
	defer hold.let()
	var root string
	returned := make(chan struct{})
	h.prov.Register("sender", func(_ context.Context, tr *inproc.Turn) (string, error) {
		hold.arm(root + "/events.jsonl") // the next fsync of the root's log
		for i, to := range []string{"c1", "c2"} {
			r, err := tr.Call("send_message", map[string]any{"recipient": to, "text": "task"})
			if err := errOf(r, err); err != nil {
				return "", err
			}
			if i == 0 {
				close(returned)
			}
		}
		r, err := tr.Call("list_children", nil)
		if err := errOf(r, err); err != nil {
			return "", err
		}
		return "sent", nil
	})
	root = h.create("root", "", "sender")
	c1 := h.create("c1", root, "echo")
	c2 := h.create("c2", root, "echo")

	done := make(chan TurnResult, 1)
	go func() {
		res, err := h.c.Send(context.Background(), root, "go", "", "", nil)
		if err != nil {
			res.Err = err
		}
		done <- res
	}()
	<-hold.entered // the first send's tool.call entry is being fsynced
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("send_message did not return while its tool.call entry's fsync was held")
	}
	if n := h.count(c1, schema.MessageEnqueued); n != 1 {
		t.Fatalf("c1 has %d message.enqueued entries when the send returned, want 1", n)
	}
	hold.let()
	res := <-done
	if res.Err != nil || res.Response != "sent" {
		t.Fatalf("turn: %+v", res)
	}
	want := []string{schema.TurnStart, "send_message", "send_message", "list_children", schema.TurnComplete}
	if got := toolsInLog(h, root); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("root's log holds %v, want %v", got, want)
	}
	if n := h.count(c2, schema.MessageEnqueued); n != 1 {
		t.Fatalf("c2 has %d message.enqueued entries, want 1", n)
	}
}

// TestFailedToolCallEntryFailsTheTurn: when the write of a send's tool.call
// entry fails after the call returned, the turn does not complete (the log
// is poisoned); the message itself was delivered.
func TestFailedToolCallEntryFailsTheTurn(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	var root string
	h.prov.Register("sender", func(_ context.Context, tr *inproc.Turn) (string, error) {
		h.fs.Inject(faultfs.Rule{Kind: faultfs.OpSync, Path: root + "/events.jsonl"})
		r, err := tr.Call("send_message", map[string]any{"recipient": "c1", "text": "task"})
		if err := errOf(r, err); err != nil {
			return "", err
		}
		return "sent", nil
	})
	root = h.create("root", "", "sender")
	c1 := h.create("c1", root, "echo")
	res, err := h.c.Send(context.Background(), root, "go", "", "", nil)
	if err == nil && res.Err == nil {
		t.Fatalf("the turn succeeded although its tool.call entry was not logged: %+v", res)
	}
	h.fs.ClearRules()
	if got := toolsInLog(h, root); fmt.Sprint(got) != fmt.Sprint([]string{schema.TurnStart}) {
		t.Fatalf("root's log holds %v, want only turn.start", got)
	}
	if n := h.count(c1, schema.MessageEnqueued); n != 1 {
		t.Fatalf("c1 has %d message.enqueued entries, want 1 (the send returned)", n)
	}
}

// TestToolCallEntryKeepsTheArgsAsCalled: the entry written behind a send
// holds the arguments and result as they were when the call returned, even
// if the model's side changes those maps afterwards while the entry still
// waits behind an earlier one.
func TestToolCallEntryKeepsTheArgsAsCalled(t *testing.T) {
	h, hold := newHeldHarness(t)
	defer hold.let()
	var root string
	changed := make(chan struct{})
	h.prov.Register("mutator", func(_ context.Context, tr *inproc.Turn) (string, error) {
		hold.arm(root + "/events.jsonl") // holds the first send's entry
		var last, lastResult map[string]any
		for _, to := range []string{"c1", "c2"} {
			last = map[string]any{"recipient": to, "text": "as called"}
			r, err := tr.Call("send_message", last)
			if err := errOf(r, err); err != nil {
				return "", err
			}
			lastResult = r
		}
		// The second send's entry is queued behind the held first one.
		last["text"] = "changed after the call"
		lastResult["status"] = "changed after the call"
		close(changed)
		r, err := tr.Call("list_children", nil)
		if err := errOf(r, err); err != nil {
			return "", err
		}
		return "sent", nil
	})
	root = h.create("root", "", "mutator")
	h.create("c1", root, "echo")
	h.create("c2", root, "echo")
	done := make(chan TurnResult, 1)
	go func() { done <- h.send(root, "go") }()
	<-hold.entered
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the sends did not return while the first entry's fsync was held")
	}
	hold.let()
	if res := <-done; res.Err != nil {
		t.Fatal(res.Err)
	}
	n := 0
	for _, e := range h.entries(root) {
		if e.Event != schema.ToolCall || fmt.Sprint(dataOf(t, e)["tool"]) != "send_message" {
			continue
		}
		n++
		d := dataOf(t, e)
		args, _ := d["args"].(map[string]any)
		result, _ := d["result"].(map[string]any)
		if args["text"] != "as called" || result["status"] == "changed after the call" {
			t.Fatalf("tool.call entry = %v, want the args and result as they were when the call returned", d)
		}
	}
	if n != 2 {
		t.Fatalf("%d send_message entries in the root's log, want 2", n)
	}
}
