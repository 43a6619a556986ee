package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

func testFenced(t *testing.T, h Harness) {
	s := h.New(t)
	id := NewID(t)
	ctx := context.Background()
	old := open(t, s, id, store.LogOptions{})
	for i := 0; i < 3; i++ {
		if _, err := old.Append("old", payload{N: i}); err != nil {
			t.Fatal(err)
		}
	}
	lease := h.Takeover(t, s, id)
	var replayed []eventlog.Entry
	cur := open(t, s, id, store.LogOptions{Lease: lease, Replay: func(e eventlog.Entry) error { replayed = append(replayed, e); return nil }})
	defer cur.Close()
	// The old owner's three entries, then the new owner's claim.
	if len(replayed) != 4 || replayed[3].Event != schema.AgentClaimed {
		t.Fatalf("the new owner replayed %d entries, want 3 and its agent.claimed", len(replayed))
	}
	for i := 0; i < 2; i++ {
		_, err := old.Append("zombie", nil)
		if !errors.Is(err, store.ErrFenced) || !errors.Is(err, eventlog.ErrPoisoned) {
			t.Fatalf("append %d by the old owner: %v, want ErrFenced (and ErrPoisoned)", i, err)
		}
	}
	if old.Degraded() == nil {
		t.Fatal("the fenced handle does not report itself degraded")
	}
	if _, err := cur.Append("new", nil); err != nil {
		t.Fatalf("the new owner cannot append: %v", err)
	}
	if _, err := old.Append("zombie", nil); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a fenced handle accepted an append after the new owner wrote: %v", err)
	}
	got, err := cur.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for i, e := range got {
		if e.Seq != uint64(i+1) {
			t.Fatalf("gap: position %d holds seq %d", i, e.Seq)
		}
		events = append(events, e.Event)
	}
	if want := "[old old old agent.claimed new]"; fmt.Sprint(events) != want {
		t.Fatalf("log holds %v, want %s", events, want)
	}
	var c schema.AgentClaimedData
	if err := json.Unmarshal(got[3].Data, &c); err != nil || c.Epoch != lease.Epoch() {
		t.Fatalf("agent.claimed %s (%v), want epoch %d", got[3].Data, err, lease.Epoch())
	}
}

func testFencedBatch(t *testing.T, h Harness) {
	s := h.New(t)
	id := NewID(t)
	old := open(t, s, id, store.LogOptions{})
	if _, err := old.Append("old", nil); err != nil {
		t.Fatal(err)
	}
	cur := open(t, s, id, store.LogOptions{Lease: h.Takeover(t, s, id)})
	defer cur.Close()
	if _, err := old.AppendBatch([]eventlog.Record{{Event: "z1"}, {Event: "z2"}, {Event: "z3"}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("fenced batch: %v, want ErrFenced", err)
	}
	got, err := cur.ReadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Event != schema.AgentClaimed {
		t.Fatalf("after a fenced batch the log holds %d entries (last %s), want old + agent.claimed", len(got), got[len(got)-1].Event)
	}
}
