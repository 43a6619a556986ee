package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/store"
)

// Healing a handle after an append whose outcome is unknown (doc.go,
// "Failures"). The append was sent again through an election (send) and
// still got no answer it could read, so it may or may not be stored; the
// handle refuses appends meanwhile. heal asks the stream's leader, with a
// backoff while it does not answer, what the log now ends with:
//
//   - the entry this handle last wrote: nothing was stored; appends go on;
//   - the lost append's own messages (ids and lines): they are stored, so
//     they are entries of this log like any other: handed to OnAppend (the
//     caller's fold sees them as it would have, late) and the handle
//     advances past them;
//   - anything else: another claim wrote; the handle is fenced for good.
//
// Then OnHeal runs (not for a fenced handle), outside the append lock, so
// that it may append (the daemon writes the run end it owes).

// healWait bounds the backoff between two reads of a healing log.
const healWait = 2 * time.Second

// heal runs until the handle is healed, fenced or closed.
func (l *Log) heal(lost []*nats.Msg) {
	for n := 1; ; n++ {
		healed, done := l.healOnce(lost)
		if healed && l.onHeal != nil {
			l.s.o.Logger.Info("the log accepts appends again", "log", l.subj, "last_seq", l.LastSeq())
			l.onHeal()
		}
		if done {
			return
		}
		time.Sleep(min(retryDelay(n), healWait)) // the cluster gives a client no signal when it answers again
	}
}

// healOnce reads the log's end once and settles the handle if it can:
// healed when appends go on, done when nothing more is to be tried.
func (l *Log) healOnce(lost []*nats.Msg) (healed, done bool) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	closed, fence, poison := l.closed, l.lastSSeq, l.poison
	l.mu.Unlock()
	if closed || poison == nil || errors.Is(poison, store.ErrFenced) || l.s.nc.IsClosed() {
		return false, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(l.s.o.Timeout, attemptTimeout))
	defer cancel()
	last, err := l.s.lastOf(ctx, l.subj)
	switch {
	case err != nil:
		return false, false // not answered yet
	case last == nil && fence == 0, last != nil && last.Sequence == fence:
		// Not stored yet; but a leader elected meanwhile may still apply
		// it from its log, so this epoch's release names it unclean
		// (lazy.go), and the next holder claims at each open.
		l.s.unsettle(l.epoch)
		l.setPoison(nil)
		return true, true
	}
	ack, ok, err := l.ownTail(lost)
	if err != nil {
		return false, false // not answered yet
	}
	if ok {
		es := make([]eventlog.Entry, len(lost))
		first := ack - uint64(len(lost)-1)
		for i, m := range lost {
			e, err := decode(l.subj, first+uint64(i), m.Data)
			if err != nil { // cannot happen: the lines were this handle's
				l.setPoison(fmt.Errorf("store/jetstream: %s: %w", l.subj, err))
				return false, true
			}
			es[i] = e
		}
		l.advance(uint64(len(lost)), ack)
		// The caller's fold gets them before the handle says it is
		// healthy: nothing may act on a healthy log with a stale fold.
		if l.onAppend != nil {
			l.onAppend(es)
		}
		l.setPoison(nil)
		return true, true
	}
	l.setPoison(fmt.Errorf("store/jetstream: %s holds an entry after seq %d that this handle did not write: %w; this daemon must release the agent: %w",
		l.subj, l.lastSeq, store.ErrFenced, eventlog.ErrPoisoned))
	return false, true
}
