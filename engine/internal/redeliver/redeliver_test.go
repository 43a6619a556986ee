package redeliver

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
)

type fakeEnv struct {
	has       map[string]bool // message ids the recipients have
	line      []byte          // the sender's tool.call line
	delivered []string
}

func (f *fakeEnv) Lacks(s projection.SentRef, agentsOnly bool) bool {
	if agentsOnly && s.To == "USER" {
		return false
	}
	return !f.has[s.ID]
}

func (f *fakeEnv) ReadSeq(_ context.Context, _ string, seq uint64, _ int64) (eventlog.Entry, error) {
	if seq != 7 {
		return eventlog.Entry{}, errors.New("no such line")
	}
	return eventlog.Entry{Seq: 7, Event: schema.ToolCall, Data: f.line}, nil
}

func (f *fakeEnv) Deliver(m inbox.Message) error {
	f.delivered = append(f.delivered, m.ID+">"+m.Recipient+":"+m.Payload)
	return nil
}

// The messages a recipient lacks are read back from the sender's tool.call
// line and delivered; those it has, those to USER under agentsOnly, and
// those whose line cannot be read are not.
func TestRefsDeliversWhatRecipientsLack(t *testing.T) {
	msg := func(id, to, text string) inbox.Message {
		return inbox.Message{ID: id, Sender: "s", Recipient: to, Kind: inbox.KindRequest, Payload: text, Metadata: map[string]string{}}
	}
	line, err := json.Marshal(schema.ToolCallData{CallID: "c", Tool: "broadcast", Args: map[string]any{},
		Messages: []map[string]any{msg("m1", "a", "one").EventData(), msg("m2", "b", "two").EventData(), msg("m3", "USER", "three").EventData()}})
	if err != nil {
		t.Fatal(err)
	}
	env := &fakeEnv{has: map[string]bool{"m2": true}, line: line}
	ref := func(id, to string, i int) projection.SentRef {
		return projection.SentRef{ID: id, To: to, Index: i, Ref: inbox.Ref{Seq: 7}}
	}
	refs := []projection.SentRef{ref("m1", "a", 0), ref("m2", "b", 1), ref("m3", "USER", 2),
		{ID: "m4", To: "a", Ref: inbox.Ref{Seq: 8}}, ref("m5", "a", 9)}
	Refs(env, hclog.NewNullLogger(), "s", refs, true)
	if len(env.delivered) != 1 || env.delivered[0] != "m1>a:one" {
		t.Fatalf("delivered %v, want only m1 to a", env.delivered)
	}
	env.delivered = nil
	Refs(env, hclog.NewNullLogger(), "s", refs[2:3], false)
	if len(env.delivered) != 1 || env.delivered[0] != "m3>USER:three" {
		t.Fatalf("without agentsOnly: delivered %v, want m3 to USER", env.delivered)
	}
}
