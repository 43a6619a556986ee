package userinbox

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

func open(t *testing.T, fsys faultfs.FS, published *int) (*Inbox, *inbox.Totals) {
	t.Helper()
	st := local.New(local.Options{FS: fsys, Home: "/home"})
	lease, err := st.Own(context.Background(), store.UserID)
	if err != nil {
		t.Fatal(err)
	}
	var totals inbox.Totals
	u, err := Open(context.Background(), st, Options{Lease: lease, Totals: &totals, Logger: hclog.NewNullLogger(), Path: "/home/user.jsonl",
		Publish: func(es []eventlog.Entry) { *published += len(es) }})
	if err != nil {
		t.Fatal(err)
	}
	return u, &totals
}

func msg(id string) inbox.Message {
	return inbox.Message{ID: id, Sender: "a", Recipient: inbox.User, Kind: inbox.KindNotification, Payload: "hello " + id,
		Timestamp: time.Unix(1, 0).UTC(), Metadata: map[string]string{}}
}

// TestEnqueueOnceDeliverAndReopen: a message is enqueued once whatever the
// repeats, counted in the daemon's totals, published live; delivered ones
// leave the queue; a reopened inbox folds its log to the same queue.
func TestEnqueueOnceDeliverAndReopen(t *testing.T) {
	fsys := faultfs.NewMem()
	if err := fsys.MkdirAll("/home", 0o700); err != nil {
		t.Fatal(err)
	}
	published := 0
	u, totals := open(t, fsys, &published)
	for _, id := range []string{"m1", "m2", "m1"} {
		if err := u.Enqueue(msg(id)); err != nil {
			t.Fatal(err)
		}
	}
	if u.Len() != 2 || !u.Has("m1") || u.Has("m3") || totals.Count() != 2 || published != 2 {
		t.Fatalf("len %d, totals %d, published %d; want 2 messages once each", u.Len(), totals.Count(), published)
	}
	if err := u.Deliver(u.PeekFirst(1, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if p := u.Peek(); len(p) != 1 || p[0].ID != "m2" {
		t.Fatalf("after delivering the oldest: %v", p)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	published = 0
	again, _ := open(t, fsys, &published)
	defer again.Close()
	if p := again.Peek(); len(p) != 1 || p[0].ID != "m2" || p[0].Payload != "hello m2" || !again.Has("m1") {
		t.Fatalf("reopened: %v", p)
	}
	again.View(func(n int, b int64, has func(string) bool) {
		if n != 1 || b != int64(len("hello m2")) || !has("m1") || has("m3") {
			t.Fatalf("View = %d, %d, has m1 %v, has m3 %v", n, b, has("m1"), has("m3"))
		}
	})
}

// TestDrainAndPending: Drain takes the oldest page, reads its payloads
// back, names the senders and logs the delivery (what it returned is gone
// after a reopen); Pending lists without draining, keeping the references
// when a payload cannot be read.
func TestDrainAndPending(t *testing.T) {
	fsys := faultfs.NewMem()
	if err := fsys.MkdirAll("/home", 0o700); err != nil {
		t.Fatal(err)
	}
	published := 0
	u, _ := open(t, fsys, &published)
	if got, err := u.Drain(10, 1<<20, nil, nil); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Drain of an empty inbox = %v, %v; want an empty list", got, err)
	}
	for _, id := range []string{"m1", "m2", "m3"} {
		if err := u.Enqueue(msg(id)); err != nil {
			t.Fatal(err)
		}
	}
	var filled []string
	fill := func(owner string, msgs []inbox.Message) ([]inbox.Message, error) {
		out := make([]inbox.Message, len(msgs))
		for i, m := range msgs {
			filled = append(filled, owner+":"+m.ID)
			m.Payload = "full " + m.ID
			out[i] = m
		}
		return out, nil
	}
	got, err := u.Drain(2, 1<<20, fill, func(id string) string { return "/" + id })
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{{From: "/a", Text: "full m1", MessageID: "m1", Timestamp: time.Unix(1, 0).UTC()},
		{From: "/a", Text: "full m2", MessageID: "m2", Timestamp: time.Unix(1, 0).UTC()}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Drain = %+v, want %+v", got, want)
	}
	if len(filled) != 2 || filled[0] != "USER:m1" || u.Len() != 1 {
		t.Fatalf("read back %v, %d left; want USER:m1, USER:m2 and 1 left", filled, u.Len())
	}
	if p := u.Pending(fill); len(p) != 1 || p[0].Payload != "full m3" {
		t.Fatalf("Pending = %v, want m3 read back", p)
	}
	failing := func(string, []inbox.Message) ([]inbox.Message, error) { return nil, context.Canceled }
	if p := u.Pending(failing); len(p) != 1 || p[0].Payload != "hello m3" {
		t.Fatalf("Pending with a failed read = %v, want m3 as queued", p)
	}
	if _, err := u.Drain(2, 1<<20, failing, nil); err == nil || u.Len() != 1 {
		t.Fatalf("Drain with a failed read: err %v, %d left; want the error and nothing delivered", err, u.Len())
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	again, _ := open(t, fsys, &published)
	defer again.Close()
	if p := again.Peek(); len(p) != 1 || p[0].ID != "m3" {
		t.Fatalf("reopened after the drain: %v, want m3 alone", p)
	}
}
