package inbox

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

func msg(n int, kind Kind, sender string) Message {
	return Message{ID: fmt.Sprintf("%032x", n), Sender: sender, Recipient: "r", Kind: kind, Payload: fmt.Sprint("p", n)}
}

func ids(ms []Message) []int {
	out := make([]int, len(ms))
	for i, m := range ms {
		_, _ = fmt.Sscanf(m.ID, "%x", &out[i])
	}
	return out
}

func fill(t *testing.T, q *Queue, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		kind := KindRequest
		if i%2 == 0 {
			kind = KindNotification
		}
		if err := q.Push(msg(i, kind, fmt.Sprint("s", i%3))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQueueFIFO(t *testing.T) {
	var q Queue // zero value works
	fill(t, &q, 5)
	if q.Len() != 5 {
		t.Fatalf("Len = %d", q.Len())
	}
	if got := ids(q.Peek()); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("Peek = %v", got)
	}
	if q.Len() != 5 {
		t.Fatal("Peek removed messages")
	}
	if got := ids(q.Drain()); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("Drain = %v", got)
	}
	if q.Len() != 0 || len(q.Peek()) != 0 || q.Has(msg(1, KindRequest, "").ID) {
		t.Fatal("queue not empty after Drain")
	}
}

func TestQueueTakeKeepsOthersInOrder(t *testing.T) {
	q := NewQueue(0)
	fill(t, q, 6)
	// Ask in a scrambled order, include an id that is not queued.
	got := q.Take([]string{msg(5, "", "").ID, msg(2, "", "").ID, msg(99, "", "").ID, msg(2, "", "").ID})
	if !slices.Equal(ids(got), []int{2, 5}) {
		t.Fatalf("Take = %v, want [2 5] in queue order", ids(got))
	}
	if rest := ids(q.Peek()); !slices.Equal(rest, []int{1, 3, 4, 6}) {
		t.Fatalf("remaining = %v", rest)
	}
	if q.Has(msg(2, "", "").ID) || !q.Has(msg(3, "", "").ID) {
		t.Fatal("Has disagrees with contents")
	}
	if got := q.Take(nil); got != nil {
		t.Fatalf("Take(nil) = %v", got)
	}
	// A message arriving "during a turn" is not taken by the turn's Take.
	shown := q.Peek()
	if err := q.Push(msg(7, KindRequest, "late")); err != nil {
		t.Fatal(err)
	}
	shownIDs := make([]string, len(shown))
	for i, m := range shown {
		shownIDs[i] = m.ID
	}
	q.Take(shownIDs)
	if rest := ids(q.Peek()); !slices.Equal(rest, []int{7}) {
		t.Fatalf("after taking the shown messages: %v, want the late one", rest)
	}
}

func TestQueueCollect(t *testing.T) {
	q := NewQueue(0)
	fill(t, q, 7)
	got := q.Collect(func(m Message) bool { return m.Kind == KindNotification })
	if !slices.Equal(ids(got), []int{2, 4, 6}) {
		t.Fatalf("Collect(notification) = %v", ids(got))
	}
	if rest := ids(q.Peek()); !slices.Equal(rest, []int{1, 3, 5, 7}) {
		t.Fatalf("remaining = %v", rest)
	}
	// AND of filters, as check_inbox does.
	got = q.Collect(func(m Message) bool { return m.Kind == KindRequest && m.Sender == "s1" })
	if !slices.Equal(ids(got), []int{1, 7}) {
		t.Fatalf("Collect(request from s1) = %v", ids(got))
	}
	if got := q.Collect(nil); got != nil {
		t.Fatalf("Collect(nil) = %v", got)
	}
	if got := q.Collect(func(Message) bool { return false }); got != nil {
		t.Fatalf("Collect(nothing) = %v", got)
	}
	if rest := ids(q.Peek()); !slices.Equal(rest, []int{3, 5}) {
		t.Fatalf("remaining = %v", rest)
	}
	// Collected ids can be pushed again (they left the queue).
	if err := q.Push(msg(1, KindRequest, "s1")); err != nil {
		t.Fatalf("re-push after collect: %v", err)
	}
}

func TestQueuePushErrors(t *testing.T) {
	q := NewQueue(2)
	fill(t, q, 2)
	if err := q.Push(msg(3, KindRequest, "s")); !errors.Is(err, ErrFull) {
		t.Fatalf("Push over bound = %v, want ErrFull", err)
	}
	if err := q.Push(msg(1, KindRequest, "s")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("Push duplicate = %v, want ErrDuplicate", err)
	}
	for _, bad := range []Message{
		{Sender: "s", Recipient: "r", Kind: KindRequest},
		{ID: "x", Recipient: "r", Kind: KindRequest},
		{ID: "x", Sender: "s", Kind: KindRequest},
		{ID: "x", Sender: "s", Recipient: "r", Kind: "bogus"},
		{ID: "x", Sender: "s", Recipient: "r"},
	} {
		if err := NewQueue(0).Push(bad); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("Push(%+v) = %v, want ErrInvalidMessage", bad, err)
		}
	}
	if ids(q.Peek())[1] != 2 || q.Len() != 2 {
		t.Fatal("failed pushes changed the queue")
	}
	q.Take([]string{msg(1, "", "").ID})
	if err := q.Push(msg(3, KindRequest, "s")); err != nil {
		t.Fatalf("Push after room freed: %v", err)
	}
}

func TestQueueCopies(t *testing.T) {
	q := NewQueue(0)
	m := msg(1, KindRequest, "s")
	m.Metadata = map[string]string{"k": "v"}
	if err := q.Push(m); err != nil {
		t.Fatal(err)
	}
	m.Metadata["k"] = "caller changed"
	p := q.Peek()
	if p[0].Metadata["k"] != "v" {
		t.Fatal("queue shares the pushed message's metadata")
	}
	p[0].Metadata["k"] = "peeker changed"
	p[0].Payload = "x"
	if got := q.Peek()[0]; got.Metadata["k"] != "v" || got.Payload != "p1" {
		t.Fatal("Peek returns shared data")
	}
}

// TestQueueConcurrent: producers push disjoint ids while consumers take and
// collect; every message comes out exactly once, and within each batch a
// producer's messages come out in the order pushed. Run with -race.
func TestQueueConcurrent(t *testing.T) {
	q := NewQueue(0)
	const producers, each = 4, 300
	var mu sync.Mutex
	var out []Message
	var wg, prodWG sync.WaitGroup
	for p := range producers {
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			for i := range each {
				if err := q.Push(msg(p*each+i, KindRequest, fmt.Sprint("p", p))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	done := make(chan struct{})
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var got []Message
				if c == 0 {
					shown := q.Peek()
					ids := make([]string, len(shown))
					for i, m := range shown {
						ids[i] = m.ID
					}
					got = q.Take(ids)
				} else {
					got = q.Collect(func(m Message) bool { return m.Sender == "p1" || m.Sender == "p3" })
				}
				last := map[string]int{}
				for i, m := range got {
					n := ids(got[i : i+1])[0]
					if prev, ok := last[m.Sender]; ok && n <= prev {
						t.Errorf("batch out of order for %s: %d after %d", m.Sender, n, prev)
					}
					last[m.Sender] = n
				}
				mu.Lock()
				out = append(out, got...)
				mu.Unlock()
				select {
				case <-done:
					if q.Len() == 0 {
						return
					}
				default:
				}
			}
		}()
	}
	prodWG.Wait()
	close(done)
	wg.Wait()
	if len(out) != producers*each {
		t.Fatalf("got %d messages, want %d", len(out), producers*each)
	}
	seen := map[string]bool{}
	for _, m := range out {
		if seen[m.ID] {
			t.Fatalf("message %s delivered twice", m.ID)
		}
		seen[m.ID] = true
	}
}
