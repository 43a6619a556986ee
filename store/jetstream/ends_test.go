package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/store/storetest"
)

// TestHintEndsReadsEveryEnd: the ends of more logs than one multi_last
// request answers are read, each the log's last message; an id with no
// log gets no hint; done drops them.
func TestHintEndsReadsEveryEnd(t *testing.T) {
	s := harness().New(t).(*Store)
	ctx := context.Background()
	n := multiLastMax + 76
	ids := make([]string, n)
	want := map[string]uint64{}
	for i := range ids {
		ids[i] = fmt.Sprintf("a%04d", i)
		for k := range 1 + i%3 {
			line, err := record.EncodeLine(uint64(k+1), time.Now(), eventlog.Record{Event: "k"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.js.PublishAsync(Subject(ids[i]), line); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-s.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("the fixture's publishes were not acknowledged in a minute")
	}
	for _, id := range ids {
		m, err := s.lastOf(ctx, Subject(id))
		if err != nil || m == nil {
			t.Fatalf("%s: %v", id, err)
		}
		want[Subject(id)] = m.Sequence
	}
	done := s.HintEnds(ctx, append(ids, "nolog"))
	s.hintMu.Lock()
	got := len(s.hints)
	for subj, seq := range want {
		if m := s.hints[subj]; m == nil || m.Sequence != seq || m.Subject != subj {
			t.Errorf("hint of %s: %+v, want stream seq %d", subj, m, seq)
		}
	}
	s.hintMu.Unlock()
	if got != n {
		t.Fatalf("%d hints, want %d (one per log, none for an id without one)", got, n)
	}
	done()
	s.hintMu.Lock()
	defer s.hintMu.Unlock()
	if len(s.hints) != 0 {
		t.Fatalf("%d hints left after done", len(s.hints))
	}
}

// requests counts the requests to subj that match (nil: all) sent on
// nc, the connection the counted requests are made on: a flush of it
// returns once the server delivered every earlier one to the
// subscription's queue.
type requests struct {
	t     *testing.T
	nc    *nats.Conn
	sub   *nats.Subscription
	match func(body []byte) bool
	n     int64
}

func countRequests(t *testing.T, nc *nats.Conn, subj string, match func(body []byte) bool) *requests {
	t.Helper()
	sub, err := nc.SubscribeSync(subj)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &requests{t: t, nc: nc, sub: sub, match: match}
}

// Load returns how many matched so far.
func (r *requests) Load() int64 {
	r.t.Helper()
	if err := r.nc.Flush(); err != nil {
		r.t.Fatal(err)
	}
	for {
		m, err := r.sub.NextMsg(0)
		if err != nil {
			return r.n // nats.ErrTimeout: the queue is empty
		}
		if r.match == nil || r.match(m.Data) {
			r.n++
		}
	}
}

// leaderGets counts the requests to the stream leader's message get.
func leaderGets(t *testing.T, s *Store) *requests {
	return countRequests(t, s.nc, leaderGetPrefix+StreamName, nil)
}

// TestOpenFromAHintAsksNoLeader: a log resumed at its last entry, whose
// end was read ahead, opens without a request to the stream leader (no
// end, no resume line); without the hint it asks for both.
func TestOpenFromAHintAsksNoLeader(t *testing.T) {
	s := harness().New(t).(*Store)
	ctx := context.Background()
	id := storetest.NewID(t)
	_, lg := ownedLog(t, s, id)
	last, err := lg.Append("k", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = lg.Close()
	lease := takeover(t, s, id)
	line, _ := record.EncodeLine(last.Seq, last.TS, eventlog.Record{Event: last.Event, Data: last.Data})
	resume := eventlog.Resume{Seq: last.Seq, Off: last.Off, CRC: record.LineCRC(line), Len: int64(len(line))}
	for _, hinted := range []bool{true, false} {
		s2 := newStore(t, s.nc, "node2", s.o.Embedded...)
		n := leaderGets(t, s2)
		if hinted {
			defer s2.HintEnds(ctx, []string{id})()
		}
		before := n.Load()
		lg, err := s2.OpenLog(ctx, id, store.LogOptions{Lease: lease, Resume: &resume})
		if err != nil {
			t.Fatal(err)
		}
		got := n.Load() - before
		switch {
		case hinted && got != 0:
			t.Fatalf("the open from a hint asked the leader %d times, want 0", got)
		case !hinted && got != 2:
			t.Fatalf("the open without a hint asked the leader %d times, want 2 (its end and its resume line)", got)
		}
		_ = lg.Close()
	}
}

// TestLaggingHintIsCaughtUp: a hint older than the log's end (a replica
// that lags) is replayed to, the claim fenced on it is refused, and the
// open goes on from the leader's end: every entry replayed once, in
// order, then the claim; the earlier owner is fenced. The same with a
// resume point at the stale end, and past it.
func TestLaggingHintIsCaughtUp(t *testing.T) {
	for _, resumeAt := range []int{-1, 1, 2} { // -1: none; else the index of the entry resumed at
		t.Run(fmt.Sprintf("resume=%d", resumeAt), func(t *testing.T) {
			s := harness().New(t).(*Store)
			ctx := context.Background()
			id := storetest.NewID(t)
			_, old := ownedLog(t, s, id)
			var es []eventlog.Entry
			var stale *jetstream.RawStreamMsg
			for i := range 3 {
				e, err := old.Append(fmt.Sprint("e", i), nil)
				if err != nil {
					t.Fatal(err)
				}
				es = append(es, e)
				if i == 1 {
					if stale, err = s.lastOf(ctx, Subject(id)); err != nil {
						t.Fatal(err)
					}
				}
			}
			lease := takeover(t, s, id)
			var o store.LogOptions
			want := []string{"e0", "e1", "e2", schema.AgentClaimed}
			if resumeAt >= 0 {
				e := es[resumeAt]
				line, _ := record.EncodeLine(e.Seq, e.TS, eventlog.Record{Event: e.Event, Data: e.Data})
				o.Resume = &eventlog.Resume{Seq: e.Seq, Off: e.Off, CRC: record.LineCRC(line), Len: int64(len(line))}
				want = want[resumeAt+1:]
			}
			var replayed []string
			o.Lease = lease
			o.Replay = func(e eventlog.Entry) error { replayed = append(replayed, e.Event); return nil }
			s.hintMu.Lock()
			s.hints[Subject(id)] = stale
			s.hintMu.Unlock()
			lg, err := s.OpenLog(ctx, id, o)
			if err != nil {
				t.Fatalf("open from a lagging hint: %v", err)
			}
			defer lg.Close()
			if fmt.Sprint(replayed) != fmt.Sprint(want) {
				t.Fatalf("replayed %v, want %v", replayed, want)
			}
			if _, err := lg.Append("new", nil); err != nil {
				t.Fatalf("append after the open: %v", err)
			}
			if _, err := old.Append("zombie", nil); err == nil {
				t.Fatal("the earlier owner's append was not fenced")
			}
			all, err := s.readAll(ctx, Subject(id))
			if err != nil {
				t.Fatal(err)
			}
			var events []string
			for _, e := range all {
				events = append(events, e.Event)
			}
			if w := "[e0 e1 e2 agent.claimed new]"; fmt.Sprint(events) != w {
				t.Fatalf("the log holds %v, want %s", events, w)
			}
		})
	}
}

// TestHintOfOwnClaimIsNotTrusted: a hint whose last entry is this
// lease's own claim, while the log went on after it, does not spare the
// claim: the open reads the leader's end, and appends go on.
func TestHintOfOwnClaimIsNotTrusted(t *testing.T) {
	s := harness().New(t).(*Store)
	ctx := context.Background()
	id := storetest.NewID(t)
	_, old := ownedLog(t, s, id)
	if _, err := old.Append("e0", nil); err != nil {
		t.Fatal(err)
	}
	_ = old.Close()
	lease := takeover(t, s, id)
	lg, err := s.OpenLog(ctx, id, store.LogOptions{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	claim, err := s.lastOf(ctx, Subject(id))
	if err != nil {
		t.Fatal(err)
	}
	if !lastIsClaim(claim.Data, lease.Epoch()) {
		t.Fatalf("the open's last entry is not its claim: %s", claim.Data)
	}
	if _, err := lg.Append("after", nil); err != nil {
		t.Fatal(err)
	}
	_ = lg.Close()
	s.hintMu.Lock()
	s.hints[Subject(id)] = claim
	s.hintMu.Unlock()
	lg, err = s.OpenLog(ctx, id, store.LogOptions{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	if _, err := lg.Append("more", nil); err != nil {
		t.Fatalf("append after an open from a hint of its own claim: %v", err)
	}
}

// TestAgentsListsAgainOnlyWhenALogIsNew: the list of logs is asked of
// the server again only when a log was created since the last one, not
// for appends to the logs it listed; the answers are the logs either way.
func TestAgentsListsAgainOnlyWhenALogIsNew(t *testing.T) {
	s := harness().New(t).(*Store)
	ctx := context.Background()
	lists := countRequests(t, s.nc, "$JS.API.STREAM.INFO."+StreamName, func(body []byte) bool {
		return strings.Contains(string(body), "subjects_filter")
	})
	list := func(want ...string) int64 {
		t.Helper()
		before := lists.Load()
		ids, err := s.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		slices.Sort(want)
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Fatalf("Agents: %v, want %v", ids, want)
		}
		return lists.Load() - before
	}
	a, b := storetest.NewID(t), storetest.NewID(t)
	_, la := ownedLog(t, s, a)
	if _, err := la.Append("k", nil); err != nil {
		t.Fatal(err)
	}
	if n := list(a); n != 1 {
		t.Fatalf("the first list asked for the subjects %d times, want 1", n)
	}
	if n := list(a); n != 0 {
		t.Fatalf("a list with the stream unchanged asked for the subjects %d times, want 0", n)
	}
	_, lb := ownedLog(t, s, b)
	if _, err := lb.Append("k", nil); err != nil {
		t.Fatal(err)
	}
	if n := list(a, b); n != 1 {
		t.Fatalf("a list after a new log asked for the subjects %d times, want 1", n)
	}
	for _, lg := range []store.Log{la, lb} {
		if _, err := lg.Append("more", nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := list(a, b); n != 0 {
		t.Fatalf("a list after appends to the same logs asked for the subjects %d times, want 0", n)
	}
}

// TestStateAtSeesEveryChange: a stream that never lost a message is
// keyed by its subject count alone; one that did is keyed by its count
// and last seq too, so a message removed and another added is a change.
func TestStateAtSeesEveryChange(t *testing.T) {
	created := time.Now()
	st := func(first, msgs, last, subjects uint64) *jetstream.StreamInfo {
		return &jetstream.StreamInfo{Created: created, State: jetstream.StreamState{FirstSeq: first, Msgs: msgs, LastSeq: last, NumSubjects: subjects}}
	}
	again := st(1, 10, 10, 3)
	again.Created = created.Add(time.Second)
	for _, c := range []struct {
		a, b *jetstream.StreamInfo
		same bool
	}{
		{st(1, 10, 10, 3), again, false}, // the stream made again
		{st(0, 0, 0, 0), st(0, 0, 0, 0), true},
		{st(1, 10, 10, 3), st(1, 12, 12, 3), true},  // appends to the same logs
		{st(1, 10, 10, 3), st(1, 11, 11, 4), false}, // a new log
		{st(3, 8, 10, 3), st(3, 8, 10, 3), true},    // removed before, nothing since
		{st(3, 8, 10, 3), st(3, 8, 11, 3), false},   // one removed, one added
		{st(3, 8, 10, 3), st(3, 9, 11, 3), false},   // an append after a removal
		{st(1, 10, 10, 3), st(2, 9, 10, 3), false},  // the first message removed
	} {
		if got := stateAt(c.a) == stateAt(c.b); got != c.same {
			t.Errorf("%+v vs %+v: same %v, want %v", c.a.State, c.b.State, got, c.same)
		}
	}
}

// TestMultiLastReplies: what multiLast makes of each kind of answer a
// server can give, from a stand-in responder on a server without the
// stream: the messages before the end are kept, an error status or a
// message not asked for is an error, and HintEnds asks no more after a
// failed request.
func TestMultiLastReplies(t *testing.T) {
	srv := embed(t, natsembed.Options{Name: "n1"})
	nc := connect(t, srv.ClientURL())
	s := &Store{o: Options{Timeout: 2 * time.Second, Logger: hclog.NewNullLogger()}, nc: nc, hints: map[string]*jetstream.RawStreamMsg{}}
	var answerMu sync.Mutex
	answer := "" // what the stand-in answers with; set between requests
	setAnswer := func(a string) { answerMu.Lock(); answer = a; answerMu.Unlock() }
	sub, err := nc.Subscribe(directGetSubject, func(m *nats.Msg) {
		var req struct {
			MultiLast []string `json:"multi_last"`
		}
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Error(err)
			return
		}
		msg := func(subj string, seq int) {
			r := nats.NewMsg(m.Reply)
			r.Header.Set(jetstream.SubjectHeader, subj)
			r.Header.Set(jetstream.SequenceHeader, strconv.Itoa(seq))
			r.Data = []byte("line")
			_ = nc.PublishMsg(r)
		}
		status := func(code string) {
			r := nats.NewMsg(m.Reply)
			r.Header.Set("Status", code)
			_ = nc.PublishMsg(r)
		}
		answerMu.Lock()
		a := answer
		answerMu.Unlock()
		switch a {
		case "two then end":
			msg(req.MultiLast[0], 7)
			msg(req.MultiLast[1], 9)
			status("204")
		case "none":
			status("404")
		case "too many":
			status("413")
		case "one then error":
			msg(req.MultiLast[0], 7)
			status("500")
		case "not asked":
			msg("warren.log.other", 3)
			status("204")
		case "silence":
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	subjs := []string{Subject("a"), Subject("b"), Subject("c")}
	for _, c := range []struct {
		answer string
		got    int
		fails  bool
	}{
		{"two then end", 2, false},
		{"none", 0, false},
		{"too many", 0, true},
		{"one then error", 1, true},
		{"not asked", 0, true},
		{"silence", 0, true},
	} {
		setAnswer(c.answer)
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		got := map[string]*jetstream.RawStreamMsg{}
		err := s.multiLast(context.Background(), subjs, got)
		if len(got) != c.got || (err != nil) != c.fails {
			t.Errorf("%s: %d ends, err %v; want %d ends, failing %v", c.answer, len(got), err, c.got, c.fails)
		}
		if m := got[subjs[0]]; m != nil && (m.Sequence != 7 || string(m.Data) != "line") {
			t.Errorf("%s: the end of %s is %+v", c.answer, subjs[0], m)
		}
	}
	// Past a failed request, HintEnds asks nothing more.
	setAnswer("too many")
	ids := make([]string, 2*multiLastMax+1)
	for i := range ids {
		ids[i] = fmt.Sprint("id", i)
	}
	reqs := countRequests(t, nc, directGetSubject, nil)
	s.HintEnds(context.Background(), ids)()
	if n := reqs.Load(); n != 1 {
		t.Fatalf("HintEnds sent %d requests after the first failed, want 1 in all", n)
	}
}
