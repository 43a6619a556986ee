package limits

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/toolexec"
)

func TestEffective(t *testing.T) {
	d := config.DefaultLimits()
	if got := Effective(config.Limits{}); got != d {
		t.Fatalf("unset limits: %+v, want the defaults %+v", got, d)
	}
	got := Effective(config.Limits{InboxBytes: 7, MessageBytes: 9})
	if got.InboxBytes != 7 || got.MessageBytes != 9 || got.InboxMessages != d.InboxMessages || got.PendingBytes != d.PendingBytes {
		t.Fatalf("set limits kept, the others defaulted: %+v", got)
	}
}

// Each limit refuses with its own text, naming its setting, and wraps
// toolexec.ErrInboxFull.
func TestCheckRoom(t *testing.T) {
	l := config.Limits{InboxMessages: 2, InboxBytes: 100, PendingMessages: 10, PendingBytes: 1000}
	if err := CheckRoom(l, "w1", 1, 50, 50, 9, 950); err != nil {
		t.Fatalf("at the edge: %v", err)
	}
	for _, c := range []struct {
		n       int
		b       int64
		size    int
		cnt, by int64
		want    string
	}{
		{2, 0, 1, 0, 0, "limits.inbox_messages"},
		{0, 100, 1, 0, 0, "limits.inbox_bytes"},
		{0, 0, 1, 10, 0, "limits.pending_messages"},
		{0, 0, 1, 0, 1000, "limits.pending_bytes"},
	} {
		err := CheckRoom(l, "w1", c.n, c.b, c.size, c.cnt, c.by)
		if !errors.Is(err, toolexec.ErrInboxFull) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want inbox full naming %s", c, err, c.want)
		}
	}
}

func TestCheckAgentText(t *testing.T) {
	if err := CheckAgentText(4, "abcd", map[string]string{"ab": "cd"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckAgentText(4, "abcde", nil); err == nil || !strings.Contains(err.Error(), "instructions are 5 bytes") {
		t.Fatalf("long instructions: %v", err)
	}
	if err := CheckAgentText(4, "", map[string]string{"ab": "cde"}); err == nil || !strings.Contains(err.Error(), "metadata is 5 bytes") {
		t.Fatalf("large metadata: %v", err)
	}
}

// A payload left in the log is read back from its line; a line that holds
// another message is an error, not a wrong payload.
func TestFillPayloads(t *testing.T) {
	full := inbox.Message{ID: "m1", Sender: "a", Recipient: "b", Kind: inbox.KindRequest, Payload: "the payload", Metadata: map[string]string{}}
	data, err := json.Marshal(full.EventData())
	if err != nil {
		t.Fatal(err)
	}
	read := func(_ context.Context, id string, seq uint64, _ int64) (eventlog.Entry, error) {
		return eventlog.Entry{Seq: seq, Event: schema.MessageEnqueued, Data: data}, nil
	}
	spilled := inbox.Message{ID: "m1", Ref: inbox.Ref{Seq: 4, Off: 9}, Sender: "a", Recipient: "b", PayloadSize: len(full.Payload)}
	got, err := FillPayloads(read, "b", []inbox.Message{spilled})
	if err != nil || got[0].Payload != "the payload" {
		t.Fatalf("filled %+v, %v", got, err)
	}
	spilled.ID = "other"
	if _, err := FillPayloads(read, "b", []inbox.Message{spilled}); err == nil || !strings.Contains(err.Error(), "not other") {
		t.Fatalf("a line holding another message: %v", err)
	}
}
