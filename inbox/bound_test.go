package inbox

import (
	"fmt"
	"strings"
	"testing"
)

func msgAt(seq uint64, payload string) Message {
	return Message{ID: fmt.Sprintf("%032x", seq), Sender: "a", Recipient: "b", Kind: KindRequest, Payload: payload, Ref: Ref{Seq: seq, Off: int64(seq) * 100}}
}

// TestSpillFill: a spilled message keeps its size and place, not its text.
func TestSpillFill(t *testing.T) {
	m := msgAt(3, strings.Repeat("x", 500))
	s := m.Spill()
	if !s.Spilled() || s.Payload != "" || s.Size() != 500 || s.Ref != m.Ref {
		t.Fatalf("spilled = %+v", s)
	}
	if f := s.Fill(m.Payload); f.Spilled() || f.Payload != m.Payload || f.Size() != 500 {
		t.Fatalf("filled = %+v", f)
	}
	if e := (Message{ID: "x", Payload: "p"}).Spill(); e.Spilled() {
		t.Fatal("a message without a Ref was spilled: nothing could read it back")
	}
}

// TestQueueBytesAndTotals: a queue counts its payload bytes (spilled ones
// by size) and adds its messages to the attached totals.
func TestQueueBytesAndTotals(t *testing.T) {
	var tot Totals
	q1, q2 := NewQueue(0), NewQueue(0)
	q1.Push(msgAt(1, "aaaa"))
	q1.Attach(&tot)
	q2.Attach(&tot)
	q1.Push(msgAt(2, strings.Repeat("b", 1000)).Spill())
	q2.Push(msgAt(3, "cc"))
	if q1.Bytes() != 1004 || tot.Count() != 3 || tot.Bytes() != 1006 {
		t.Fatalf("q1 %d bytes; totals %d messages %d bytes", q1.Bytes(), tot.Count(), tot.Bytes())
	}
	q1.Take([]string{msgAt(2, "").ID})
	if q1.Bytes() != 4 || tot.Count() != 2 || tot.Bytes() != 6 {
		t.Fatalf("after take: q1 %d bytes; totals %d / %d", q1.Bytes(), tot.Count(), tot.Bytes())
	}
	q2.Attach(nil)
	if tot.Count() != 1 || tot.Bytes() != 4 {
		t.Fatalf("after detach: totals %d / %d", tot.Count(), tot.Bytes())
	}
}

// TestPeekAfterAndFirst: paging by seq, and a first batch bounded by
// count and bytes that always holds one message.
func TestPeekAfterAndFirst(t *testing.T) {
	q := NewQueue(0)
	for i := uint64(1); i <= 6; i++ {
		q.Push(msgAt(i*2, strings.Repeat("z", 10)))
	}
	if got := q.PeekAfter(4, 2); len(got) != 2 || got[0].Ref.Seq != 6 || got[1].Ref.Seq != 8 {
		t.Fatalf("PeekAfter(4, 2) = %v", got)
	}
	if got := q.PeekAfter(12, 0); len(got) != 0 {
		t.Fatalf("PeekAfter past the end = %v", got)
	}
	if got := q.PeekFirst(4, 25); len(got) != 2 {
		t.Fatalf("PeekFirst(4, 25 bytes) took %d messages of 10 bytes, want 2", len(got))
	}
	if got := q.PeekFirst(4, 5); len(got) != 1 {
		t.Fatalf("PeekFirst with a budget smaller than one message took %d, want 1", len(got))
	}
	if got := q.PeekFirst(3, 0); len(got) != 3 {
		t.Fatalf("PeekFirst(3, no byte bound) took %d", len(got))
	}
}

// TestHeldPayloadsAreBounded: past the totals' bound, a pushed message
// keeps only its envelope (a message without a Ref keeps its payload:
// nothing could read it back); taking and detaching give the room back.
func TestHeldPayloadsAreBounded(t *testing.T) {
	var tot Totals
	tot.SetHeldMax(100)
	q, other := NewQueue(0), NewQueue(0)
	q.Attach(&tot)
	other.Attach(&tot)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := q.Push(msgAt(seq, strings.Repeat("x", 60))); err != nil {
			t.Fatal(err)
		}
	}
	noRef := Message{ID: fmt.Sprintf("%032x", 99), Sender: "a", Recipient: "b", Kind: KindRequest, Payload: strings.Repeat("y", 60)}
	if err := other.Push(noRef); err != nil {
		t.Fatal(err)
	}
	got := q.Peek()
	if got[0].Spilled() || !got[1].Spilled() || !got[2].Spilled() || other.Peek()[0].Spilled() {
		t.Fatalf("spilled: %v %v %v, no-ref %v; want the first kept and the others spilled", got[0].Spilled(), got[1].Spilled(), got[2].Spilled(), other.Peek()[0].Spilled())
	}
	if tot.Held() != 120 || tot.Bytes() != 240 || q.Bytes() != 180 {
		t.Fatalf("held %d, bytes %d, queue bytes %d; want 120 held (the kept and the no-ref payloads) of 240", tot.Held(), tot.Bytes(), q.Bytes())
	}
	q.Take([]string{got[0].ID})
	other.Attach(nil)
	if tot.Held() != 0 {
		t.Fatalf("held %d after the kept message was taken and the other queue detached", tot.Held())
	}
	if err := q.Push(msgAt(4, strings.Repeat("z", 60))); err != nil {
		t.Fatal(err)
	}
	if last := q.Peek()[2]; last.Spilled() || tot.Held() != 60 {
		t.Fatalf("with room again the message is spilled %v, held %d", last.Spilled(), tot.Held())
	}
}
