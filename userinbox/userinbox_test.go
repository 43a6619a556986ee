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
	u, err := Open(st, Options{Lease: lease, Totals: &totals, Logger: hclog.NewNullLogger(), Path: "/home/user.jsonl",
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
