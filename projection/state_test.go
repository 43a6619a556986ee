package projection

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
)

// "Log in, state out": each case folds a log that begins with agent.created
// and checks what its events did to the state, in live mode and in replay
// mode (which must agree).
func TestFoldEachEvent(t *testing.T) {
	const run = "run1"
	start := func(turn int, ids ...string) rec {
		return rec{schema.TurnStart, schema.TurnStartData{RunID: run, Turn: turn, BootID: "b", Prompt: "go", Provider: "p2", Model: "m2", MessageIDs: ids}}
	}
	waiting := rec{schema.RunWaiting, schema.RunWaitingData{RunID: run, WaitKind: "input", Prompt: "ok?", TokenID: "tok",
		Deadline: "2026-01-03T00:00:00Z", SecretHash: "h", Turn: 1}}
	big := strings.Repeat("x", ResidentPayload+1)
	cases := []struct {
		name  string
		log   []rec
		check func(t *testing.T, p *State)
	}{
		{"agent.created sets identity once", []rec{created,
			{schema.AgentCreated, schema.AgentCreatedData{AgentID: "other", Name: "again"}}},
			func(t *testing.T, p *State) {
				if !p.Created || p.ID != "a" || p.Name != "w" || p.Instructions != "be brief" || p.Cwd != "/tmp/w" ||
					p.Provider != "p1" || p.Model != "m1" || p.Metadata["team"] != "x" || !p.CreatedTS.Equal(t0) {
					t.Fatalf("state %+v", p)
				}
			}},
		{"agent.terminated", []rec{created, {schema.AgentTerminated, schema.AgentTerminatedData{AgentID: "a"}}},
			func(t *testing.T, p *State) {
				if !p.Terminated {
					t.Fatal("not terminated")
				}
			}},
		{"agent.claimed: the greatest epoch, copied into the run a turn starts", []rec{created,
			{schema.AgentClaimed, schema.AgentClaimedData{Node: "n1", Epoch: 7, BootID: "b1"}},
			start(1),
			{schema.AgentClaimed, schema.AgentClaimedData{Node: "n2", Epoch: 9, BootID: "b2"}},
			{schema.AgentClaimed, schema.AgentClaimedData{Node: "n1", Epoch: 8, BootID: "b1"}}},
			func(t *testing.T, p *State) {
				if p.ClaimEpoch != 9 || p.Run == nil || p.Run.ClaimEpoch != 7 {
					t.Fatalf("claim epoch %d, run %+v; want 9 and a run begun under 7", p.ClaimEpoch, p.Run)
				}
			}},
		{"session.created then suspend.result", []rec{created,
			{schema.SessionCreated, schema.SessionCreatedData{Provider: "p1", Model: "m1", Handle: "h1"}},
			{schema.SuspendResult, schema.SuspendResultData{StateSize: 3}}},
			func(t *testing.T, p *State) {
				if p.Handle != "h1" || p.SessProvider != "p1" || p.SessModel != "m1" || !p.Suspended {
					t.Fatalf("state %+v", p)
				}
			}},
		{"session.restored clears suspended", []rec{created,
			{schema.SuspendResult, schema.SuspendResultData{}},
			{schema.SessionRestored, schema.SessionRestoredData{Provider: "p3", Model: "m3", Strategy: "native"}}},
			func(t *testing.T, p *State) {
				if p.Suspended || p.SessProvider != "p3" || p.SessModel != "m3" {
					t.Fatalf("state %+v", p)
				}
			}},
		{"context.reset drops the handle", []rec{created,
			{schema.SessionCreated, schema.SessionCreatedData{Provider: "p1", Model: "m1", Handle: "h1"}},
			{schema.SuspendResult, schema.SuspendResultData{}},
			{schema.ContextReset, map[string]any{}}},
			func(t *testing.T, p *State) {
				if p.Handle != "" || p.Suspended || p.SessProvider != "p1" {
					t.Fatalf("state %+v", p)
				}
			}},
		{"turn.start opens a run", []rec{created, {schema.MessageEnqueued, msg(1, "hi").EventData()}, start(3, msgID(1))},
			func(t *testing.T, p *State) {
				r := p.OpenRun()
				if p.TurnNo != 3 || r == nil || r.RunID != run || r.Turn != 3 || r.Prompt != "go" || r.Provider != "p2" ||
					len(r.MessageIDs) != 1 || !r.StartedAt.Equal(t0.Add(2*time.Second)) || p.RunFor(run) != r {
					t.Fatalf("state %+v run %+v", p, r)
				}
				if p.Pending.Len() != 1 || p.Provider != "p1" {
					t.Fatalf("a started run took its messages or changed the preference: %+v", p)
				}
			}},
		{"turn.complete ends it, takes its messages, sets the preference", []rec{created,
			{schema.MessageEnqueued, msg(1, "hi").EventData()}, start(1, msgID(1)),
			{schema.TurnFailed, schema.TurnFailedData{RunID: "old", Error: "earlier"}},
			{schema.TurnComplete, schema.TurnCompleteData{RunID: run, Turn: 1, Response: "done", Usage: &provider.Usage{InputTokens: 3, OutputTokens: 4}}},
			{schema.TurnComplete, schema.TurnCompleteData{RunID: "r0", Usage: &provider.Usage{InputTokens: 1}}}},
			func(t *testing.T, p *State) {
				if p.OpenRun() != nil || !p.Run.Ended || p.Pending.Len() != 0 || p.Provider != "p2" || p.Model != "m2" ||
					p.Usage.InputTokens != 4 || p.Usage.OutputTokens != 4 || p.LastError != "" {
					t.Fatalf("state %+v run %+v", p, p.Run)
				}
			}},
		{"turn.failed ends it and keeps the error, not the preference", []rec{created, start(1),
			{schema.TurnFailed, schema.TurnFailedData{RunID: run, Error: "boom", Attempts: 2}}},
			func(t *testing.T, p *State) {
				if !p.Run.Ended || p.LastError != "boom" || p.Provider != "p1" {
					t.Fatalf("state %+v run %+v", p, p.Run)
				}
			}},
		{"turn.cancelled ends it", []rec{created, start(1), {schema.TurnCancelled, schema.TurnCancelledData{RunID: run}}},
			func(t *testing.T, p *State) {
				if !p.Run.Ended || p.OpenRun() != nil || p.LastError != "" {
					t.Fatalf("run %+v", p.Run)
				}
			}},
		{"run.interrupted then run.resumed", []rec{created, start(1),
			{schema.RunInterrupted, schema.RunInterruptedData{RunID: run, Reason: schema.ReasonProcessRestart}}},
			func(t *testing.T, p *State) {
				if !p.Run.Interrupted || p.Run.Reason != schema.ReasonProcessRestart || p.Run.Ended {
					t.Fatalf("run %+v", p.Run)
				}
			}},
		{"run.resumed without a token clears the interruption", []rec{created, start(1),
			{schema.RunInterrupted, schema.RunInterruptedData{RunID: run, Reason: schema.ReasonProcessRestart}},
			{schema.RunResumed, schema.RunResumedData{RunID: run}}},
			func(t *testing.T, p *State) {
				if p.Run.Interrupted || p.Run.Reason != "" || p.LastResume != nil {
					t.Fatalf("run %+v", p.Run)
				}
			}},
		{"run.waiting records the wait with a live token", []rec{created, start(1), waiting},
			func(t *testing.T, p *State) {
				w := p.Run.Wait
				if w == nil || w.TokenID != "tok" || w.Kind != "input" || w.Prompt != "ok?" || w.SecretHash != "h" ||
					w.TokenState != string(schema.TokLive) || !w.Deadline.Equal(time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)) ||
					!w.Since.Equal(t0.Add(2*time.Second)) {
					t.Fatalf("wait %+v", w)
				}
			}},
		{"token.revoked", []rec{created, start(1), waiting, {schema.TokenRevoked, schema.TokenData{TokenID: "tok", RunID: run}}},
			func(t *testing.T, p *State) {
				if p.Run.Wait.TokenState != string(schema.TokRevoked) {
					t.Fatalf("wait %+v", p.Run.Wait)
				}
			}},
		{"token.expired", []rec{created, start(1), waiting, {schema.TokenExpired, schema.TokenData{TokenID: "tok", RunID: run}}},
			func(t *testing.T, p *State) {
				if p.Run.Wait.TokenState != string(schema.TokExpired) {
					t.Fatalf("wait %+v", p.Run.Wait)
				}
			}},
		{"token.consumed of another token changes nothing", []rec{created, start(1), waiting,
			{schema.TokenConsumed, schema.TokenData{TokenID: "other", RunID: run}}},
			func(t *testing.T, p *State) {
				if p.Run.Wait.TokenState != string(schema.TokLive) {
					t.Fatalf("wait %+v", p.Run.Wait)
				}
			}},
		{"run.resumed with the token answers the wait; turn.complete records the result", []rec{created, start(1), waiting,
			{schema.TokenConsumed, schema.TokenData{TokenID: "tok", RunID: run}},
			{schema.RunResumed, schema.RunResumedData{RunID: run, TokenID: "tok", Response: "yes"}},
			start(1),
			{schema.TurnComplete, schema.TurnCompleteData{RunID: run, Turn: 1, Response: "thanks"}}},
			func(t *testing.T, p *State) {
				lr := p.LastResume
				if lr == nil || lr.TokenID != "tok" || lr.RunID != run || lr.SecretHash != "h" || lr.Response != "yes" ||
					lr.Result != "thanks" || !lr.Completed || p.Run.Wait != nil {
					t.Fatalf("last resume %+v run %+v", lr, p.Run)
				}
			}},
		{"a re-run's turn.start keeps the answer for await_input", []rec{created, start(1), waiting,
			{schema.RunResumed, schema.RunResumedData{RunID: run, TokenID: "tok", Response: "yes"}}, start(1)},
			func(t *testing.T, p *State) {
				r := p.OpenRun()
				if r == nil || r.ResumeResponse == nil || *r.ResumeResponse != "yes" || r.Wait != nil {
					t.Fatalf("run %+v", r)
				}
			}},
		{"tool.call records calls, sends and spawns of the open run", []rec{created, start(1),
			{schema.ToolCall, schema.ToolCallData{CallID: "c1", Tool: "send_message", Args: map[string]any{"recipient": "b"},
				Result: map[string]any{"status": "sent"}, RunID: run, Turn: 1,
				Messages: []map[string]any{{"message_id": msgID(7), "recipient": "b"}, {"message_id": msgID(8), "recipient": "c"}}}},
			{schema.ToolCall, schema.ToolCallData{CallID: "c2", Tool: "spawn_agent", Result: map[string]any{"agent_id": "kid"}, RunID: run, Turn: 1}},
			{schema.ToolCall, schema.ToolCallData{CallID: "c3", Tool: "check_inbox", Error: "no", RunID: run, Turn: 1}}},
			func(t *testing.T, p *State) {
				c := p.Run.Calls
				if len(c) != 3 || c[0].Tool != "send_message" || string(c[0].Result) != `{"status":"sent"}` || len(c[0].Messages) != 2 ||
					c[2].Error != "no" || c[1].Tool != "spawn_agent" {
					t.Fatalf("calls %+v", c)
				}
				if len(p.Sent) != 2 || p.Sent[1].ID != msgID(8) || p.Sent[1].To != "c" || p.Sent[1].Index != 1 || p.Sent[1].Ref.Seq != 3 {
					t.Fatalf("sent %+v", p.Sent)
				}
				if len(p.Spawns) != 1 || p.Spawns[0].ChildID != "kid" || p.Spawns[0].RunID != run || p.Spawns[0].Ref.Seq != 4 {
					t.Fatalf("spawns %+v", p.Spawns)
				}
			}},
		{"tool.call after its run ended is not a call of a run", []rec{created, start(1),
			{schema.TurnComplete, schema.TurnCompleteData{RunID: run}},
			{schema.ToolCall, schema.ToolCallData{CallID: "c", Tool: "check_inbox", RunID: run}}},
			func(t *testing.T, p *State) {
				if len(p.Run.Calls) != 0 {
					t.Fatalf("calls %+v", p.Run.Calls)
				}
			}},
		{"message.enqueued once per id; message.delivered takes it", []rec{created,
			{schema.MessageEnqueued, msg(1, "one").EventData()},
			{schema.MessageEnqueued, msg(2, "two").EventData()},
			{schema.MessageEnqueued, msg(1, "one again").EventData()},
			{schema.MessageEnqueued, msg(3, big).EventData()},
			{schema.MessageDelivered, schema.MessageDeliveredData{MessageID: msgID(2)}}},
			func(t *testing.T, p *State) {
				ms := p.Pending.Peek()
				if len(ms) != 2 || ms[0].ID != msgID(1) || ms[0].Payload != "one" || ms[1].ID != msgID(3) || !p.Enqueued.Has(msgID(2)) ||
					p.Enqueued.Len() != 3 || p.PendingLen() != 2 {
					t.Fatalf("pending %+v", ms)
				}
				if !ms[1].Spilled() || ms[1].Payload != "" || ms[1].Ref.Seq != 5 {
					t.Fatalf("a large payload stayed resident: %+v", ms[1])
				}
			}},
		{"metadata.updated sets and deletes", []rec{created,
			{schema.MetadataUpdated, schema.MetadataUpdatedData{Key: "k", Value: strp("v")}},
			{schema.MetadataUpdated, schema.MetadataUpdatedData{Key: "team"}}},
			func(t *testing.T, p *State) {
				if len(p.Metadata) != 1 || p.Metadata["k"] != "v" {
					t.Fatalf("metadata %v", p.Metadata)
				}
			}},
		{"tool.gate gates and ungates", []rec{created,
			{schema.ToolGate, schema.GateData{Action: "gate", AgentName: "w"}}},
			func(t *testing.T, p *State) {
				if !p.Gated {
					t.Fatal("not gated")
				}
			}},
		{"tool.gate ungate", []rec{created,
			{schema.ToolGate, schema.GateData{Action: "gate"}}, {schema.ToolGate, schema.GateData{Action: "ungate"}}},
			func(t *testing.T, p *State) {
				if p.Gated {
					t.Fatal("still gated")
				}
			}},
		{"subscriptions", []rec{created,
			{schema.ToolSubscribe, schema.SubscribeData{SubscriptionID: "s1", TargetID: "b", From: "busy", To: "idle", Once: true}},
			{schema.ToolSubscribe, schema.SubscribeData{SubscriptionID: "s2", TargetID: "c"}},
			{schema.ToolUnsubscribe, schema.UnsubscribeData{SubscriptionID: "s2", Reason: "fired"}}},
			func(t *testing.T, p *State) {
				if len(p.Subs) != 1 || p.Subs["s1"] != (Subscription{ID: "s1", Target: "b", From: "busy", To: "idle", Once: true}) {
					t.Fatalf("subs %+v", p.Subs)
				}
			}},
		{"reminders: scheduled, fired (one-shot gone, repeating kept), cancelled", []rec{created,
			{schema.ReminderSched, schema.ReminderData{ReminderID: "r1", Reason: "once", Due: "2026-01-02T04:00:00Z"}},
			{schema.ReminderSched, schema.ReminderData{ReminderID: "r2", Reason: "every", Due: "2026-01-02T04:00:00Z", EveryMS: 60000}},
			{schema.ReminderSched, schema.ReminderData{ReminderID: "r3", Reason: "dropped"}},
			{schema.ReminderCancel, schema.ReminderData{ReminderID: "r3"}},
			{schema.MessageEnqueued, reminderMsg(4, "r1").EventData()},
			{schema.MessageEnqueued, reminderMsg(5, "r2").EventData()}},
			func(t *testing.T, p *State) {
				r := p.Reminders["r2"]
				if len(p.Reminders) != 1 || r == nil || r.Every != time.Minute || r.Reason != "every" || !r.LastHit.Equal(t0) ||
					!r.Due.Equal(time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)) {
					t.Fatalf("reminders %+v", p.Reminders)
				}
			}},
		{"unknown events are skipped but counted", []rec{created, {"something.new", map[string]any{"x": 1}}},
			func(t *testing.T, p *State) {
				if p.LastSeq != 2 || p.LastOff <= 0 {
					t.Fatalf("last seq %d off %d", p.LastSeq, p.LastOff)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			es := entries(tc.log)
			live, err := foldLive(es)
			if err != nil {
				t.Fatal(err)
			}
			if live.LastSeq != uint64(len(es)) || live.LastOff != es[len(es)-1].Off {
				t.Fatalf("last seq %d off %d, want %d %d", live.LastSeq, live.LastOff, len(es), es[len(es)-1].Off)
			}
			tc.check(t, live)
			replayed, err := foldReplay(nil, es, nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, replayed)
			if a, b := stateOf(live), stateOf(replayed); a != b {
				t.Fatalf("live and replay folds differ:\nlive:   %s\nreplay: %s", a, b)
			}
		})
	}
}

// reminderMsg is the message a reminder delivers.
func reminderMsg(n int, id string) inbox.Message {
	m := msg(n, "reminder")
	m.Metadata = map[string]string{"reminder_id": id}
	return m
}

// A known event with data that is not its type is an error naming the
// event and the line; the state is otherwise left as it was.
func TestFoldRefusesMalformedData(t *testing.T) {
	for _, ev := range []string{schema.AgentCreated, schema.SessionCreated, schema.TurnStart, schema.TurnComplete, schema.TurnFailed,
		schema.RunWaiting, schema.TokenConsumed, schema.RunResumed, schema.ToolCall, schema.MessageEnqueued, schema.MessageDelivered,
		schema.MetadataUpdated, schema.ToolGate, schema.ToolSubscribe, schema.ReminderSched} {
		es := entries([]rec{created, {ev, []int{1}}})
		_, err := foldLive(es)
		if err == nil || !strings.Contains(err.Error(), ev) || !strings.Contains(err.Error(), "seq 2") {
			t.Errorf("%s with an array for data: err %v", ev, err)
		}
	}
}

// TestReplayKeepsClientIDs: a replay keys pending messages by their 16
// bytes when the id is 32 hex digits and by the id itself otherwise (a
// client's own ids, an id in capitals); both kinds are taken by
// message.delivered and by a completed turn's message_ids, and what
// stays pending is the same as the live fold's, in order.
func TestReplayKeepsClientIDs(t *testing.T) {
	m := func(id, text string) inbox.Message {
		x := msg(0, text)
		x.ID = id
		return x
	}
	hexID := "0000000000000000000000000000abcd"
	upper := strings.ToUpper(hexID)
	recs := []rec{created,
		{schema.MessageEnqueued, m("client-1", "one").EventData()},
		{schema.MessageEnqueued, m(upper, "capitals").EventData()},
		{schema.MessageEnqueued, m(hexID, "hex").EventData()},
		{schema.MessageEnqueued, m("client-2", "two").EventData()},
		{schema.MessageEnqueued, m("client-3", "three").EventData()},
		{schema.MessageDelivered, schema.MessageDeliveredData{MessageID: "client-1"}},
		{schema.TurnStart, schema.TurnStartData{RunID: "r1", Turn: 1, Prompt: "go", Provider: "p2", Model: "m2", MessageIDs: []string{upper, "client-3", "never-enqueued"}}},
		{schema.TurnComplete, schema.TurnCompleteData{RunID: "r1", Turn: 1, Response: "ok"}},
	}
	es := entries(recs)
	_, replayed := foldBoth(t, es)
	var ids []string
	for _, q := range replayed.Pending.Peek() {
		ids = append(ids, q.ID)
	}
	if want := []string{hexID, "client-2"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("pending %q, want %q", ids, want)
	}
	if replayed.Taken != 3 {
		t.Fatalf("taken %d, want 3", replayed.Taken)
	}
}

// TestReplayRepeatedMessageIDs: a turn.start that names message_ids
// twice (the second list decoded by encoding/json into the first: a null
// element keeps the string before it), with invalid UTF-8 in it, folds
// to the same state replayed as live. (Found by review: the replay's raw
// path took such a line where the live fold fell back to encoding/json.)
func TestReplayRepeatedMessageIDs(t *testing.T) {
	id := msgID(0)
	es := entries([]rec{created, {schema.MessageEnqueued, msg(0, "hi").EventData()}})
	data := []byte(`{"run_id":"r1","turn":1,"prompt":"go","message_ids":["` + id + `"],"message_ids":[null,"` + "\xff" + `"]}`)
	if json.Unmarshal(data, new(schema.TurnStartData)) != nil {
		t.Fatal("encoding/json refuses the test's line")
	}
	end, err := json.Marshal(schema.TurnCompleteData{RunID: "r1", Turn: 1, Response: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(len(es))
	es = append(es,
		eventlog.Entry{Seq: n + 1, Off: 1000, TS: t0, Event: schema.TurnStart, Data: data},
		eventlog.Entry{Seq: n + 2, Off: 2000, TS: t0, Event: schema.TurnComplete, Data: end})
	live, _ := foldBoth(t, es)
	if live.PendingLen() != 0 || live.Taken != 1 {
		t.Fatalf("the turn took %d, %d pending; want the message taken", live.Taken, live.PendingLen())
	}
}

// TestReplayRepeatedMessageID: a message.enqueued whose data names
// message_id twice is the message encoding/json decodes (the last id)
// replayed as live.
func TestReplayRepeatedMessageID(t *testing.T) {
	first, last := msgID(1), msgID(2)
	data := []byte(`{"kind":"request","message_id":"` + first + `","message_id":"` + last + `","metadata":{},"payload":"hi","recipient":"a","reply_to":null,"sender":"s","timestamp":"2026-01-02T03:04:05Z"}`)
	es := entries([]rec{created})
	es = append(es, eventlog.Entry{Seq: 2, Off: 500, TS: t0, Event: schema.MessageEnqueued, Data: data})
	_, replayed := foldBoth(t, es)
	if !replayed.Enqueued.Has(last) || replayed.Enqueued.Has(first) {
		t.Fatalf("enqueued %v, want only the last id", replayed.Enqueued.Len())
	}
}

// foldBoth folds es live and replayed and fails unless both give the
// same state.
func foldBoth(t *testing.T, es []eventlog.Entry) (live, replayed *State) {
	t.Helper()
	live, err := foldLive(es)
	if err != nil {
		t.Fatal(err)
	}
	replayed, err = foldReplay(nil, es, loader(es))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := stateOf(live), stateOf(replayed); a != b {
		t.Fatalf("replay differs from the live fold:\nlive:\n%s\nreplay:\n%s", a, b)
	}
	return live, replayed
}
