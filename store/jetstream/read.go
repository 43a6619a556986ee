package jetstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/store"
)

// lastOf returns the last message of subj, or nil if it has none.
func (s *Store) lastOf(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	var m *jetstream.RawStreamMsg
	err := s.retrying(ctx, "last entry of "+subj, func(ctx context.Context) error {
		var err error
		m, err = s.stream.GetLastMsgForSubject(ctx, subj)
		return err
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
// last when it started, checking each line's CRC and the seq order.
type reader struct {
	ctx     context.Context
	s       *Store
	subj    string
	cfg     jetstream.OrderedConsumerConfig
	it      jetstream.MessagesContext
	sseq    uint64 // stream seq of the last message delivered (0: none)
	retries int    // consumers made again after a failed delivery
	err     error  // the failure that ended the reader, returned again
	end     uint64 // stream seq of the last message to read
	fromSeq uint64
	last    uint64 // warren seq of the previous entry (0: none yet)
	first   bool   // the next entry is the first read
	anySeq  bool   // the first entry may carry any seq (read from a hint)
	done    bool
	wait    time.Duration // bound of one wait for a message
}

// newReader reads subj's entries with seq >= fromSeq, starting at stream
// seq hint (0: the first message). end is the subject's last stream seq
// (0: empty; then Next returns io.EOF at once).
func (s *Store) newReader(ctx context.Context, subj string, fromSeq uint64, hint, end uint64) (*reader, error) {
	r := &reader{ctx: ctx, s: s, subj: subj, end: end, fromSeq: fromSeq, first: true, anySeq: hint > 1, wait: 2 * s.o.Timeout}
	if end == 0 || hint > end {
		r.done = true
		return r, nil
	}
	r.cfg = jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if hint > 1 {
		r.cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		r.cfg.OptStartSeq = hint
	}
	for {
		err := r.consume()
		if err == nil {
			return r, nil
		}
		if !r.retry("create consumer", err) {
			return nil, fmt.Errorf("store/jetstream: read %s: %w", subj, unavailable(err))
		}
	}
}

// readRetries bounds how often a reader makes its consumer again after a
// request or a delivery failed (a timeout while the stream elects a
// leader, a lost connection): reading is idempotent, and the new consumer
// starts after the last message delivered, so no entry is seen twice.
const readRetries = 5

// consume makes the reader's consumer, from the message after the last
// one delivered.
func (r *reader) consume() error {
	cfg := r.cfg
	if r.sseq > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = r.sseq + 1
	}
	cons, err := r.s.stream.OrderedConsumer(r.ctx, cfg)
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return err
	}
	r.it = it
	return nil
}

// retry reports whether one more attempt is allowed after err (the
// caller's context is live and readRetries are not used up), and counts
// it. The attempts follow at once: a reader that still fails returns
// store.ErrUnavailable, and the daemon's own loops (the standby, recovery's
// open retries, the takeover scan) wait before they read again.
func (r *reader) retry(phase string, err error) bool {
	if r.ctx.Err() != nil || r.retries >= readRetries {
		return false
	}
	r.retries++
	r.s.o.Logger.Warn("reading a log failed; making its consumer again", "subject", r.subj, "after_stream_seq", r.sseq,
		"phase", phase, "attempt", r.retries, "err", err)
	return true
}

// Next returns the next entry, io.EOF after the last, or an error wrapping
// eventlog.ErrCorrupt for a damaged line or a seq out of order.
func (r *reader) Next() (eventlog.Entry, error) {
	for {
		if r.err != nil {
			return eventlog.Entry{}, r.err
		}
		if r.done {
			return eventlog.Entry{}, io.EOF
		}
		if r.it == nil {
			if err := r.consume(); err != nil {
				r.it = nil
				if !r.retry("create consumer", err) {
					r.err = fmt.Errorf("store/jetstream: read %s: %w", r.subj, unavailable(err))
					return eventlog.Entry{}, r.err
				}
				continue
			}
		}
		// Each wait is bounded (a message the servers cannot deliver, say
		// with no leader, would block until the caller's deadline), so
		// that a stalled consumer is made again (retry).
		wctx, cancel := context.WithTimeout(r.ctx, r.wait)
		m, err := r.it.Next(jetstream.NextContext(wctx))
		cancel()
		var md *jetstream.MsgMetadata
		if err == nil {
			md, err = m.Metadata()
		}
		if err != nil {
			r.it.Stop()
			r.it = nil
			if !r.retry("next message", err) {
				r.err = fmt.Errorf("store/jetstream: read %s: %w", r.subj, unavailable(err))
				return eventlog.Entry{}, r.err
			}
			continue
		}
		sseq := md.Sequence.Stream
		r.sseq = sseq
		if sseq >= r.end {
			r.done = true
			r.it.Stop()
		}
		e, err := decode(r.subj, sseq, m.Data())
		if err != nil {
			return eventlog.Entry{}, err
		}
		if !(r.first && r.anySeq) {
			if err := record.CheckNext(r.last, e.Seq); err != nil {
				return eventlog.Entry{}, fmt.Errorf("store/jetstream: %s at stream seq %d: %w", r.subj, sseq, err)
			}
		}
		r.first = false
		r.last = e.Seq
		if e.Seq >= r.fromSeq {
			return e, nil
		}
	}
}

// Close stops the consumer.
func (r *reader) Close() error {
	if r.it != nil && !r.done {
		r.it.Stop()
		r.done = true
	}
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
	return s.newReader(ctx, subj, fromSeq, uint64(hint), last.Sequence)
}

// ReadSeq returns entry seq of id's log, looking at stream seq hint first.
func (s *Store) ReadSeq(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error) {
	if err := checkID(id); err != nil {
		return eventlog.Entry{}, err
	}
	subj := Subject(id)
	if hint > 0 {
		m, err := s.stream.GetMsg(ctx, uint64(hint))
		if err == nil && m.Subject == subj {
			if e, err := decode(subj, m.Sequence, m.Data); err == nil && e.Seq == seq {
				return e, nil
			}
		}
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

// readAll reads every entry of subj.
func (s *Store) readAll(ctx context.Context, subj string) ([]eventlog.Entry, error) {
	last, err := s.lastOf(ctx, subj)
	if err != nil || last == nil {
		return nil, err
	}
	r, err := s.newReader(ctx, subj, 0, 0, last.Sequence)
	if err != nil {
		return nil, err
	}
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
