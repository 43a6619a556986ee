package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
)

// An attempt's tools (tools_attempt.go, tools_calllog.go): positions and
// derived ids, replayed calls, the order of the log, steps of calls.

// TestCallEntryBytes: the bytes of the tool.call entries the engine logs:
// a call in a run with its result, run, turn and messages; a refused call
// outside any run with its error and nothing empty.
func TestCallEntryBytes(t *testing.T) {
	h := family(t)
	lead := idOf("lead")
	run := h.handTurn(lead, "r")
	res, err := run.tools.CallTool(t.Context(), tools.ToolSendMessage, A{"text": "t", "recipient": "w1"})
	if err != nil {
		t.Fatal(err)
	}
	run.end(nil)
	h.tool(lead, tools.ToolGate, A{"agent_name": "x"})
	var raw []string
	for _, e := range h.entries(lead) {
		if e.Event == schema.ToolCall {
			raw = append(raw, string(e.Data))
		}
	}
	calls := toolCalls(t, h, lead)
	if len(raw) != 2 {
		t.Fatalf("lead's log holds %d tool.call entries, want 2", len(raw))
	}
	want := fmt.Sprintf(`{"call_id":%q,"tool":"send_message","args":{"recipient":"w1","text":"t"},"result":{"message_id":%q,"status":"sent"},"run_id":"r","turn":%d,"messages":[`,
		calls[0].CallID, res["message_id"], run.plan.Turn)
	if !strings.HasPrefix(raw[0], want) || !strings.HasSuffix(raw[0], "}]}") {
		t.Fatalf("tool.call data %s\nwant %s...}]}", raw[0], want)
	}
	if len(calls[0].Messages) != 1 || calls[0].Messages[0]["message_id"] != res["message_id"] || calls[0].CallID == "" {
		t.Fatalf("the entry records %+v", calls[0])
	}
	errText, _ := json.Marshal(calls[1].Error)
	if want := fmt.Sprintf(`{"call_id":%q,"tool":"gate","args":{"agent_name":"x"},"error":%s}`, calls[1].CallID, errText); raw[1] != want ||
		!strings.Contains(calls[1].Error, `no child agent named "x"`) {
		t.Fatalf("tool.call data %s\nwant %s", raw[1], want)
	}
}

// TestAttemptDerivesTheSameIDsOnARerun: a run whose calls a power loss
// took from the caller's log (their messages were durable in their
// recipients' logs, the caller's entries not yet) is re-run: each call
// derives the ids of its first run, so no recipient gets a message twice;
// calls at different positions derive different ids.
func TestAttemptDerivesTheSameIDsOnARerun(t *testing.T) {
	h, hold := newHeldHarness(t)
	defer hold.let()
	var lead string
	var mu sync.Mutex
	runs := 0
	sent := make(chan []any, 2)
	h.prov.Register("fanout", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		mu.Lock()
		runs++
		first := runs == 1
		mu.Unlock()
		if first {
			// Hold the first write of the caller's entries: nothing of
			// them is durable when the power goes.
			hold.arm(lead + "/events.pending")
		}
		var ids []any
		for _, to := range []string{"w1", "w2", "w1"} {
			r, err := tr.Call(tools.ToolSendMessage, A{"recipient": to, "text": "x"})
			if err := errOf(r, err); err != nil {
				return "", err
			}
			ids = append(ids, r["message_id"])
		}
		sent <- ids
		if first {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return "sent", nil
	})
	lead = h.create("lead", "", "fanout")
	w1 := h.create("w1", lead, "echo")
	w2 := h.create("w2", lead, "echo")
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = h.c.Send(context.Background(), lead, "go", "", "", nil)
	}()
	<-hold.entered
	first := <-sent
	if first[0] == first[2] || first[0] == first[1] {
		t.Fatalf("calls at different positions derived the same id: %v", first)
	}
	// Power loss, the caller's entries still held.
	h.fs.Crash()
	hold.let()
	h.c.Abandon()
	<-ended
	h.fs.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
	h.start()
	if n := h.count(lead, schema.ToolCall); n != 0 {
		t.Fatalf("lead's log kept %d tool.call entries through the power loss; the test needs none", n)
	}
	if h.count(w1, schema.MessageEnqueued) != 2 || h.count(w2, schema.MessageEnqueued) != 1 {
		t.Fatal("the first run's messages were not durable before the power loss")
	}
	if _, err := h.c.Resume(context.Background(), lead, "", ""); err != nil {
		t.Fatalf("re-running the interrupted run: %v", err)
	}
	second := <-sent
	for i := range first {
		if first[i] != second[i] {
			t.Fatalf("the re-run derived %v, the first run %v", second, first)
		}
	}
	if h.count(w1, schema.MessageEnqueued) != 2 || h.count(w2, schema.MessageEnqueued) != 1 {
		t.Fatalf("the re-run's sends were delivered again: w1 has %d messages, w2 %d", h.count(w1, schema.MessageEnqueued), h.count(w2, schema.MessageEnqueued))
	}
	calls := toolCalls(t, h, lead)
	if len(calls) != 3 {
		t.Fatalf("lead's log holds %d tool.call entries after the re-run, want 3", len(calls))
	}
	for i, c := range calls {
		if c.Result["message_id"] != first[i] {
			t.Fatalf("call %d logged %v, want message %v", i, c.Result, first[i])
		}
	}
}

// TestAttemptAnswersRecordedCallsFromTheLog: an attempt answers the calls
// the log records for its run from the record, without a second entry,
// redoing a recorded send's delivery its recipient lacks and nothing of a
// recorded error; a call past the record runs.
func TestAttemptAnswersRecordedCallsFromTheLog(t *testing.T) {
	h := family(t)
	lead, w1, w2 := idOf("lead"), idOf("w1"), idOf("w2")
	run := h.handTurn(lead, "run1")
	// The run's record, as a crash can leave it: a send whose entry is
	// durable in the caller's log while its recipient's log lost the
	// message, and a refused gate. (Written by hand: no fault of this
	// harness loses the recipient's write and keeps the caller's.)
	m0 := h.c.newMessage("m0", lead, w1, inbox.KindRequest, "x")
	logs(t, run.a, schema.ToolCall, schema.ToolCallData{CallID: newID(), Tool: tools.ToolSendMessage, Args: A{"recipient": "w1", "text": "x"},
		Result: A{"status": "sent", "message_id": "m0"}, RunID: "run1", Turn: run.plan.Turn, Messages: []map[string]any{m0.EventData()}})
	logs(t, run.a, schema.ToolCall, schema.ToolCallData{CallID: newID(), Tool: tools.ToolGate, Args: A{"agent_name": "w2"},
		Error: `no child agent named "w2"`, RunID: "run1", Turn: run.plan.Turn})
	a := run.attempt()
	res, err := a.CallTool(t.Context(), tools.ToolSendMessage, A{"recipient": "w1", "text": "x"})
	if err != nil || res["message_id"] != "m0" {
		t.Fatalf("the recorded send answered %v, %v", res, err)
	}
	res, _ = a.CallTool(t.Context(), tools.ToolGate, A{"agent_name": "w2"})
	wantReply(t, res, `no child agent named "w2"`)
	// The third call is new: it runs.
	res, _ = a.CallTool(t.Context(), tools.ToolPoke, A{"agent_name": "w2"})
	wantReply(t, res, "")
	run.end(nil)
	// The recorded send's message reached w1, once, with the recorded id.
	if got := inboxTexts(h, w1); got != "x" || h.count(w1, schema.MessageEnqueued) != 1 {
		t.Fatalf("w1 holds %q (%d message.enqueued), want the recorded message once", got, h.count(w1, schema.MessageEnqueued))
	}
	if _, ok := h.pendingMessage(w1, "m0"); !ok {
		t.Fatal("w1 lacks the recorded message m0")
	}
	// The recorded error was not executed: w2 is not gated.
	if n := h.count(w2, schema.ToolGate); n != 0 {
		t.Fatalf("a recorded refused gate was executed: w2's log has %d tool.gate", n)
	}
	if got := callTools(t, h, lead); got != "send_message,gate,poke" {
		t.Fatalf("lead's log holds %s, want the record and the new call only", got)
	}

	// A recorded error has no effects redone: w2's complete, refused while
	// it had a child, is answered with the refusal after the child is gone
	// (run again, or its completion redone, it would terminate w2).
	h.add("w2a", "w2", "echo")
	run = h.handTurn(w2, "run2")
	res, err = run.tools.CallTool(t.Context(), tools.ToolComplete, A{"result": "r"})
	if err != nil {
		t.Fatal(err)
	}
	wantReply(t, res, "terminate them first")
	noErr(t, h.c.Terminate(context.Background(), idOf("w2a")))
	res, err = run.attempt().CallTool(t.Context(), tools.ToolComplete, A{"result": "r"})
	if err != nil {
		t.Fatal(err)
	}
	wantReply(t, res, "terminate them first")
	run.end(nil)
	if n := h.count(w2, schema.AgentTerminated); n != 0 || callTools(t, h, w2) != "complete" {
		t.Fatalf("the recorded refused complete was redone (w2's log: %d agent.terminated, calls %s)", n, callTools(t, h, w2))
	}
}

// TestAttemptRunsACallThatDiffersFromTheRecord: a call whose tool is not
// the one the log records at its position runs.
func TestAttemptRunsACallThatDiffersFromTheRecord(t *testing.T) {
	h := family(t)
	lead := idOf("lead")
	run := h.handTurn(lead, "run1")
	res, err := run.tools.CallTool(t.Context(), tools.ToolGate, A{"agent_name": "w2"})
	if err != nil || res["status"] != "gated" {
		t.Fatalf("gate: %v, %v", res, err)
	}
	res, _ = run.attempt().CallTool(t.Context(), tools.ToolPoke, A{"agent_name": "w2"})
	if res["status"] != "poked" {
		t.Fatalf("a call whose tool differs from the record answered %v", res)
	}
	run.end(nil)
	if got := callTools(t, h, lead); got != "gate,poke" {
		t.Fatalf("lead's log holds %s", got)
	}
}

// TestAttemptAnswersAwaitInputWithTheResponse: the re-run of a resumed run
// answers its await_input with the response, logged as the call's result,
// without waiting again; only once: a second await_input waits.
func TestAttemptAnswersAwaitInputWithTheResponse(t *testing.T) {
	h := newHarness(t)
	answers := make(chan any, 1)
	h.prov.Register("asker", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		args := A{"kind": "approval", "prompt": "ok?", "timeout": 3600}
		r, err := tr.Call(tools.ToolAwaitInput, args)
		if err != nil {
			return "", err
		}
		answers <- r["response"]
		_, err = tr.Call(tools.ToolAwaitInput, args)
		return "", err
	})
	lead := h.create("lead", "", "asker")
	res := h.send(lead, "go")
	if res.Status != "suspended" {
		t.Fatalf("turn: %+v, want it suspended", res)
	}
	again, err := h.c.Resume(context.Background(), lead, res.Token, "yes")
	if err != nil {
		t.Fatal(err)
	}
	// The program answered before its second call suspended the run.
	select {
	case got := <-answers:
		if got != "yes" {
			t.Fatalf("resumed await_input answered %v", got)
		}
	default:
		t.Fatalf("the resumed await_input did not return (the re-run ended %+v)", again)
	}
	if again.Status != "suspended" || again.RunID != res.RunID {
		t.Fatalf("the second await_input: %+v, want the run suspended again", again)
	}
	calls := toolCalls(t, h, lead)
	if len(calls) != 1 || calls[0].Tool != tools.ToolAwaitInput || calls[0].Result["response"] != "yes" {
		t.Fatalf("logged %+v, want the answered await_input", calls)
	}
	// Two waits: the first call's and the second's; the answered call
	// did not wait again.
	if n := h.count(lead, schema.RunWaiting); n != 2 {
		t.Fatalf("lead's log has %d run.waiting, want 2", n)
	}
}

// TestAttemptKeepsCallOrderInTheLog: sends' entries are written behind the
// call, and any other tool waits for them, so the log holds the calls in
// call order; each entry holds the call's arguments as they were when it
// returned.
func TestAttemptKeepsCallOrderInTheLog(t *testing.T) {
	hold := newHoldFS()
	defer hold.let()
	h := family(t, func(h *harness) { h.wrapFS = func(fsys faultfs.FS) faultfs.FS { hold.FS = fsys; return hold } })
	w1 := idOf("w1")
	run := h.handTurn(w1, "run1")
	calls := []struct {
		tool string
		args A
	}{
		{tools.ToolSendMessage, A{"recipient": "lead", "text": "a"}},
		{tools.ToolBroadcast, A{"text": "b"}},
		{tools.ToolListChildren, A{}},
		{tools.ToolSendMessage, A{"recipient": "w2", "text": "c"}},
	}
	// The first send's entry is held in its fsync while the calls go on:
	// the broadcast's entry queues behind it, and list_children must wait
	// for both.
	hold.arm(w1 + "/events.jsonl")
	returned := make(chan int, len(calls))
	done := make(chan error, 1)
	go func() {
		for i, c := range calls {
			if err := errOf(run.tools.CallTool(context.Background(), c.tool, c.args)); err != nil {
				done <- err
				return
			}
			// The caller may change its maps once the call returned.
			c.args["text"] = "changed"
			returned <- i
		}
		done <- nil
	}()
	<-hold.entered
	<-returned
	<-returned
	// The broadcast returned with its message in w2's log, while the
	// first send's entry is still being made durable.
	if n := h.count(idOf("w2"), schema.MessageEnqueued); n != 1 {
		t.Fatalf("when the broadcast returned w2 had %d messages", n)
	}
	hold.let()
	noErr(t, <-done)
	if err := run.tools.Drain(); err != nil {
		t.Fatal(err)
	}
	want := "send_message,broadcast,list_children,send_message"
	if got := callTools(t, h, w1); got != want {
		t.Fatalf("logged %s, want %s", got, want)
	}
	for _, c := range toolCalls(t, h, w1) {
		if c.Args["text"] == "changed" {
			t.Fatalf("the %s entry holds the args changed after the call: %v", c.Tool, c.Args)
		}
	}
	run.end(nil)
}

// TestAttemptDrainReportsAFailedEntry: a send returns before its entry is
// written; when that write fails, Drain reports it, and so does the next
// call that is not written behind.
func TestAttemptDrainReportsAFailedEntry(t *testing.T) {
	h := family(t)
	lead := idOf("lead")
	run := h.handTurn(lead, "run1")
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpSync, Path: lead + "/events.jsonl", Err: errString("fsync failed")})
	res, err := run.tools.CallTool(t.Context(), tools.ToolSendMessage, A{"recipient": "w1", "text": "a"})
	if err != nil || res["status"] != "sent" {
		t.Fatalf("the send: %v %v (it returns before its entry is written)", res, err)
	}
	derr := run.tools.Drain()
	if derr == nil || !strings.Contains(derr.Error(), "fsync failed") {
		t.Fatalf("Drain = %v, want the failed write", derr)
	}
	if _, err := run.tools.CallTool(t.Context(), tools.ToolListChildren, nil); err == nil {
		t.Fatal("a call after a failed entry succeeded")
	}
	h.fs.ClearRules()
	run.end(derr)
}

func TestAttemptStepOfSends(t *testing.T) {
	step := []provider.ToolRequest{
		{Tool: tools.ToolSendMessage, Args: A{"recipient": "w1", "text": "a"}},
		{Tool: tools.ToolSendMessage, Args: A{"recipient": "w2", "text": "b"}},
		{Tool: tools.ToolSendMessage, Args: A{"recipient": "w1", "text": "c"}},
		{Tool: tools.ToolSendMessage, Args: A{"recipient": "ghost", "text": "d"}},
	}
	lead, w1, w2 := idOf("lead"), idOf("w1"), idOf("w2")
	t.Run("together", func(t *testing.T) {
		h := family(t)
		run := h.handTurn(lead, "run1")
		out := run.tools.CallTools(t.Context(), step)
		for i, want := range []string{"", "", "", `no reachable agent named "ghost"`} {
			if out[i].Err != nil {
				t.Fatal(out[i].Err)
			}
			wantReply(t, out[i].Result, want)
		}
		run.end(nil)
		if inboxTexts(h, w1) != "a,c" || inboxTexts(h, w2) != "b" {
			t.Fatalf("w1 holds %q, w2 %q", inboxTexts(h, w1), inboxTexts(h, w2))
		}
		if got := len(runCalls(t, h, lead, "run1")); got != 4 {
			t.Fatalf("logged %d entries, want 4", got)
		}
		wantNoReservations(t, h)
		// The positions are those of one-by-one calls.
		h2 := family(t)
		one := h2.handTurn(lead, "run1")
		for i, c := range step[:3] {
			res, _ := one.tools.CallTool(t.Context(), c.Tool, c.Args)
			if res["message_id"] != out[i].Result["message_id"] {
				t.Fatalf("call %d: a step derived %v, one-by-one %v", i, out[i].Result["message_id"], res["message_id"])
			}
		}
		one.end(nil)
	})
	t.Run("a step over an inbox's room", func(t *testing.T) {
		h := family(t, func(h *harness) { h.maxInbox = 1 })
		run := h.handTurn(lead, "run1")
		out := run.tools.CallTools(t.Context(), step[:3])
		wantReply(t, out[0].Result, "")
		wantReply(t, out[1].Result, "")
		wantReply(t, out[2].Result, "inbox full")
		run.end(nil)
		if inboxTexts(h, w1) != "a" || h.count(w1, schema.MessageEnqueued) != 1 {
			t.Fatalf("w1 holds %q", inboxTexts(h, w1))
		}
		wantNoReservations(t, h)
	})
	t.Run("with another tool, call by call", func(t *testing.T) {
		h := family(t)
		run := h.handTurn(lead, "run1")
		mixed := append([]provider.ToolRequest{{Tool: tools.ToolPoke, Args: A{"agent_name": "w1"}}}, step[:2]...)
		out := run.tools.CallTools(t.Context(), mixed)
		run.end(nil)
		if out[0].Result["status"] != "poked" || callTools(t, h, lead) != "poke,send_message,send_message" {
			t.Fatalf("out %v, log %s", out, callTools(t, h, lead))
		}
	})
	t.Run("a failed call stops the step", func(t *testing.T) {
		h := family(t)
		run := h.handTurn(lead, "run1")
		out := run.tools.CallTools(t.Context(), []provider.ToolRequest{
			{Tool: tools.ToolAwaitInput, Args: A{"kind": "approval", "prompt": "p", "timeout": 1}},
			step[0],
		})
		if !errors.Is(out[0].Err, provider.ErrRunSuspended) || !errors.Is(out[1].Err, provider.ErrRunSuspended) ||
			!strings.Contains(out[1].Err.Error(), "not run") {
			t.Fatalf("out %v", out)
		}
		run.end(out[0].Err)
		if n := h.count(w1, schema.MessageEnqueued); n != 0 {
			t.Fatalf("a call after the suspension ran: w1 has %d messages", n)
		}
	})
}

// TestStepSendsRespectTheInboxLimit: a step of three sends to one
// recipient whose inbox has room for two: the first two are delivered, the
// third gets an inbox-full tool error, the inbox is never over its limit,
// and no room stays reserved after.
func TestStepSendsRespectTheInboxLimit(t *testing.T) {
	h, root, c1, _ := stepTree(t, func(h *harness) { h.maxInbox = 2 })
	rs, _ := runStep(t, h, root, "send:c1 send:c1 send:c1")
	if rs[0]["status"] != "sent" || rs[1]["status"] != "sent" {
		t.Fatalf("results %v", rs)
	}
	if e, _ := rs[2]["error"].(string); !strings.Contains(e, "inbox full") {
		t.Fatalf("the third send to a 2-message inbox gave %v, want an inbox-full tool error", rs[2])
	}
	if got, n := inboxTexts(h, c1), h.count(c1, schema.MessageEnqueued); got != "m0,m1" || n != 2 {
		t.Fatalf("c1 holds %q (%d message.enqueued), want m0,m1", got, n)
	}
	wantNoReservations(t, h)
}
