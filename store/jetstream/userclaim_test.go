package jetstream

import (
	"context"
	"errors"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// encodeEntry is e's line.
func encodeEntry(t *testing.T, e eventlog.Entry) []byte {
	t.Helper()
	line, err := record.EncodeLine(e.Seq, e.TS, eventlog.Record{Event: e.Event, Data: e.Data})
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// TestEmptyUserLogIsClaimed: the USER log is claimed even when empty, so
// the earlier owner's first append to it is fenced. Without the claim the
// old handle's append (fenced on "no entry yet") would land after the new
// owner had claimed the log. The claim is handed to Replay.
func TestEmptyUserLogIsClaimed(t *testing.T) {
	srv := embed(t, natsembed.Options{Name: "n1"})
	s := newStore(t, connect(t, srv.ClientURL()), "node1", srv)
	ctx := context.Background()
	l1, err := s.Own(ctx, store.UserID)
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.UserLog(ctx, store.LogOptions{Lease: l1})
	if err != nil {
		t.Fatal(err)
	}
	lease := takeover(t, s, store.UserID)
	var replayed []eventlog.Entry
	cur, err := s.UserLog(ctx, store.LogOptions{Lease: lease, Replay: func(e eventlog.Entry) error {
		replayed = append(replayed, e)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	// Both opens claimed the empty log: the old owner's claim, then the
	// new one's, handed to Replay last.
	if n := len(replayed); n != 2 || replayed[0].Event != schema.AgentClaimed || !lastIsClaim(encodeEntry(t, replayed[1]), lease.Epoch()) {
		t.Fatalf("replayed %d entries; want the two claims, the new owner's (epoch %d) last", n, lease.Epoch())
	}
	if _, err := old.Append(schema.MessageEnqueued, map[string]string{"x": "late"}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old owner's first append to an empty USER log: %v, want ErrFenced", err)
	}
	if _, err := cur.Append(schema.MessageEnqueued, map[string]string{"x": "new"}); err != nil {
		t.Fatalf("the new owner cannot append: %v", err)
	}
}
