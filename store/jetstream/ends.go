package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The logs' ends read in batches, as hints that a fenced claim checks
// (doc.go, "Ends read ahead"). Without them each OpenLog of a recovery
// asks the stream leader for its log's last entry: one round trip per
// agent.

// multiLastMax is how many subjects one multi_last request names: the
// server answers at most 1,024 messages to one (getDirectMulti).
const multiLastMax = 1024

// endsWait bounds one multi_last request: a replica that does not answer
// in time only sends the opens to the leader, one by one.
const endsWait = 2 * time.Second

// HintEnds reads the last entries of the logs ids, multiLastMax per
// request, for the OpenLogs of them that follow, until done is called
// (the caller's batch of opens is over). A log the replicas did not answer
// for is opened from the leader's end, as without a hint. A failed or
// unanswered request is logged and ends the reading ahead (the opens wait
// for it: a slow replica must not hold a recovery up request after
// request).
func (s *Store) HintEnds(ctx context.Context, ids []string) (done func()) {
	if u := s.userLease(); u != nil && len(u.clean) > 0 {
		// After a release the opens read the leader's ends: a log opened
		// without its claim rests on its end (lazy.go).
		return func() {}
	}
	subjs := make([]string, 0, len(ids))
	for _, id := range ids {
		if checkID(id) == nil {
			subjs = append(subjs, Subject(id))
		}
	}
	got := make(map[string]*jetstream.RawStreamMsg, len(subjs))
	for start := 0; start < len(subjs); start += multiLastMax {
		part := subjs[start:min(start+multiLastMax, len(subjs))]
		if err := s.multiLast(ctx, part, got); err != nil {
			s.o.Logger.Warn("the logs' ends were not all read ahead; the opens of the others ask the stream leader", "logs", len(subjs), "read", len(got), "err", err)
			break
		}
	}
	s.hintMu.Lock()
	for subj, m := range got {
		s.hints[subj] = m
	}
	s.hintMu.Unlock()
	return func() {
		s.hintMu.Lock()
		for subj, m := range got {
			if s.hints[subj] == m {
				delete(s.hints, subj)
			}
		}
		s.hintMu.Unlock()
	}
}

// takeHint returns, once, the end HintEnds read for subj (nil: none).
func (s *Store) takeHint(subj string) *jetstream.RawStreamMsg {
	s.hintMu.Lock()
	defer s.hintMu.Unlock()
	m := s.hints[subj]
	delete(s.hints, subj)
	return m
}

// endOf returns subj's last message (nil: none) and whether it is a
// replica's hint rather than the leader's answer.
func (s *Store) endOf(ctx context.Context, subj string) (*jetstream.RawStreamMsg, bool, error) {
	if m := s.takeHint(subj); m != nil {
		return m, true, nil
	}
	m, err := s.lastOf(ctx, subj)
	return m, false, err
}

// multiLast asks any replica for the last message of each of subjs (one
// multi_last direct get) and adds those it answered to got. A subject
// with no message is not answered; a reply cut short (the server's byte
// bound) leaves the rest unanswered.
func (s *Store) multiLast(ctx context.Context, subjs []string, got map[string]*jetstream.RawStreamMsg) error {
	ctx, cancel := context.WithTimeout(ctx, min(endsWait, s.o.Timeout))
	defer cancel()
	body, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
		Batch     int      `json:"batch"`
	}{subjs, len(subjs)})
	if err != nil {
		return err
	}
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest(directGetSubject, inbox, body); err != nil {
		return err
	}
	want := make(map[string]bool, len(subjs))
	for _, subj := range subjs {
		want[subj] = true
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return err
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			switch m.Header.Get("Status") {
			case "204", "404": // the end of the answer; none of them has a message
				return nil
			default:
				return fmt.Errorf("multi_last refused: %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
			}
		}
		subj := m.Header.Get(jetstream.SubjectHeader)
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil || !want[subj] {
			return fmt.Errorf("multi_last answered a message of %q without a valid %s header, or one not asked for", subj, jetstream.SequenceHeader)
		}
		got[subj] = &jetstream.RawStreamMsg{Subject: subj, Sequence: seq, Header: m.Header, Data: m.Data}
	}
}
