package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
)

// Recovery folds each log while reading it, on entries whose data it
// borrows from the read buffer (eventlog.Options.ReplayBorrows), with the
// fast decoders. Its projections must equal those folded from entries
// that own their data (eventlog.ReadAll) with encoding/json, on logs
// longer than the read buffer (so it is reused), that end with pending
// messages and with an open run whose calls are kept, when one buffer and
// arena serve every log in turn, as in recovery.
func TestRecoveryFoldEqualsOwnedJSONFold(t *testing.T) {
	fsys := faultfs.NewMem()
	spec := homeSpec{Agents: 4, EventsPerAgent: 400, GroupSize: 2, ResponsePad: 400}
	if _, err := genHome(fsys, "/home", spec); err != nil {
		t.Fatal(err)
	}
	open := genAgentID(0)
	lg, err := eventlog.Open(fsys, filepath.Join("/home/agents", open, "events.jsonl"), eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := "00000000000000ff0000000000000000"
	late := inbox.Message{ID: "000000ff000000000000000000000000", Sender: genAgentID(1), Recipient: open, Kind: inbox.KindRequest,
		Payload: "pending, and read long before the end of the log", Metadata: map[string]string{}}
	recs := []eventlog.Record{
		{Event: schema.MessageEnqueued, Data: late.EventData()},
		{Event: schema.TurnStart, Data: schema.TurnStartData{RunID: run, Turn: 999, BootID: "b", Prompt: "go \"on\"\n", Provider: "inproc", Model: "echo"}},
		{Event: schema.ToolCall, Data: schema.ToolCallData{CallID: "c", Tool: "check_inbox", Args: map[string]any{},
			Result: map[string]any{"messages": []any{}, "note": "kept for a re-run"}, RunID: run, Turn: 999}},
	}
	// Then enough other lines that the read buffer holding those is
	// reused before the end.
	for i := 0; i < 400; i++ {
		v := strings.Repeat("x", 300)
		recs = append(recs, eventlog.Record{Event: schema.MetadataUpdated, Data: schema.MetadataUpdatedData{Key: "k", Value: &v}})
	}
	if _, err := lg.AppendBatch(recs); err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{FS: fsys, Home: "/home", NoWake: true, CheckpointEvery: -1,
		Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{NativeResume: true})}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	// Loaded one after another with the memory one of recovery's
	// goroutines lends them (loadScratch): every agent's read buffer and
	// arena are the next one's, so a projection that kept any of it would
	// hold the next logs' lines by the time it is checked.
	scratch := newLoadScratch()
	loads := make([]*loaded, spec.Agents)
	for i := range loads {
		id := genAgentID(i)
		path := filepath.Join("/home/agents", id, "events.jsonl")
		if data, _ := faultfs.ReadFile(fsys, path); len(data) < 2*(64<<10) {
			t.Fatalf("log of %s is %d bytes; the test needs several read buffers' worth", id, len(data))
		}
		loads[i] = c.load(context.Background(), id, scratch) // no checkpoints: the whole log
		if loads[i].Err != nil {
			t.Fatalf("loading %s: %v", id, loads[i].Err)
		}
		_ = loads[i].Log.Close()
	}
	for i, l := range loads {
		id := genAgentID(i)
		path := filepath.Join("/home/agents", id, "events.jsonl")
		got, err := l.State.EncodeState()
		if err != nil {
			t.Fatal(err)
		}
		entries, err := eventlog.ReadAll(fsys, path)
		if err != nil {
			t.Fatal(err)
		}
		p := newProjection()
		p.DecodeWithJSON()
		p.BeginReplay(nil)
		for _, e := range entries {
			if err := p.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndReplay(nil); err != nil {
			t.Fatal(err)
		}
		want, err := p.EncodeState()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) || fmtAny(l.State.Pending.Peek()) != fmtAny(p.Pending.Peek()) {
			t.Fatalf("agent %s: recovery's fold differs from a fold of owned entries with encoding/json:\nrecovery: %s\nowned:    %s", id, got, want)
		}
		if i == 0 && (l.State.Run == nil || l.State.Run.Ended || len(l.State.Run.Calls) != 1 || string(l.State.Run.Calls[0].Result) != `{"messages":[],"note":"kept for a re-run"}`) {
			t.Fatalf("agent %s: open run %+v; want one recorded call with its result", id, l.State.Run)
		}
		if l.State.Pending.Len() == 0 {
			t.Fatalf("agent %s: no pending messages; the test needs some", id)
		}
		if i == 0 && l.State.Pending.Peek()[0].Payload != "" && !strings.Contains(fmtAny(l.State.Pending.Peek()), late.Payload) {
			t.Fatalf("agent %s: the message enqueued early is not pending as written: %s", id, fmtAny(l.State.Pending.Peek()))
		}
	}
}
