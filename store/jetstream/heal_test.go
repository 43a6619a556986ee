package jetstream

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/store/storetest"
)

// healCase is a log with one entry whose next append's outcome was lost:
// the handle is poisoned and lost holds the messages it sent.
type healCase struct {
	s        *Store
	l        *Log
	lost     []*nats.Msg
	mu       sync.Mutex
	appended []eventlog.Entry
	healed   int
}

func newHealCase(t *testing.T, recs int) *healCase {
	t.Helper()
	srv := embed(t, natsembed.Options{Name: "n1"})
	h := &healCase{s: newStore(t, connect(t, srv.ClientURL()), "node1", srv)}
	ctx := context.Background()
	id := storetest.NewID(t)
	lease, err := h.s.Own(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	lg, err := h.s.OpenLog(ctx, id, store.LogOptions{Lease: lease,
		OnAppend: func(es []eventlog.Entry) { h.mu.Lock(); h.appended = append(h.appended, es...); h.mu.Unlock() },
		OnHeal:   func() { h.mu.Lock(); h.healed++; h.mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	h.l = lg.(*Log)
	if _, err := h.l.Append("agent.created", map[string]any{"agent_id": id}); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.appended = nil
	h.mu.Unlock()
	lines := make([][]byte, recs)
	for i := range lines {
		line, err := record.EncodeLine(h.l.LastSeq()+1+uint64(i), time.Now(), eventlog.Record{Event: "message.enqueued", Data: map[string]any{"n": i}})
		if err != nil {
			t.Fatal(err)
		}
		lines[i] = line
	}
	h.lost = h.l.messages(lines, h.l.LastSeq()+1, h.l.lastSSeq)
	h.l.setPoison(h.l.failed(nats.ErrTimeout))
	return h
}

// store sends the lost messages for real, as the servers did although
// their answer never came back.
func (h *healCase) store(t *testing.T) {
	t.Helper()
	if _, err := h.l.sendOnce(h.lost); err != nil {
		t.Fatal(err)
	}
}

func (h *healCase) counts() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.appended), h.healed
}

// A handle poisoned by an append whose answer was lost heals once the
// stream answers: as it was when nothing was stored, past the lost
// append's entries (handed to OnAppend, once) when they were, and never
// when another claim wrote after it (fenced for good, no OnHeal).
func TestHealAfterALostAnswer(t *testing.T) {
	t.Run("nothing stored", func(t *testing.T) {
		h := newHealCase(t, 1)
		before := h.l.LastSeq()
		h.l.heal(h.lost)
		if n, healed := h.counts(); n != 0 || healed != 1 || h.l.Degraded() != nil || h.l.LastSeq() != before {
			t.Fatalf("appended %d, healed %d, degraded %v, last seq %d (was %d)", n, healed, h.l.Degraded(), h.l.LastSeq(), before)
		}
		// The next append takes the seq the lost one had.
		e, err := h.l.Append("message.enqueued", map[string]any{"n": "again"})
		if err != nil || e.Seq != before+1 {
			t.Fatalf("append after the heal: seq %d, %v", e.Seq, err)
		}
	})
	for _, recs := range []int{1, 3} {
		t.Run("stored", func(t *testing.T) {
			h := newHealCase(t, recs)
			before := h.l.LastSeq()
			h.store(t)
			h.l.heal(h.lost)
			n, healed := h.counts()
			if n != recs || healed != 1 || h.l.Degraded() != nil || h.l.LastSeq() != before+uint64(recs) {
				t.Fatalf("appended %d of %d, healed %d, degraded %v, last seq %d (was %d)", n, recs, healed, h.l.Degraded(), h.l.LastSeq(), before)
			}
			h.mu.Lock()
			first := h.appended[0].Seq
			h.mu.Unlock()
			if first != before+1 {
				t.Fatalf("the stored entries handed over from seq %d, want %d", first, before+1)
			}
			e, err := h.l.Append("message.enqueued", map[string]any{"n": "next"})
			if err != nil || e.Seq != before+uint64(recs)+1 {
				t.Fatalf("append after the heal: seq %d, %v", e.Seq, err)
			}
			all, err := h.l.ReadAll(context.Background())
			if err != nil || len(all) != int(before)+recs+1 {
				t.Fatalf("the log holds %d entries (%v), want %d", len(all), err, int(before)+recs+1)
			}
		})
	}
	t.Run("another claim wrote", func(t *testing.T) {
		h := newHealCase(t, 1)
		lease := takeover(t, h.s, h.l.id)
		other, err := h.s.OpenLog(context.Background(), h.l.id, store.LogOptions{Lease: lease}) // appends its claim
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		h.l.heal(h.lost)
		if n, healed := h.counts(); n != 0 || healed != 0 || !errors.Is(h.l.Degraded(), store.ErrFenced) {
			t.Fatalf("appended %d, healed %d, degraded %v: want fenced, nothing handed over", n, healed, h.l.Degraded())
		}
		if _, err := h.l.Append("message.enqueued", nil); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("append on a fenced handle: %v", err)
		}
	})
}
