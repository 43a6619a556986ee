package jetstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/store"
)

// lastOf returns the last message of subj, or nil if it has none. It is
// asked of the stream leader: it is the end every read and fence rests on.
func (s *Store) lastOf(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	m, err := retried(s, ctx, "last entry of "+subj, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return s.leaderGet(ctx, msgGetRequest{LastFor: subj})
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store/jetstream: last entry of %s: %w", subj, err)
	}
	return m, nil
}

// reader yields the entries of one subject up to the message that was
// last when it started (end, as the stream leader said), checking each
// line's CRC and the seq order. It makes no consumer: it reads batches
// by direct get, which any current replica answers, and asks the stream
// leader for any message a replica did not give or gave in a form that
// does not check (doc.go, "Reads").
type reader struct {
	ctx     context.Context
	s       *Store
	subj    string
	pos     uint64 // stream seq to read from next
	end     uint64 // stream seq of the last message to read
	fromSeq uint64
	last    uint64 // warren seq of the previous entry (0: none yet)
	first   bool   // the next entry is the first read
	anySeq  bool   // the first entry may carry any seq (read from a hint)
	done    bool
	err     error // the failure that ended the reader, returned again

	buf    []*jetstream.RawStreamMsg // a replica's batch, not yet checked
	direct bool                      // replicas are still asked (false once one had less than asked)
	sub    *nats.Subscription        // the direct gets' replies (inbox.*)
	inbox  string
	nbatch int // batches asked, naming each batch's reply subject
	bytes  int // bound of one batch's bytes (directBatchBytes)
}

// newReader reads subj's entries with seq >= fromSeq, starting at stream
// seq hint (0: the first message). end is the subject's last stream seq
// (0: empty; then Next returns io.EOF at once).
func (s *Store) newReader(ctx context.Context, subj string, fromSeq uint64, hint, end uint64) *reader {
	r := &reader{ctx: ctx, s: s, subj: subj, end: end, fromSeq: fromSeq, first: true, anySeq: hint > 1, pos: max(hint, 1),
		direct: true, bytes: directBatchBytes}
	if end == 0 || hint > end {
		r.done = true
	}
	return r
}

// Next returns the next entry, io.EOF after the last, or an error wrapping
// eventlog.ErrCorrupt for a damaged line or a seq out of order (as the
// stream leader holds it), or store.ErrUnavailable when the leader did not
// answer.
func (r *reader) Next() (eventlog.Entry, error) {
	for {
		if r.err != nil {
			return eventlog.Entry{}, r.err
		}
		if r.done {
			return eventlog.Entry{}, io.EOF
		}
		m, fromLeader, err := r.fetch()
		var e eventlog.Entry
		if err == nil {
			e, err = r.check(m, fromLeader)
			if err != nil && !fromLeader {
				// A replica's copy that does not check (it skipped
				// entries while catching up, say): the leader's is the
				// authority. The replica is not asked again by this reader.
				r.s.o.Logger.Debug("a replica's answer to a read does not check; asking the stream leader", "subject", r.subj, "stream_seq", r.pos, "err", err)
				r.buf, r.direct, fromLeader = nil, false, true
				if m, err = r.s.leaderNext(r.ctx, r.subj, r.pos); err == nil {
					e, err = r.check(m, true)
				}
			}
		}
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				err = fmt.Errorf("the stream leader has no entry at or after stream seq %d, though its last was at %d: %w", r.pos, r.end, eventlog.ErrCorrupt)
			}
			r.stop()
			r.err = fmt.Errorf("store/jetstream: read %s: %w", r.subj, unavailable(err))
			return eventlog.Entry{}, r.err
		}
		r.pos = m.Sequence + 1
		if m.Sequence >= r.end {
			r.done = true
			r.stop()
		}
		r.first = false
		r.last = e.Seq
		if e.Seq >= r.fromSeq {
			return e, nil
		}
	}
}

// fetch returns the next message at stream seq >= r.pos: from the
// replica's batch while one serves, else from the leader.
func (r *reader) fetch() (*jetstream.RawStreamMsg, bool, error) {
	if len(r.buf) == 0 && r.direct {
		r.buf = r.batch()
		if len(r.buf) == 0 {
			r.direct = false // the replica lags (or none answered): the leader gives the rest
		}
	}
	if len(r.buf) > 0 {
		m := r.buf[0]
		r.buf = r.buf[1:]
		return m, false, nil
	}
	m, err := r.s.leaderNext(r.ctx, r.subj, r.pos)
	return m, true, err
}

// directWait bounds one batch direct get: a replica that does not answer
// in time (a busy disk) only sends the reader to the leader.
const directWait = 2 * time.Second

// batch asks the replicas for the next messages; nil when none answered
// or the one that did had none (logged at debug level: the leader is
// asked instead, which is correct either way).
func (r *reader) batch() []*jetstream.RawStreamMsg {
	if r.sub == nil {
		r.inbox = r.s.nc.NewRespInbox()
		sub, err := r.s.nc.SubscribeSync(r.inbox + ".*")
		if err != nil {
			r.s.o.Logger.Debug("direct get: no subscription for the replies; reading from the stream leader", "subject", r.subj, "err", err)
			return nil
		}
		r.sub = sub
	}
	r.nbatch++
	ctx, cancel := context.WithTimeout(r.ctx, min(directWait, r.s.o.Timeout))
	defer cancel()
	msgs, err := r.s.directBatch(ctx, r.sub, r.inbox+"."+strconv.Itoa(r.nbatch), r.subj, r.pos, r.bytes)
	if err != nil {
		r.s.o.Logger.Debug("direct get failed; reading from the stream leader", "subject", r.subj, "stream_seq", r.pos, "got", len(msgs), "err", err)
	}
	return msgs
}

// check decodes m, the next message after r.pos, and checks it follows
// the previous entry: on the subject, within end, CRC and seq. A replica's
// first message of a read from a hint must be at the hint itself (its seq
// cannot be checked against a previous one).
func (r *reader) check(m *jetstream.RawStreamMsg, fromLeader bool) (eventlog.Entry, error) {
	if m.Subject != r.subj || m.Sequence < r.pos || m.Sequence > r.end {
		return eventlog.Entry{}, fmt.Errorf("store/jetstream: %s: next message after stream seq %d is stream seq %d of %q, outside the read (up to %d): %w",
			r.subj, r.pos-1, m.Sequence, m.Subject, r.end, eventlog.ErrCorrupt)
	}
	e, err := decode(r.subj, m.Sequence, m.Data)
	if err != nil {
		return eventlog.Entry{}, err
	}
	if r.first && r.anySeq {
		if !fromLeader && m.Sequence != r.pos {
			return eventlog.Entry{}, fmt.Errorf("store/jetstream: %s: a replica's first message from stream seq %d is at %d", r.subj, r.pos, m.Sequence)
		}
		return e, nil
	}
	if err := record.CheckNext(r.last, e.Seq); err != nil {
		return eventlog.Entry{}, fmt.Errorf("store/jetstream: %s at stream seq %d: %w", r.subj, m.Sequence, err)
	}
	return e, nil
}

// stop drops the direct gets' subscription.
func (r *reader) stop() {
	r.buf = nil
	if r.sub != nil {
		_ = r.sub.Unsubscribe()
		r.sub = nil
	}
}

// Close ends the read.
func (r *reader) Close() error {
	r.done = true
	r.stop()
	return nil
}

// decode checks one message's line.
func decode(subj string, sseq uint64, data []byte) (eventlog.Entry, error) {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return eventlog.Entry{}, fmt.Errorf("store/jetstream: %s at stream seq %d: message is not one newline-terminated line: %w", subj, sseq, eventlog.ErrCorrupt)
	}
	e, err := record.DecodeLine(data)
	if err != nil {
		return eventlog.Entry{}, fmt.Errorf("store/jetstream: %s at stream seq %d: %w", subj, sseq, err)
	}
	e.Off = int64(sseq)
	return e, nil
}

// Read returns a reader of id's entries with seq >= fromSeq, starting at
// stream seq hint; the entries are those present when Read is called.
func (s *Store) Read(ctx context.Context, id string, fromSeq uint64, hint int64) (store.Reader, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	subj := Subject(id)
	last, err := s.lastOf(ctx, subj)
	if err != nil {
		return nil, err
	}
	if last == nil {
		return nil, fmt.Errorf("store/jetstream: log %s: %w", subj, store.ErrNotFound)
	}
	if hint < 0 {
		hint = 0
	}
	return s.newReader(ctx, subj, fromSeq, uint64(hint), last.Sequence), nil
}

// ReadSeq returns entry seq of id's log, looking at stream seq hint first.
func (s *Store) ReadSeq(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error) {
	if err := checkID(id); err != nil {
		return eventlog.Entry{}, err
	}
	subj := Subject(id)
	if hint > 0 {
		m, err := s.leaderGet(ctx, msgGetRequest{Seq: uint64(hint)})
		if err == nil && m.Subject == subj {
			if e, err := decode(subj, m.Sequence, m.Data); err == nil && e.Seq == seq {
				return e, nil
			}
		}
	}
	if seq == 1 && hint <= 0 {
		// A log's first entry (a parent lookup reads agent.created) is
		// the subject's first message: one leader request, not a read's
		// end lookup and a batch of 512 (36% of a cluster recovery).
		m, err := s.leaderNext(ctx, subj, 1)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return eventlog.Entry{}, fmt.Errorf("store/jetstream: %s seq 1: %w: %w", subj, store.ErrNotFound, eventlog.ErrNoSuchSeq)
		}
		if err != nil {
			return eventlog.Entry{}, err
		}
		e, err := decode(subj, m.Sequence, m.Data)
		if err != nil {
			return eventlog.Entry{}, err
		}
		if e.Seq != 1 {
			return eventlog.Entry{}, fmt.Errorf("store/jetstream: %s begins at seq %d, not 1: %w", subj, e.Seq, eventlog.ErrCorrupt)
		}
		return e, nil
	}
	r, err := s.Read(ctx, id, seq, 0)
	if err != nil {
		return eventlog.Entry{}, err
	}
	defer r.Close()
	e, err := r.Next()
	if errors.Is(err, io.EOF) || (err == nil && e.Seq != seq) {
		return eventlog.Entry{}, fmt.Errorf("store/jetstream: %s seq %d: %w", subj, seq, eventlog.ErrNoSuchSeq)
	}
	return e, err
}

// ReadSeqs is ReadSeq of each line in turn (a stream read is a request
// per message either way).
func (s *Store) ReadSeqs(ctx context.Context, id string, at []eventlog.At, fn func(i int, e eventlog.Entry) error) error {
	for i, a := range at {
		e, err := s.ReadSeq(ctx, id, a.Seq, a.Off)
		if err != nil {
			return err
		}
		if err := fn(i, e); err != nil {
			return err
		}
	}
	return nil
}

// readAll reads every entry of subj.
func (s *Store) readAll(ctx context.Context, subj string) ([]eventlog.Entry, error) {
	last, err := s.lastOf(ctx, subj)
	if err != nil || last == nil {
		return nil, err
	}
	r := s.newReader(ctx, subj, 0, 0, last.Sequence)
	defer r.Close()
	var out []eventlog.Entry
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}
