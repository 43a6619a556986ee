package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/store"
)

// Header names (doc.go).
const (
	hdrMsgID        = "Nats-Msg-Id"
	hdrExpectLastSS = "Nats-Expected-Last-Subject-Sequence"
	hdrBatchID      = "Nats-Batch-Id"
	hdrBatchSeq     = "Nats-Batch-Sequence"
	hdrBatchCommit  = "Nats-Batch-Commit"
)

// maxBatch is JetStream's default limit of messages in one atomic batch.
const maxBatch = 1000

// Log is one agent's log on the stream. Appends are serialised: one fenced
// publish in flight per log (JetStream refuses a second one anyway).
type Log struct {
	s        *Store
	id       string
	subj     string
	epoch    uint64
	onAppend func([]eventlog.Entry)
	onHeal   func()

	// wmu orders appends: it is held across the publish and OnAppend.
	// mu guards the fields below and is only held briefly, so that
	// LastSeq and Degraded never wait for a publish (up to Timeout) nor
	// for OnAppend, which takes the caller's locks (the daemon's agent
	// lock, held when it asks Degraded: taking mu across OnAppend
	// deadlocked the daemon). lastSeq and lastSSeq change only under both.
	wmu      sync.Mutex
	mu       sync.Mutex
	lastSeq  uint64 // warren seq of the last entry
	lastSSeq uint64 // its stream seq: the fence of the next append
	poison   error  // set by a failed append (until heal) or a fenced one (for good)
	closed   bool

	resumed  *eventlog.Resume // entries OpenLog skipped, for VerifyPrefix
	verified bool
	// claimDue: opened without its claim (lazy.go); the next append
	// carries it. Changed only under wmu.
	claimDue bool
	// acct is the Store's count of its epoch's logs (lazy.go), set before
	// OpenLog reads anything.
	acct *epochLogs
}

var _ store.Log = (*Log)(nil)

// Append appends one entry; it returns once the stream acknowledged it.
func (l *Log) Append(event string, data any) (eventlog.Entry, error) {
	es, err := l.commit([]eventlog.Record{{Event: event, Data: data}})
	if err != nil {
		return eventlog.Entry{}, err
	}
	return es[0], nil
}

// AppendBatch appends recs as one atomic batch: all or none.
func (l *Log) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if len(recs) > maxBatch {
		return nil, fmt.Errorf("%w: a batch of %d records is over JetStream's %d", eventlog.ErrInvalidRecord, len(recs), maxBatch)
	}
	return l.commit(recs)
}

func (l *Log) commit(recs []eventlog.Record) ([]eventlog.Entry, error) {
	// Counted before the handle is checked: a release that finds none in
	// flight and every handle closed cannot miss an append (lazy.go).
	l.acct.inflight.Add(1)
	defer l.acct.inflight.Add(-1)
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return nil, err
	}
	if !l.claimDue {
		return l.commitLocked(recs)
	}
	if len(recs)+1 > maxBatch {
		if _, err := l.commitLocked(l.withClaim(nil)); err != nil {
			return nil, err
		}
		return l.commitLocked(recs)
	}
	es, err := l.commitLocked(l.withClaim(recs))
	if err != nil {
		return nil, err
	}
	return es[1:], nil
}

// commitLocked appends recs as one batch; the caller holds wmu.
func (l *Log) commitLocked(recs []eventlog.Record) ([]eventlog.Entry, error) {
	now := l.s.o.Now()
	lines := make([][]byte, len(recs))
	limit := int(l.s.nc.MaxPayload()) - 1024 // headers
	for i, r := range recs {
		line, err := record.EncodeLine(l.lastSeq+1+uint64(i), now, r)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		if len(line) > limit {
			return nil, fmt.Errorf("record %d: %w: event %q is %d bytes, over the %d bytes of one NATS message; store large payloads elsewhere and log a reference", i, eventlog.ErrInvalidRecord, r.Event, len(line), limit)
		}
		lines[i] = line
	}
	msgs := l.messages(lines, l.lastSeq+1, l.lastSSeq)
	ack, err := l.send(msgs)
	if err != nil {
		l.setPoison(err)
		if !errors.Is(err, store.ErrFenced) {
			go l.heal(msgs) // heal.go
		}
		return nil, err
	}
	es := make([]eventlog.Entry, len(lines))
	first := ack - uint64(len(lines)-1)
	for i, line := range lines {
		e, err := decode(l.subj, first+uint64(i), line)
		if err != nil { // cannot happen: EncodeLine wrote it
			l.setPoison(err)
			return nil, err
		}
		es[i] = e
	}
	l.advance(uint64(len(lines)), ack)
	if l.onAppend != nil {
		l.onAppend(es)
	}
	return es, nil
}

// usable returns why the handle takes no append (closed, poisoned), or
// nil. The caller holds wmu.
func (l *Log) usable() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("store/jetstream: append to %s: %w", l.subj, eventlog.ErrClosed)
	}
	return l.poison
}

func (l *Log) setPoison(err error) {
	l.mu.Lock()
	l.poison = err
	l.mu.Unlock()
}

// advance records n more entries, the last at stream seq ack. The caller
// holds wmu.
func (l *Log) advance(n, ack uint64) {
	l.mu.Lock()
	l.lastSeq += n
	l.lastSSeq = ack
	l.mu.Unlock()
	l.claimDue = false // a deferred claim leads every batch until one is stored
}

// msgID is the dedup id of seq under this log's claim.
func (l *Log) msgID(seq uint64) string {
	return l.id + "." + strconv.FormatUint(l.epoch, 10) + "." + strconv.FormatUint(seq, 10)
}

// msgIDEpoch is the epoch a msgID names (ok false for another form).
func msgIDEpoch(id string) (epoch uint64, ok bool) {
	parts := strings.Split(id, ".")
	if len(parts) != 3 {
		return 0, false
	}
	e, err := strconv.ParseUint(parts[1], 10, 64)
	return e, err == nil
}

// messages builds the messages of lines, the first fenced on fence.
func (l *Log) messages(lines [][]byte, seq0, fence uint64) []*nats.Msg {
	batch := ""
	if len(lines) > 1 {
		batch = nuid.Next()
	}
	msgs := make([]*nats.Msg, len(lines))
	for i, line := range lines {
		m := nats.NewMsg(l.subj)
		m.Data = line
		m.Header.Set(hdrMsgID, l.msgID(seq0+uint64(i)))
		if i == 0 {
			m.Header.Set(hdrExpectLastSS, strconv.FormatUint(fence, 10))
		}
		if batch != "" {
			m.Header.Set(hdrBatchID, batch)
			m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
			if i == len(lines)-1 {
				m.Header.Set(hdrBatchCommit, "1")
			}
		}
		msgs[i] = m
	}
	return msgs
}

// send publishes msgs (the last one as a request) and interprets the ack.
// A clustered stream refuses a fenced publish to a subject while an
// earlier one to it is still being applied (error 10164, nothing stored);
// send retries it, with a new batch id, for up to Options.Timeout.
func (l *Log) send(msgs []*nats.Msg) (uint64, error) {
	var resp *nats.Msg
	var a pubAck
	deadline := time.Now().Add(l.s.o.Timeout)
	unanswered := 0
	for backoff := time.Millisecond; ; backoff *= 2 {
		var err error
		resp, err = l.sendOnce(msgs)
		if err != nil {
			// Unanswered (no leader for a moment, a timeout, the
			// connection moving): sent again as it is, under the same
			// ids and fence, through an election. Whatever the lost
			// attempt stored is found by the duplicate check or the
			// fence's refusal below, so nothing is written twice.
			unanswered++
			if !isUnavailable(err) || unanswered >= retryAttempts || l.s.nc.IsClosed() {
				return 0, l.failed(err)
			}
			l.s.o.Logger.Warn("an append was not answered; sending it again", "log", l.subj, "seq", l.lastSeq+1, "attempt", unanswered, "err", err)
			time.Sleep(retryDelay(unanswered)) // an election gives a client no signal
			deadline = time.Now().Add(l.s.o.Timeout)
			l.newBatchID(msgs)
			continue
		}
		a = pubAck{}
		if err := json.Unmarshal(resp.Data, &a); err != nil {
			return 0, l.failed(fmt.Errorf("unreadable acknowledgement %.200q: %w", resp.Data, err))
		}
		if a.Error == nil || a.Error.ErrCode != errCodeSubjectBusy || time.Now().Add(backoff).After(deadline) {
			break
		}
		time.Sleep(min(backoff, 50*time.Millisecond)) // the server gives no signal when the subject is free
		l.newBatchID(msgs)
	}
	if a.Error != nil {
		if a.Error.ErrCode == errCodeWrongLastSeq {
			// A standalone server checks the fence before dedup (a
			// clustered one after): our own earlier send of these very
			// messages also lands here. Only then is it a success.
			seq, ok, err := l.ownTail(msgs)
			if ok {
				return seq, nil
			}
			if err != nil {
				return 0, l.failed(fmt.Errorf("refused as %s, and the log's end could not be read back: %w", a.Error.Description, err))
			}
			return 0, fmt.Errorf("store/jetstream: append to %s at seq %d refused (%s): %w; this daemon must release the agent: %w",
				l.subj, l.lastSeq+1, a.Error.Description, store.ErrFenced, eventlog.ErrPoisoned)
		}
		return 0, l.failed(fmt.Errorf("JetStream error %d (%d): %s", a.Error.ErrCode, a.Error.Code, a.Error.Description))
	}
	if a.Stream != StreamName || a.Seq == 0 {
		return 0, l.failed(fmt.Errorf("acknowledgement %.200q names no entry of %s", resp.Data, StreamName))
	}
	if a.Duplicate {
		// Dedup runs before the fence: a duplicate ack proves only that
		// some message carried this id. The ids hold the epoch, so only
		// this claim could have written it; check that it wrote these
		// very lines.
		if err := l.checkDuplicate(msgs, a.Seq); err != nil {
			return 0, err
		}
	}
	return a.Seq, nil
}

// newBatchID gives a batch of several messages a new batch id before it
// is sent again (a batch id names one attempt).
func (l *Log) newBatchID(msgs []*nats.Msg) {
	if len(msgs) > 1 {
		id := nuid.Next()
		for _, m := range msgs {
			m.Header.Set(hdrBatchID, id)
		}
	}
}

// sendOnce publishes msgs, the last one as a request, and returns the
// answer. One attempt waits at most attemptTimeout: a request lost in an
// election is sent again sooner than the store's whole Timeout.
func (l *Log) sendOnce(msgs []*nats.Msg) (*nats.Msg, error) {
	for _, m := range msgs[:len(msgs)-1] {
		if err := l.s.nc.PublishMsg(m); err != nil {
			return nil, err
		}
	}
	return l.s.nc.RequestMsg(msgs[len(msgs)-1], min(l.s.o.Timeout, attemptTimeout))
}

// ownTail reports whether the subject ends with msgs, ids and lines
// alike (this claim's earlier send of them), and the stream seq of the
// last. An error means the servers did not answer the reads: it is not
// known whether the subject ends so.
func (l *Log) ownTail(msgs []*nats.Msg) (uint64, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.s.o.Timeout)
	defer cancel()
	last, err := l.s.lastOf(ctx, l.subj)
	if err != nil {
		return 0, false, err
	}
	if last == nil || last.Header.Get(hdrMsgID) != msgs[len(msgs)-1].Header.Get(hdrMsgID) {
		return 0, false, nil
	}
	if len(msgs) > uint64Len(last.Sequence) {
		return 0, false, nil
	}
	first := last.Sequence - uint64(len(msgs)-1)
	for i, m := range msgs {
		got, err := l.s.leaderGet(ctx, msgGetRequest{Seq: first + uint64(i)})
		if err != nil {
			return 0, false, err
		}
		if got.Subject != l.subj || got.Header.Get(hdrMsgID) != m.Header.Get(hdrMsgID) || !bytes.Equal(got.Data, m.Data) {
			return 0, false, nil
		}
	}
	return last.Sequence, true, nil
}

func uint64Len(n uint64) int {
	if n > uint64(maxBatch) {
		return maxBatch
	}
	return int(n)
}

// checkDuplicate checks that the messages ending at stream seq last are
// msgs' lines on this subject.
func (l *Log) checkDuplicate(msgs []*nats.Msg, last uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.s.o.Timeout)
	defer cancel()
	first := last - uint64(len(msgs)-1)
	for i, m := range msgs {
		got, err := l.s.leaderGet(ctx, msgGetRequest{Seq: first + uint64(i)})
		if err != nil {
			return l.failed(fmt.Errorf("checking a duplicate acknowledgement at stream seq %d: %w", first+uint64(i), err))
		}
		if got.Subject != l.subj || !bytes.Equal(got.Data, m.Data) {
			return fmt.Errorf("store/jetstream: append to %s at seq %d acknowledged as a duplicate of another entry (stream seq %d): %w: %w",
				l.subj, l.lastSeq+1+uint64(i), first+uint64(i), store.ErrFenced, eventlog.ErrPoisoned)
		}
	}
	return nil
}

// failed wraps an append failure whose outcome is unknown (the servers
// did not answer through the retries, or answered what the handle cannot
// read): the entries may or may not be stored, so the handle refuses
// appends until heal has read what the stream holds.
func (l *Log) failed(err error) error {
	return fmt.Errorf("store/jetstream: append to %s at seq %d: %w; the log accepts appends again once the cluster answers what it stored (%w): %w",
		l.subj, l.lastSeq+1, err, store.ErrUnknownOutcome, eventlog.ErrPoisoned)
}

// LastSeq is the seq of the last entry.
func (l *Log) LastSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSeq
}

// Degraded returns why appends are refused (for good on this handle).
func (l *Log) Degraded() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.poison
}

// VerifyPrefix reads the entries a Resume skipped, once, checking every
// line's CRC and the seqs 1..Resume.Seq.
func (l *Log) VerifyPrefix() error {
	l.mu.Lock()
	r := l.resumed
	done := l.verified
	l.mu.Unlock()
	if r == nil || done {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*l.s.o.Timeout)
	defer cancel()
	rd := l.s.newReader(ctx, l.subj, 0, 0, uint64(r.Off))
	defer rd.Close()
	var last uint64
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		last = e.Seq
	}
	if last != r.Seq {
		return fmt.Errorf("store/jetstream: %s: the entries before the resume point end at seq %d, not %d: %w", l.subj, last, r.Seq, eventlog.ErrCorrupt)
	}
	l.mu.Lock()
	l.verified = true
	l.mu.Unlock()
	return nil
}

// ReadAll reads every entry from the stream.
func (l *Log) ReadAll(ctx context.Context) ([]eventlog.Entry, error) {
	return l.s.readAll(ctx, l.subj)
}

// Abandon drops the handle (nothing is buffered: every acknowledged entry
// is in the stream).
func (l *Log) Abandon() { _ = l.Close() }

// Close closes the handle.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed && l.acct != nil {
		l.s.closed(l.acct, l.poison != nil && !errors.Is(l.poison, store.ErrFenced))
	}
	l.closed = true
	return nil
}

// count counts the handle among the Store's open logs of its epoch
// (OpenLog's first step), refusing an epoch whose holder released the
// USER inbox.
func (l *Log) count() error {
	acct, err := l.s.opened(l.epoch)
	if err != nil {
		return fmt.Errorf("store/jetstream: opening %s: %w", l.subj, err)
	}
	l.acct = acct
	return nil
}
