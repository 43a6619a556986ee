package jetstream

// Opening a log: reading its end (from the leader, or a hint the
// replicas gave: ends.go), replaying it, and claiming it for this
// handle's epoch at its open, or with its first append after a clean
// handover (lazy.go). The appends are log.go's.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

// OpenLog replays id's log and, when another claim wrote last, appends
// agent.claimed under o.Lease (required) so that the earlier owner's
// appends are fenced from then on. An empty log gets no claim: its first
// append is fenced on "no entry yet" and so is any rival's.
func (s *Store) OpenLog(ctx context.Context, id string, o store.LogOptions) (store.Log, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if o.Lease == nil || o.Lease.ID() != id {
		return nil, fmt.Errorf("store/jetstream: opening the log of %s needs LogOptions.Lease from Own(%s)", id, id)
	}
	l := &Log{s: s, id: id, subj: Subject(id), epoch: o.Lease.Epoch()}
	// Counted from the start, so that a release cannot miss an open under
	// way, nor a claim whose outcome a failed open left unknown (lazy.go).
	if err := l.count(); err != nil {
		return nil, err
	}
	if err := l.open(ctx, o); err != nil {
		_ = l.Close() // ends a heal a failed claim started; counts what it left unsettled
		return nil, err
	}
	return l, nil
}

// open is OpenLog's work on the counted handle l.
func (l *Log) open(ctx context.Context, o store.LogOptions) error {
	s, id := l.s, l.id
	last, hinted, err := l.end(ctx, o)
	if err != nil {
		return err
	}
	if last == nil {
		if o.MustExist {
			return fmt.Errorf("store/jetstream: log %s: %w: %w", l.subj, store.ErrNotFound, fs.ErrNotExist)
		}
		if o.Resume != nil {
			return fmt.Errorf("store/jetstream: resume %s at seq %d: the log is empty: %w", l.subj, o.Resume.Seq, eventlog.ErrResumeMismatch)
		}
		if id == store.UserID {
			// The USER log has no required first entry: it is claimed
			// even empty, or an earlier owner's first append to it would
			// pass the fence ("no entry yet") after this claim.
			if err := l.claim(o); err != nil {
				return unavailable(err)
			}
		}
		l.onAppend, l.onHeal = o.OnAppend, o.OnHeal
		return nil
	}
	var start uint64
	if r := o.Resume; r != nil {
		var at *jetstream.RawStreamMsg
		if hinted && uint64(r.Off) == last.Sequence {
			at = last // the hint is the resume line itself: no read
		}
		if err := s.checkResume(ctx, l.subj, r, at); err != nil {
			return err
		}
		start = uint64(r.Off)
		l.lastSeq = r.Seq
		rc := *r
		l.resumed = &rc
	}
	maxEpoch, err := l.replay(ctx, start, last.Sequence, o)
	if err != nil {
		return err
	}
	l.lastSSeq = last.Sequence
	if err := l.claimedLater(maxEpoch); err != nil {
		return err
	}
	switch {
	case lastIsClaim(last.Data, l.epoch):
	case l.deferClaim(o.Lease, last, hinted):
		l.claimDue = true
	default:
		if err := l.claimOn(ctx, o, hinted); err != nil {
			return unavailable(err) // a timed-out claim may have landed: its retry under the same lease finds it (lastIsClaim)
		}
	}
	l.onAppend, l.onHeal = o.OnAppend, o.OnHeal
	return nil
}

// end returns the log's last message (nil: none), from a hint HintEnds
// read (hinted) or from the leader, and refuses a log last written under
// a later claim.
func (l *Log) end(ctx context.Context, o store.LogOptions) (last *jetstream.RawStreamMsg, hinted bool, err error) {
	last, hinted, err = l.s.endOf(ctx, l.subj)
	if err != nil {
		return nil, false, err
	}
	if hinted && (lastIsClaim(last.Data, l.epoch) || o.Resume != nil && uint64(o.Resume.Off) > last.Sequence) {
		// Only the leader's end can spare a claim, or end a log whose
		// fold is already past the hint (ends.go).
		if last, err = l.s.lastOf(ctx, l.subj); err != nil {
			return nil, false, err
		}
		hinted = false
	}
	return last, hinted, l.laterEpoch(last)
}

// claimOn claims the log on the end replayed; when that end was a hint
// and the leader refuses the claim, the log went on past it (a replica
// that lagged, or an entry appended since): nothing was stored, and the
// open goes on from the leader's end (ends.go).
func (l *Log) claimOn(ctx context.Context, o store.LogOptions, hinted bool) error {
	err := l.claim(o)
	if err != nil && hinted && errors.Is(err, store.ErrFenced) {
		l.setPoison(nil)
		err = l.catchUp(ctx, o)
	}
	return err
}

// laterEpoch refuses a log whose last message (nil: none) was written
// under a later claim than this handle's: every message names the epoch
// it was written under (msgID), so the log is another daemon's, even one
// without an agent.claimed yet (an agent a newer USER holder created).
func (l *Log) laterEpoch(last *jetstream.RawStreamMsg) error {
	if last == nil {
		return nil
	}
	if e, ok := msgIDEpoch(last.Header.Get(hdrMsgID)); ok && e > l.epoch {
		return fmt.Errorf("store/jetstream: %s was last written under claim %d, after this lease's %d: %w (%w)", l.subj, e, l.epoch, store.ErrFenced, eventlog.ErrPoisoned)
	}
	return nil
}

// claimedLater refuses a log whose replay read an agent.claimed of a
// later epoch than this handle's.
func (l *Log) claimedLater(maxEpoch uint64) error {
	if maxEpoch > l.epoch {
		return fmt.Errorf("store/jetstream: %s was claimed at epoch %d, after this lease's %d: %w (%w)", l.subj, maxEpoch, l.epoch, store.ErrFenced, eventlog.ErrPoisoned)
	}
	return nil
}

// catchUp goes on from a claim fenced on a hinted end: it reads the
// leader's end, replays the entries after the last one replayed, and
// claims on that end (unless it is this lease's own claim).
func (l *Log) catchUp(ctx context.Context, o store.LogOptions) error {
	last, err := l.s.lastOf(ctx, l.subj)
	if err != nil {
		return err
	}
	if last == nil || last.Sequence < l.lastSSeq {
		return fmt.Errorf("store/jetstream: %s: the stream leader's last entry is before stream seq %d, which a replica gave: %w", l.subj, l.lastSSeq, eventlog.ErrCorrupt)
	}
	if err := l.laterEpoch(last); err != nil {
		return err
	}
	maxEpoch, err := l.replay(ctx, l.lastSSeq, last.Sequence, o)
	if err != nil {
		return err
	}
	l.lastSSeq = last.Sequence
	if err := l.claimedLater(maxEpoch); err != nil {
		return err
	}
	if lastIsClaim(last.Data, l.epoch) {
		return nil
	}
	return l.claim(o)
}

// claim appends agent.claimed under this handle's epoch and hands it to
// o.Replay like the entries before it: the log as OpenLog returns it,
// claim included, is what the caller's fold has seen (OnAppend is not set
// yet, so it is not handed twice).
func (l *Log) claim(o store.LogOptions) error {
	data := schema.AgentClaimedData{Node: l.s.o.Node, Epoch: l.epoch, BootID: l.s.o.BootID}
	e, err := l.Append(schema.AgentClaimed, data)
	if err != nil {
		return fmt.Errorf("store/jetstream: claiming %s: %w", l.subj, err)
	}
	if o.Replay != nil {
		if err := o.Replay(e); err != nil {
			return fmt.Errorf("store/jetstream: replaying %s at seq %d: %w", l.subj, e.Seq, err)
		}
	}
	return nil
}

// replay hands the entries after start to o.Replay and returns the
// highest epoch of the agent.claimed entries it read.
func (l *Log) replay(ctx context.Context, start, end uint64, o store.LogOptions) (uint64, error) {
	fromSeq := l.lastSeq + 1
	r := l.s.newReader(ctx, l.subj, fromSeq, start, end)
	defer r.Close()
	if start > 0 {
		r.last, r.anySeq = l.lastSeq-1, false // the resume entry is checked like any other
	}
	var maxEpoch uint64
	for {
		e, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return maxEpoch, nil
			}
			return 0, err
		}
		l.lastSeq = e.Seq
		if e.Event == schema.AgentClaimed {
			var c schema.AgentClaimedData
			if json.Unmarshal(e.Data, &c) == nil && c.Epoch > maxEpoch {
				maxEpoch = c.Epoch
			}
		}
		if o.Replay != nil {
			if err := o.Replay(e); err != nil {
				return 0, fmt.Errorf("store/jetstream: replaying %s at seq %d: %w", l.subj, e.Seq, err)
			}
		}
	}
}

// lastIsClaim reports whether line is agent.claimed at epoch.
func lastIsClaim(line []byte, epoch uint64) bool {
	e, err := record.DecodeLine(line)
	if err != nil || e.Event != schema.AgentClaimed {
		return false
	}
	var c schema.AgentClaimedData
	return json.Unmarshal(e.Data, &c) == nil && c.Epoch == epoch
}

// checkResume checks that the message at r.Off is r's line; at, when
// set, is that message as a hint read it (no read then).
// Any failure to read it is a mismatch: the caller folds the whole log.
func (s *Store) checkResume(ctx context.Context, subj string, r *eventlog.Resume, at *jetstream.RawStreamMsg) error {
	var got eventlog.Resume
	var err error
	if at != nil {
		got, err = resumeOf(subj, r.Seq, r.Off, at)
	} else {
		got, err = s.resumeAt(ctx, subj, r.Seq, r.Off)
	}
	if err != nil && !errors.Is(err, eventlog.ErrResumeMismatch) {
		return fmt.Errorf("%w: %w", err, eventlog.ErrResumeMismatch)
	}
	if err != nil {
		return err
	}
	if got.CRC != r.CRC {
		return fmt.Errorf("store/jetstream: resume %s at seq %d: stream seq %d holds another line: %w", subj, r.Seq, r.Off, eventlog.ErrResumeMismatch)
	}
	return nil
}
