package engine

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream"
)

// lateAppender is store/jetstream with one foreign append landing in the
// victim's log between OpenLog's read of the log's end and its claim (an
// earlier owner's append still in flight when its lease lapsed): the
// claim is refused by the fence, as the study's round 4 saw.
type lateAppender struct {
	*jetstream.Store
	t      *testing.T
	nc     *nats.Conn
	victim string
	once   sync.Once
}

func (s *lateAppender) OpenLog(ctx context.Context, id string, o store.LogOptions) (store.Log, error) {
	if id != s.victim {
		return s.Store.OpenLog(ctx, id, o)
	}
	replay := o.Replay
	first := true
	o.Replay = func(e eventlog.Entry) error {
		if first {
			first = false
			s.once.Do(func() { s.appendForeign(ctx, id) })
		}
		if replay != nil {
			return replay(e)
		}
		return nil
	}
	return s.Store.OpenLog(ctx, id, o)
}

// appendForeign publishes the next entry of id's log as another owner
// (an earlier epoch's message id).
func (s *lateAppender) appendForeign(ctx context.Context, id string) {
	r, err := s.Store.Read(ctx, id, 0, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	var last uint64
	var lastOff int64
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.t.Fatal(err)
		}
		last, lastOff = e.Seq, e.Off
	}
	r.Close()
	v := "late"
	line, err := record.EncodeLine(last+1, time.Now(), eventlog.Record{Event: schema.MetadataUpdated, Data: schema.MetadataUpdatedData{Key: "from", Value: &v}})
	if err != nil {
		s.t.Fatal(err)
	}
	m := nats.NewMsg(jetstream.Subject(id))
	m.Data = line
	m.Header.Set("Nats-Msg-Id", id+".1."+strconv.FormatUint(last+1, 10))
	// Fenced on the end it knew, as the earlier owner's append was.
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", strconv.FormatInt(lastOff, 10))
	ack, err := s.nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		s.t.Fatal(err)
	}
	if strings.Contains(string(ack.Data), `"error"`) {
		s.t.Fatalf("the late append did not land where the test needs it: %s", ack.Data)
	}
}

// TestFencedClaimIsRetried: an agent whose claim at recovery is refused
// by the fence (another owner's append landed between the read and the
// claim) is left to the takeover scan, which claims it on the new end
// and serves it: never listed corrupt (issue 37; it used to be, until a
// restart).
func TestFencedClaimIsRetried(t *testing.T) {
	srv, nc := embeddedNATS(t)
	boots := 0
	var victim string
	h := newHarness(t, func(h *harness) {
		// No checkpoint: recovery replays the log, so the late append
		// lands during the replay, between the read of the end and the
		// claim.
		h.ckptEvery = -1
		h.store = func(faultfs.FS) store.Store {
			boots++
			st := openEmbeddedStore(t, srv, nc, "")
			if boots == 1 {
				return st
			}
			return &lateAppender{Store: st, t: t, nc: nc, victim: victim}
		}
	})
	victim = h.create("victim", "", "echo")
	h.send(victim, "before")
	h.quiet()
	h.restartAfterLapse(nc) // an earlier owner cut off, not stopped: it can still append
	deadline := time.Now().Add(30 * time.Second)
	for {
		if a, ok := h.c.agent(victim); ok && a.Status(h.c.bootID, h.c.now()) == "idle" {
			break
		}
		if time.Now().After(deadline) {
			a, ok := h.c.agent(victim)
			st := "not listed"
			if ok {
				st = a.Status(h.c.bootID, h.c.now())
			}
			t.Fatalf("the victim is %s 30 s after its fenced claim, want idle (taken by the takeover scan)", st)
		}
		time.Sleep(50 * time.Millisecond) // the takeover scan runs on a timer with no event
	}
	if res := h.send(victim, "after"); res.Err != nil || !strings.Contains(res.Response, "after") {
		t.Fatalf("a turn after the retried claim: %+v", res)
	}
	v, err := h.c.Inspect(context.Background(), victim)
	if err != nil || v.Metadata["from"] != "late" {
		t.Fatalf("the late entry is not in the fold: %+v", v.Metadata)
	}
}
