package jetstream

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/storetest"
)

// readFixture writes n entries to a log of its own, interleaved with
// another log's (so the log's stream seqs have holes), and returns the
// store, the log's subject and its messages as the leader holds them.
func readFixture(t *testing.T, n int) (*Store, string, []*jetstream.RawStreamMsg) {
	t.Helper()
	s := harness().New(t).(*Store)
	ctx := context.Background()
	var logs []store.Log
	var subj string
	for k := range 2 {
		id := storetest.NewID(t)
		if k == 0 {
			subj = Subject(id)
		}
		lease, err := s.Own(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
		lg, err := s.OpenLog(ctx, id, store.LogOptions{Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, lg)
	}
	for i := range n {
		for _, lg := range logs {
			if _, err := lg.Append("k", payload(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var msgs []*jetstream.RawStreamMsg
	for from := uint64(1); ; {
		m, err := s.leaderGet(ctx, msgGetRequest{Seq: from, NextFor: subj})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
		from = m.Sequence + 1
	}
	if len(msgs) != n {
		t.Fatalf("fixture: %d messages, want %d", len(msgs), n)
	}
	return s, subj, msgs
}

// readEach reads r to its end and returns the seqs read.
func readEach(t *testing.T, r *reader) []uint64 {
	t.Helper()
	var seqs []uint64
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return seqs
		}
		if err != nil {
			t.Fatalf("after seqs %v: %v", seqs, err)
		}
		seqs = append(seqs, e.Seq)
	}
}

func wantSeqs(t *testing.T, got []uint64, from, to uint64) {
	t.Helper()
	if len(got) != int(to-from+1) {
		t.Fatalf("read seqs %v, want %d..%d", got, from, to)
	}
	for i, s := range got {
		if s != from+uint64(i) {
			t.Fatalf("read seqs %v, want %d..%d", got, from, to)
		}
	}
}

// TestReaderTakesTheLeadersWordOverAReplicas: a replica's batch (direct
// get) that skipped an entry, holds a damaged line, or starts elsewhere
// than the hint is not folded and not reported as damage: the stream
// leader's message is read instead, and the read goes on, whole and in
// order. A replica's batch is stood in for by the reader's buffer.
func TestReaderTakesTheLeadersWordOverAReplicas(t *testing.T) {
	s, subj, msgs := readFixture(t, 6)
	ctx := context.Background()
	end := msgs[len(msgs)-1].Sequence
	newR := func(fromSeq, hint uint64, batch ...*jetstream.RawStreamMsg) *reader {
		r := s.newReader(ctx, subj, fromSeq, hint, end)
		t.Cleanup(func() { _ = r.Close() })
		r.buf = batch
		return r
	}

	t.Run("WholeByDirectGet", func(t *testing.T) {
		r := newR(0, 0)
		wantSeqs(t, readEach(t, r), 1, 6)
		if r.nbatch != 1 || !r.direct {
			t.Fatalf("%d direct batches, leader asked: %v; want one batch and no leader get", r.nbatch, !r.direct)
		}
	})
	t.Run("BatchesCutByBytes", func(t *testing.T) {
		// A replica ends a batch at the byte bound; the reader asks for
		// the next one from where it stopped.
		r := newR(0, 0)
		r.bytes = 1
		wantSeqs(t, readEach(t, r), 1, 6)
		if r.nbatch != 6 || !r.direct {
			t.Fatalf("%d direct batches, leader asked: %v; want six one-message batches and no leader get", r.nbatch, !r.direct)
		}
	})
	t.Run("ReplicaSkippedAnEntry", func(t *testing.T) {
		wantSeqs(t, readEach(t, newR(0, 0, msgs[0], msgs[2], msgs[3])), 1, 6)
	})
	t.Run("ReplicaLacksTheFirst", func(t *testing.T) {
		wantSeqs(t, readEach(t, newR(0, 0, msgs[1], msgs[2])), 1, 6)
	})
	t.Run("ReplicaLineDamaged", func(t *testing.T) {
		bad := *msgs[1]
		bad.Data = append([]byte(nil), bad.Data...)
		bad.Data[len(bad.Data)/2] ^= 0x20
		wantSeqs(t, readEach(t, newR(0, 0, msgs[0], &bad, msgs[2])), 1, 6)
	})
	t.Run("ReplicaBeyondTheEnd", func(t *testing.T) {
		beyond := *msgs[1]
		beyond.Sequence = end + 10
		wantSeqs(t, readEach(t, newR(0, 0, msgs[0], &beyond)), 1, 6)
	})
	t.Run("ReplicaStartsAfterTheHint", func(t *testing.T) {
		// From the hint of entry 3 (its stream seq), a replica that
		// answers with entry 5 first would have the read start there.
		wantSeqs(t, readEach(t, newR(3, msgs[2].Sequence, msgs[4], msgs[5])), 3, 6)
	})
	t.Run("LeaderDamageIsCorrupt", func(t *testing.T) {
		// A seq break the leader confirms is damage, not a lag.
		r := newR(0, 0)
		r.direct = false
		r.last = 1 // as if entry 2 had been read: the leader's entry 1 breaks the order
		r.first = false
		if _, err := r.Next(); !errors.Is(err, eventlog.ErrCorrupt) {
			t.Fatalf("a seq break the leader holds: %v, want ErrCorrupt", err)
		}
	})
}
