package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"testing"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
)

func testReads(t *testing.T, h Harness) {
	s := h.New(t)
	id := NewID(t)
	ctx := context.Background()
	lg := open(t, s, id, store.LogOptions{})
	defer lg.Close()
	var all []eventlog.Entry
	for i := 0; i < 7; i++ {
		e, err := lg.Append("e", payload{N: i})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, e)
	}
	for _, hint := range []int64{all[4].Off, 0, all[1].Off} {
		e, err := s.ReadSeq(ctx, id, 5, hint)
		if err != nil {
			t.Fatalf("ReadSeq(5, hint %d): %v", hint, err)
		}
		sameEntries(t, []eventlog.Entry{e}, all[4:5])
	}
	if _, err := s.ReadSeq(ctx, id, 99, 0); !errors.Is(err, eventlog.ErrNoSuchSeq) {
		t.Fatalf("ReadSeq(99): %v, want ErrNoSuchSeq", err)
	}
	for _, hint := range []int64{0, all[2].Off} {
		r, err := s.Read(ctx, id, 3, hint)
		if err != nil {
			t.Fatal(err)
		}
		var got []eventlog.Entry
		for {
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, e)
		}
		_ = r.Close()
		sameEntries(t, got, all[2:])
	}
}

func testAgents(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := context.Background()
	ids := []string{NewID(t), NewID(t), NewID(t)}
	for _, id := range ids {
		lg := open(t, s, id, store.LogOptions{})
		if _, err := lg.Append(schema.AgentCreated, schema.AgentCreatedData{AgentID: id}); err != nil {
			t.Fatal(err)
		}
		_ = lg.Close()
	}
	ul, err := s.Own(ctx, store.UserID)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Release(ctx)
	u, err := s.UserLog(ctx, store.LogOptions{Lease: ul})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Append(schema.MessageEnqueued, map[string]string{"message_id": "m"}); err != nil {
		t.Fatal(err)
	}
	_ = u.Close()
	if _, err := s.ReadSeq(ctx, store.UserID, 1, 0); err != nil {
		t.Fatalf("USER log: %v", err)
	}
	got, err := s.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	sort.Strings(ids)
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("Agents() = %v, want %v", got, ids)
	}
}

func testMissing(t *testing.T, h Harness) {
	s := h.New(t)
	id := NewID(t)
	ctx := context.Background()
	l, err := s.Own(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if _, err := s.OpenLog(ctx, id, store.LogOptions{Lease: l, MustExist: true}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("OpenLog(MustExist) of a missing log: %v, want ErrNotFound", err)
	}
	if _, err := s.Read(ctx, id, 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Read of a missing log: %v, want ErrNotFound", err)
	}
}

func testSnapshots(t *testing.T, h Harness) {
	s := h.New(t)
	sn := s.Snapshots()
	id := NewID(t)
	if _, err := sn.Load(id); !errors.Is(err, store.ErrNotFound) || !errors.Is(err, session.ErrNotExist) {
		t.Fatalf("Load of a missing snapshot: %v, want ErrNotFound and session.ErrNotExist", err)
	}
	now := time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)
	small := &session.Session{ID: id, State: session.StateIdle, Provider: "p", Model: "m", Handle: "h", CreatedAt: now, UpdatedAt: now}
	big := small.Clone()
	big.ProviderState = make([]byte, 1<<20+12345) // over one NATS message once base64
	if _, err := rand.Read(big.ProviderState); err != nil {
		t.Fatal(err)
	}
	for _, want := range []*session.Session{small, big, small} {
		if err := sn.Save(want); err != nil {
			t.Fatalf("Save (%d-byte state): %v", len(want.ProviderState), err)
		}
		got, err := sn.Load(id)
		if err != nil {
			t.Fatalf("Load (%d-byte state): %v", len(want.ProviderState), err)
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if !bytes.Equal(gj, wj) {
			t.Fatalf("snapshot round trip (%d-byte state) differs", len(want.ProviderState))
		}
	}
	if err := sn.Save(&session.Session{ID: "nothex"}); err == nil {
		t.Fatal("Save of an invalid session succeeded")
	}
	if err := sn.Remove(id); err != nil {
		t.Fatal(err)
	}
	if _, err := sn.Load(id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load after Remove: %v, want ErrNotFound", err)
	}
	if err := sn.Remove(id); err != nil {
		t.Fatalf("Remove of a missing snapshot: %v", err)
	}
}
