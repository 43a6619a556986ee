package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

// Harness gives the suite fresh stores and a view of their raw bytes.
type Harness struct {
	// New returns an empty store; the harness closes it at cleanup.
	New func(t *testing.T) store.Store
	// Reopen returns a second Store over the same data as s (a restart:
	// s is closed first by the suite).
	Reopen func(t *testing.T, s store.Store) store.Store
	// Raw returns the log of id as the store keeps it: the file's bytes
	// (local) or the message bodies concatenated (jetstream).
	Raw func(t *testing.T, s store.Store, id string) []byte
	// Takeover, for stores that fence, makes another daemon claim id as
	// if the current owner's lease had lapsed without its knowing, and
	// returns the new claim. Nil for a store with one owner per home.
	Takeover func(t *testing.T, s store.Store, id string) store.Lease
}

// Run runs the conformance suite.
func Run(t *testing.T, h Harness) {
	t.Run("AppendReadBackIsJSONL", func(t *testing.T) { testAppendReadBack(t, h) })
	t.Run("SeqGapFreeUnderConcurrency", func(t *testing.T) { testGapFree(t, h) })
	t.Run("BatchAllOrNone", func(t *testing.T) { testBatchAtomic(t, h) })
	t.Run("ReopenReplaysSameEntries", func(t *testing.T) { testReopen(t, h) })
	t.Run("ResumeSkipsFoldedEntries", func(t *testing.T) { testResume(t, h) })
	t.Run("ReadsByHint", func(t *testing.T) { testReads(t, h) })
	t.Run("AgentsAndUserLog", func(t *testing.T) { testAgents(t, h) })
	t.Run("MissingLog", func(t *testing.T) { testMissing(t, h) })
	t.Run("Snapshots", func(t *testing.T) { testSnapshots(t, h) })
	if h.Takeover != nil {
		t.Run("FencedConflict", func(t *testing.T) { testFenced(t, h) })
		t.Run("FencedBatchWritesNothing", func(t *testing.T) { testFencedBatch(t, h) })
	}
}

// NewID returns a random agent id.
func NewID(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func open(t *testing.T, s store.Store, id string, o store.LogOptions) store.Log {
	t.Helper()
	ctx := context.Background()
	if o.Lease == nil {
		l, err := s.Own(ctx, id)
		if err != nil {
			t.Fatalf("Own(%s): %v", id, err)
		}
		t.Cleanup(func() { _ = l.Release(context.Background()) })
		o.Lease = l
	}
	lg, err := s.OpenLog(ctx, id, o)
	if err != nil {
		t.Fatalf("OpenLog(%s): %v", id, err)
	}
	return lg
}

type payload struct {
	N    int    `json:"n"`
	Text string `json:"text"`
}

// encode is the line eventlog writes for e.
func encode(t *testing.T, e eventlog.Entry) []byte {
	t.Helper()
	line, err := record.EncodeLine(e.Seq, e.TS, eventlog.Record{Event: e.Event, Data: e.Data})
	if err != nil {
		t.Fatal(err)
	}
	return line
}

func sameEntries(t *testing.T, got, want []eventlog.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || !g.TS.Equal(w.TS) || g.Event != w.Event || !bytes.Equal(g.Data, w.Data) || g.Off != w.Off {
			t.Fatalf("entry %d: got {%d %s %s %s off %d}, want {%d %s %s %s off %d}", i,
				g.Seq, g.TS, g.Event, g.Data, g.Off, w.Seq, w.TS, w.Event, w.Data, w.Off)
		}
	}
}

func testAppendReadBack(t *testing.T, h Harness) {
	s := h.New(t)
	id := NewID(t)
	var seen []eventlog.Entry
	lg := open(t, s, id, store.LogOptions{OnAppend: func(es []eventlog.Entry) { seen = append(seen, es...) }})
	defer lg.Close()
	var want []eventlog.Entry
	for i := 1; i <= 3; i++ {
		e, err := lg.Append("test.event", payload{N: i, Text: "é \"quoted\"\nline"})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	es, err := lg.AppendBatch([]eventlog.Record{{Event: "test.batch", Data: payload{N: 4}}, {Event: "test.batch"}})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, es...)
	for i, e := range want {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
	}
	if lg.LastSeq() != 5 {
		t.Fatalf("LastSeq %d, want 5", lg.LastSeq())
	}
	sameEntries(t, seen, want)
	got, err := lg.ReadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, want)
	var jsonl []byte
	for _, e := range want {
		jsonl = append(jsonl, encode(t, e)...)
	}
	if raw := h.Raw(t, s, id); !bytes.Equal(raw, jsonl) {
		t.Fatalf("stored bytes differ from the JSONL lines:\n got %q\nwant %q", raw, jsonl)
	}
}

func testGapFree(t *testing.T, h Harness) {
	s := h.New(t)
	id := NewID(t)
	var mu sync.Mutex
	var seen []uint64
	lg := open(t, s, id, store.LogOptions{OnAppend: func(es []eventlog.Entry) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range es {
			seen = append(seen, e.Seq)
		}
	}})
	defer lg.Close()
	const writers, each = 6, 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				var err error
				if i%3 == 2 {
					_, err = lg.AppendBatch([]eventlog.Record{{Event: "w.b", Data: payload{N: w}}, {Event: "w.b", Data: payload{N: w}}})
				} else {
					_, err = lg.Append("w.a", payload{N: w})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := lg.ReadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := writers * (each + each/3)
	if len(got) != n || len(seen) != n {
		t.Fatalf("%d entries read, %d seen by OnAppend, want %d", len(got), len(seen), n)
	}
	for i, e := range got {
		if e.Seq != uint64(i+1) || seen[i] != uint64(i+1) {
			t.Fatalf("position %d: read seq %d, OnAppend seq %d", i, e.Seq, seen[i])
		}
	}
}

func testBatchAtomic(t *testing.T, h Harness) {
	s := h.New(t)
	id := NewID(t)
	lg := open(t, s, id, store.LogOptions{})
	defer lg.Close()
	if _, err := lg.Append("one", nil); err != nil {
		t.Fatal(err)
	}
	_, err := lg.AppendBatch([]eventlog.Record{{Event: "ok"}, {Event: "bad", Data: []int{1}}, {Event: "ok"}})
	if !errors.Is(err, eventlog.ErrInvalidRecord) {
		t.Fatalf("batch with a non-object record: %v, want ErrInvalidRecord", err)
	}
	if lg.LastSeq() != 1 {
		t.Fatalf("LastSeq %d after a refused batch, want 1", lg.LastSeq())
	}
	es, err := lg.AppendBatch([]eventlog.Record{{Event: "b1"}, {Event: "b2"}, {Event: "b3"}})
	if err != nil {
		t.Fatalf("the log must still take a batch: %v", err)
	}
	if es[0].Seq != 2 || es[2].Seq != 4 {
		t.Fatalf("batch seqs %d..%d, want 2..4", es[0].Seq, es[2].Seq)
	}
	got, err := lg.ReadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[1].Event != "b1" || got[3].Event != "b3" {
		t.Fatalf("read back %d entries: %v", len(got), got)
	}
}

func testReopen(t *testing.T, h Harness) {
	s := h.New(t)
	id := NewID(t)
	ctx := context.Background()
	l1, err := s.Own(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	lg := open(t, s, id, store.LogOptions{Lease: l1})
	for i := 0; i < 5; i++ {
		if _, err := lg.Append("e", payload{N: i}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := lg.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := h.Reopen(t, s)
	var replayed []eventlog.Entry
	lg2 := open(t, s2, id, store.LogOptions{MustExist: true, Replay: func(e eventlog.Entry) error {
		replayed = append(replayed, e)
		return nil
	}})
	defer lg2.Close()
	sameEntries(t, withoutClaim(replayed), before)
	// A fencing store may append its claim after the replay; Replay is
	// handed it too: what it saw is the log as OpenLog returns it.
	after, err := lg2.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, replayed, after)
	sameEntries(t, after[:len(before)], before)
	for _, e := range after[len(before):] {
		if e.Event != schema.AgentClaimed {
			t.Fatalf("reopen appended %s", e.Event)
		}
	}
	e, err := lg2.Append("next", nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != uint64(len(after)+1) {
		t.Fatalf("append after reopen got seq %d, want %d", e.Seq, len(after)+1)
	}
}

func testResume(t *testing.T, h Harness) {
	s := h.New(t)
	id := NewID(t)
	ctx := context.Background()
	l1, err := s.Own(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	lg := open(t, s, id, store.LogOptions{Lease: l1})
	var all []eventlog.Entry
	for i := 0; i < 6; i++ {
		e, err := lg.Append("e", payload{N: i})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, e)
	}
	_ = lg.Close()
	_ = l1.Release(ctx)
	cp := all[3]
	r := &eventlog.Resume{Seq: cp.Seq, Off: cp.Off, CRC: record.LineCRC(encode(t, cp))}
	var replayed []eventlog.Entry
	lg2 := open(t, s, id, store.LogOptions{Resume: r, Replay: func(e eventlog.Entry) error {
		replayed = append(replayed, e)
		return nil
	}})
	defer lg2.Close()
	sameEntries(t, withoutClaim(replayed), all[4:])
	if err := lg2.VerifyPrefix(); err != nil {
		t.Fatalf("VerifyPrefix: %v", err)
	}
	_ = lg2.Close()
	bad := *r
	bad.CRC ^= 1
	l3, err := s.Own(ctx, id)
	if err == nil {
		defer l3.Release(ctx)
	} else if h.Takeover != nil {
		l3 = h.Takeover(t, s, id)
	}
	if _, err := s.OpenLog(ctx, id, store.LogOptions{Lease: l3, Resume: &bad}); !errors.Is(err, eventlog.ErrResumeMismatch) {
		t.Fatalf("resume at a wrong crc: %v, want ErrResumeMismatch", err)
	}
}

// withoutClaim drops the agent.claimed a fencing store appends at the end
// of an OpenLog (and hands to Replay).
func withoutClaim(es []eventlog.Entry) []eventlog.Entry {
	if n := len(es); n > 0 && es[n-1].Event == schema.AgentClaimed {
		return es[:n-1]
	}
	return es
}
