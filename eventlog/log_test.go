package eventlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

func TestAppendReadAllAndReopenContinuesSeq(t *testing.T) {
	fsys, path := tempLog(t)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	l, err := Open(fsys, path, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var want []Entry
	for i := 0; i < 3; i++ {
		e := mustAppend(t, l, "agent.created", map[string]any{"i": i})
		if e.Seq != uint64(i+1) || !e.TS.Equal(now) {
			t.Fatalf("entry %d: %+v", i, e)
		}
		want = append(want, e)
	}
	if l.LastSeq() != 3 || l.Path() != path {
		t.Fatalf("LastSeq %d Path %s", l.LastSeq(), l.Path())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append("x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	got, err := ReadAll(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	assertEntries(t, got, want)

	l = mustOpen(t, fsys, path)
	if l.LastSeq() != 3 {
		t.Fatalf("reopened LastSeq %d", l.LastSeq())
	}
	if e := mustAppend(t, l, "x", nil); e.Seq != 4 {
		t.Fatalf("seq after reopen %d", e.Seq)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(PendingPath(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pending file left behind after Close: %v", err)
	}
}

func assertEntries(t *testing.T, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Event != w.Event || !bytes.Equal(g.Data, w.Data) || !g.TS.Equal(w.TS) {
			t.Fatalf("entry %d: got %+v want %+v", i, g, w)
		}
	}
}

func TestOpenRejectsBadPath(t *testing.T) {
	for _, p := range []string{"events.json", "dir/.jsonl", ""} {
		if _, err := Open(faultfs.OS{}, p, Options{}); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("%q: %v", p, err)
		}
	}
}

func TestOpenCreatesMissingParents(t *testing.T) {
	fsys, path := tempLog(t)
	l := mustOpen(t, fsys, path)
	defer l.Close()
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		t.Fatalf("parent not created: %v", err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 0 {
		t.Fatalf("log not created empty: %v", err)
	}
}

func TestGroupAppendConcurrentWriters(t *testing.T) {
	fsys, path := tempLog(t)
	var mu sync.Mutex
	var streamed []Entry
	l, err := Open(fsys, path, Options{OnAppend: func(es []Entry) {
		mu.Lock()
		streamed = append(streamed, es...)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 25
	var wg sync.WaitGroup
	results := make([][]Entry, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				e, err := l.Append("w", map[string]int{"w": w, "i": i})
				if err != nil {
					t.Error(err)
					return
				}
				results[w] = append(results[w], e)
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAll(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != writers*each {
		t.Fatalf("%d entries, want %d", len(got), writers*each)
	}
	var all []Entry
	for _, r := range results {
		// Each writer's own appends are in increasing seq order.
		for i := 1; i < len(r); i++ {
			if r[i].Seq <= r[i-1].Seq {
				t.Fatalf("writer's seqs not increasing: %d then %d", r[i-1].Seq, r[i].Seq)
			}
		}
		all = append(all, r...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	assertEntries(t, got, all)
	assertEntries(t, streamed, all)
}

func TestAppendBatchConsecutiveSeqs(t *testing.T) {
	fsys, path := tempLog(t)
	l := mustOpen(t, fsys, path)
	mustAppend(t, l, "first", nil)
	es, err := l.AppendBatch([]Record{{Event: "token.consumed", Data: map[string]string{"token_id": "t"}}, {Event: "run.resumed"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Seq != 2 || es[1].Seq != 3 || es[1].Event != "run.resumed" {
		t.Fatalf("batch entries %+v", es)
	}
	if es, err := l.AppendBatch(nil); err != nil || es != nil {
		t.Fatalf("empty batch: %v %v", es, err)
	}
	if _, err := l.AppendBatch([]Record{{Event: "ok"}, {Event: ""}}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("invalid batch: %v", err)
	}
	if l.LastSeq() != 3 {
		t.Fatalf("invalid batch changed LastSeq to %d", l.LastSeq())
	}
	l.Close()
	got, err := ReadAll(fsys, path)
	if err != nil || len(got) != 3 {
		t.Fatalf("ReadAll: %d entries, %v", len(got), err)
	}
}

func TestLargeLineRoundTrips(t *testing.T) {
	fsys, path := faultfs.FS(faultfs.NewMem()), memPath
	l := mustOpen(t, fsys, path)
	size := 2 << 20
	if longRun() {
		size = 24 << 20
	}
	big := bytes.Repeat([]byte("a"), size)
	mustAppend(t, l, "small", nil)
	mustAppend(t, l, "big", map[string]string{"blob": string(big)})
	mustAppend(t, l, "after", nil)
	l.Close()
	l = mustOpen(t, fsys, path)
	defer l.Close()
	if l.LastSeq() != 3 {
		t.Fatalf("LastSeq %d", l.LastSeq())
	}
	got, err := ReadAll(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got[1].Data) < len(big) || got[2].Event != "after" {
		t.Fatalf("big entry lost: %d bytes", len(got[1].Data))
	}
}

func TestAppendRejectsOverLimitRecord(t *testing.T) {
	fsys, path := tempLog(t)
	l := mustOpen(t, fsys, path)
	defer l.Close()
	l.maxLine = 1000
	_, err := l.Append("huge", map[string]string{"blob": strings.Repeat("a", 1000)})
	if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), "1000-byte line limit") {
		t.Fatalf("got %v", err)
	}
	if e := mustAppend(t, l, "ok", map[string]string{"blob": strings.Repeat("a", 800)}); e.Seq != 1 {
		t.Fatalf("seq %d", e.Seq)
	}
}

func TestReaderFromSeq(t *testing.T) {
	fsys, path := tempLog(t)
	makeLog(t, fsys, path, 5)
	r, err := NewReader(fsys, path, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seqs []uint64
	for {
		e, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		seqs = append(seqs, e.Seq)
	}
	if fmt.Sprint(seqs) != "[3 4 5]" {
		t.Fatalf("seqs %v", seqs)
	}
	if _, err := NewReader(fsys, path+".missing.jsonl", 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestCloseDuringConcurrentAppends(t *testing.T) {
	m := faultfs.NewMem()
	l := mustOpen(t, m, memPath)
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[uint64]bool{}
	started := make(chan struct{})
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if i == 3 && w == 0 {
					close(started)
				}
				e, err := l.Append("e", map[string]int{"w": w})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[e.Seq] = true
				mu.Unlock()
			}
		}()
	}
	<-started
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	es, err := ReadAll(m, memPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(acked) {
		t.Fatalf("%d entries in the log, %d acknowledged", len(es), len(acked))
	}
	for _, e := range es {
		if !acked[e.Seq] {
			t.Fatalf("entry %d in the log but not acknowledged", e.Seq)
		}
	}
}
