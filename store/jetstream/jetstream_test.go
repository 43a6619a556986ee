package jetstream

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/store/storetest"
)

func TestConformance(t *testing.T) { storetest.Run(t, harness()) }

// A server that flushes lazily is refused unless the caller accepts it.
func TestRefusesLazyFsync(t *testing.T) {
	srv := embed(t, natsembed.Options{Name: "lazy", UnsafeLazyFsync: true})
	nc := connect(t, srv.ClientURL())
	ctx := context.Background()
	if _, err := New(ctx, Options{Conn: nc, Embedded: []*server.Server{srv}}); !errors.Is(err, ErrLazyFsync) {
		t.Fatalf("New on a lazy server: %v, want ErrLazyFsync", err)
	}
	// Without the embedded server at hand, the setting must be read from
	// the system account, which a plain user cannot.
	if _, err := New(ctx, Options{Conn: nc, Timeout: 300 * time.Millisecond}); !errors.Is(err, ErrSyncUnknown) {
		t.Fatalf("New without system access: %v, want ErrSyncUnknown", err)
	}
	if _, err := New(ctx, Options{Conn: nc, Embedded: []*server.Server{srv}, UnsafeLazyFsync: true}); err != nil {
		t.Fatalf("New with UnsafeLazyFsync: %v", err)
	}
}

// Dedup ids carry the owner's epoch. Within one claim, re-sending an
// entry is idempotent; a message carrying another claim's id is not
// taken for ours even though JetStream acknowledges it as a duplicate
// (dedup runs before the fence).
func TestEpochScopedDuplicate(t *testing.T) {
	epochScopedDuplicate(t, harness().New(t).(*Store))
}

// epochScopedDuplicate runs on one node (where JetStream checks the fence
// before dedup) and on three (dedup first).
func epochScopedDuplicate(t *testing.T, s *Store) {
	id := storetest.NewID(t)
	ctx := context.Background()
	_, lg := ownedLog(t, s, id)
	old := lg.(*Log)
	e1, err := old.Append("a", nil)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := old.Append("b", nil)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := s.leaderGet(ctx, msgGetRequest{Seq: uint64(e2.Off)})
	if err != nil {
		t.Fatal(err)
	}
	// The same claim re-sends entry 2 (a retry): acknowledged at its
	// place, nothing added.
	seq, err := old.send(old.messages([][]byte{m2.Data}, 2, uint64(e1.Off)))
	if err != nil || seq != uint64(e2.Off) {
		t.Fatalf("re-sending entry 2: seq %d, %v; want %d", seq, err, e2.Off)
	}
	if got := lastSSeq(t, s, id); got != uint64(e2.Off) {
		t.Fatalf("a duplicate added a message: last stream seq %d", got)
	}

	// A new claim takes over and writes seq 3 (after its agent.claimed, seq 3... 4).
	nl, err := s.OpenLog(ctx, id, store.LogOptions{Lease: takeover(t, s, id)})
	if err != nil {
		t.Fatal(err)
	}
	cur := nl.(*Log)
	e4, err := cur.Append("new", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The old owner's seq 3 under its own epoch: refused by the fence.
	if _, err := old.Append("zombie", nil); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("old epoch append: %v, want ErrFenced", err)
	}
	// Were ids not scoped by epoch, the old owner's seq 4 would carry the
	// new owner's id: JetStream answers "duplicate" with the new owner's
	// entry. The handle must see that the stored line is not its own.
	z := &Log{s: s, id: id, subj: Subject(id), epoch: cur.epoch, lastSeq: 3, lastSSeq: uint64(e2.Off)}
	line, err := record.EncodeLine(4, time.Now(), eventlog.Record{Event: "zombie"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := z.messages([][]byte{line}, 4, uint64(e2.Off))
	if msgs[0].Header.Get(hdrMsgID) != id+"."+strconv.FormatUint(cur.epoch, 10)+".4" {
		t.Fatalf("msg id %s", msgs[0].Header.Get(hdrMsgID))
	}
	if _, err := z.send(msgs); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a colliding id was taken for success: %v", err)
	}
	if got := lastSSeq(t, s, id); got != uint64(e4.Off) {
		t.Fatalf("zombie writes reached the stream: last stream seq %d, want %d", got, e4.Off)
	}
	es, err := cur.ReadAll(ctx)
	if err != nil || len(es) != 4 {
		t.Fatalf("log holds %d entries (%v), want 4", len(es), err)
	}
}

func lastSSeq(t *testing.T, s *Store, id string) uint64 {
	t.Helper()
	m, err := s.lastOf(context.Background(), Subject(id))
	if err != nil || m == nil {
		t.Fatalf("last of %s: %v", id, err)
	}
	return m.Sequence
}

// A line altered in the stream is caught by the reader (CRC), as a file
// log would catch it.
func TestCorruptLineDetected(t *testing.T) {
	h := harness()
	s := h.New(t).(*Store)
	id := storetest.NewID(t)
	ctx := context.Background()
	lease, lg := ownedLog(t, s, id)
	e, err := lg.Append("a", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	line, _ := record.EncodeLine(2, e.TS, eventlog.Record{Event: "a", Data: map[string]int{"n": 2}})
	line[len(line)-5] ^= 1 // a flipped crc digit
	m := nats.NewMsg(Subject(id))
	m.Data = line
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadSeq(ctx, id, 2, 0); !errors.Is(err, eventlog.ErrCorrupt) {
		t.Fatalf("reading a damaged line: %v, want ErrCorrupt", err)
	}
	_ = lg.Close()
	_ = lease.Release(ctx)
	l2, _ := s.Own(ctx, id)
	if _, err := s.OpenLog(ctx, id, store.LogOptions{Lease: l2}); !errors.Is(err, eventlog.ErrCorrupt) {
		t.Fatalf("opening a damaged log: %v, want ErrCorrupt", err)
	}
}

// A batch whose later message fails its check writes nothing, not even
// the messages before it: the batch is one atomic publish.
func TestBatchFailingMidwayWritesNothing(t *testing.T) {
	s := harness().New(t).(*Store)
	id := storetest.NewID(t)
	_, lg := ownedLog(t, s, id)
	l := lg.(*Log)
	e1, err := l.Append("one", nil)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for i := uint64(2); i <= 4; i++ {
		line, _ := record.EncodeLine(i, time.Now(), eventlog.Record{Event: "b"})
		lines = append(lines, line)
	}
	msgs := l.messages(lines, 2, uint64(e1.Off))
	msgs[2].Header.Set("Nats-Expected-Stream", "NOT_"+StreamName) // the last message fails
	if _, err := l.send(msgs); err == nil {
		t.Fatal("a batch with a failing message was acknowledged")
	}
	if got := lastSSeq(t, s, id); got != uint64(e1.Off) {
		t.Fatalf("part of a failed batch was stored: last stream seq %d, want %d", got, e1.Off)
	}
}

// Opening a log again under the same claim appends no second claim, also
// when resuming at the claim itself.
func TestReopenSameClaimNoSecondClaim(t *testing.T) {
	s := harness().New(t).(*Store)
	id := storetest.NewID(t)
	ctx := context.Background()
	_, lg := ownedLog(t, s, id)
	if _, err := lg.Append("a", nil); err != nil {
		t.Fatal(err)
	}
	_ = lg.Close()
	lease2 := takeover(t, s, id)
	lg, err := s.OpenLog(ctx, id, store.LogOptions{Lease: lease2})
	if err != nil {
		t.Fatal(err)
	}
	_ = lg.Close()
	es, err := s.readAll(ctx, Subject(id))
	if err != nil || len(es) != 2 {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	claim := es[1]
	line, _ := record.EncodeLine(claim.Seq, claim.TS, eventlog.Record{Event: claim.Event, Data: claim.Data})
	for _, r := range []*eventlog.Resume{nil, {Seq: claim.Seq, Off: claim.Off, CRC: record.LineCRC(line)}} {
		lg, err = s.OpenLog(ctx, id, store.LogOptions{Lease: lease2, Resume: r})
		if err != nil {
			t.Fatal(err)
		}
		_ = lg.Close()
	}
	if es, _ := s.readAll(ctx, Subject(id)); len(es) != 2 {
		t.Fatalf("reopening under the same claim appended: %d entries", len(es))
	}
}
