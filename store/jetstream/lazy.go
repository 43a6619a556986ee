package jetstream

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

// Claims deferred after a clean handover (doc.go, "Claims after a
// release"). A daemon that stops cleanly closes every log, then writes its
// USER key's release marker (a KV delete) naming its own epoch and the
// clean epochs its claim inherited. A daemon whose USER claim replaced
// that marker knows the holders of those epochs write no more: each closed
// its logs before it released, and each claim replaced the marker before
// it, so no other claim came between them. Every holder of another epoch
// is fenced on each log such a holder wrote last. So a log whose last
// entry (the leader's end) was written under a clean epoch needs no
// agent.claimed at its open: the claim goes out with the log's first
// append, in the same atomic batch, fenced on that end. An agent at rest
// is then not claimed until it next writes, and a clean restart appends
// nothing to the logs it does not write.
//
// Release writes the marker only when that is true of this Store's logs
// of the releasing epoch: none open (an open is counted from its start),
// no append in flight, and none that had an append of unknown outcome (it
// could still be stored), and from then on it opens none of that epoch.
// Otherwise the key is left to lapse, and the next holder claims every
// log at its open, as after a crash.

// hdrCleanEpochs is the release marker's header naming the epochs whose
// holders write no more: the releasing holder's own, then those its claim
// inherited, cleanEpochsMax at most.
const hdrCleanEpochs = "Warren-Clean-Epochs"

// cleanEpochsMax bounds the epochs a marker names: a log last written
// further back is claimed at its open, which makes it current again.
const cleanEpochsMax = 16

// releaseUser writes the USER key's release marker (a KV delete, fenced
// on the lease's last revision) naming the clean epochs.
func (s *Store) releaseUser(ctx context.Context, rev uint64, clean []uint64) error {
	if len(clean) > cleanEpochsMax {
		clean = clean[:cleanEpochsMax]
	}
	parts := make([]string, len(clean))
	for i, e := range clean {
		parts[i] = strconv.FormatUint(e, 10)
	}
	m := nats.NewMsg("$KV." + OwnersBucket + "." + store.UserID)
	m.Header.Set("KV-Operation", "DEL")
	m.Header.Set(hdrCleanEpochs, strings.Join(parts, ","))
	if _, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev)); err != nil {
		return fmt.Errorf("store/jetstream: release %s: %w", store.UserID, err)
	}
	return nil
}

// parseEpochs reads a marker's clean epochs; anything malformed makes it
// name none (every log is then claimed at its open).
func parseEpochs(v string) []uint64 {
	if v == "" {
		return nil
	}
	var out []uint64
	for _, f := range strings.Split(v, ",") {
		e, err := strconv.ParseUint(f, 10, 64)
		if err != nil || e == 0 || len(out) == cleanEpochsMax {
			return nil
		}
		out = append(out, e)
	}
	return out
}

// deferClaim reports whether the log, whose last message is last (the
// leader's answer), may be opened under lease without its claim: it was
// written last under a clean epoch of the USER claim the lease rests on.
func (l *Log) deferClaim(lease store.Lease, last *jetstream.RawStreamMsg, hinted bool) bool {
	al, ok := lease.(agentLease)
	if !ok || len(al.user.clean) == 0 || last == nil || hinted || al.user.epoch != l.epoch {
		return false
	}
	e, ok := msgIDEpoch(last.Header.Get(hdrMsgID))
	return ok && e < l.epoch && slices.Contains(al.user.clean, e)
}

// withClaim prepends the deferred claim to recs (the caller holds wmu):
// the first append of a log opened without its claim carries it.
func (l *Log) withClaim(recs []eventlog.Record) []eventlog.Record {
	claim := eventlog.Record{Event: schema.AgentClaimed, Data: schema.AgentClaimedData{Node: l.s.o.Node, Epoch: l.epoch, BootID: l.s.o.BootID}}
	return append([]eventlog.Record{claim}, recs...)
}

// epochLogs counts a Store's logs of one epoch: open handles (from the
// start of their OpenLog), handles closed with an append of unknown
// outcome (poisoned, not fenced), appends in flight (counted before the
// handle is checked, so none can start on a handle closed before a
// release looked), and whether its holder sealed it by a release.
type epochLogs struct {
	open      int
	unsettled int
	sealed    bool
	inflight  atomic.Int64
}

// acct returns the count of epoch; the caller holds logsMu.
func (s *Store) acct(epoch uint64) *epochLogs {
	a := s.epochs[epoch]
	if a == nil {
		if s.epochs == nil {
			s.epochs = map[uint64]*epochLogs{}
		}
		a = &epochLogs{}
		s.epochs[epoch] = a
	}
	return a
}

// opened counts a new handle of epoch, unless its holder released the
// USER inbox (it writes no log more: the marker says so).
func (s *Store) opened(epoch uint64) (*epochLogs, error) {
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	a := s.acct(epoch)
	if a.sealed {
		return nil, fmt.Errorf("this daemon released the USER inbox its claim rests on: %w", store.ErrOwned)
	}
	a.open++
	return a, nil
}

// closed counts a handle of a closed, with an append of unknown outcome
// (unsettled) or not.
func (s *Store) closed(a *epochLogs, unsettled bool) {
	s.logsMu.Lock()
	a.open--
	if unsettled {
		a.unsettled++
	}
	s.logsMu.Unlock()
}

// unsettle records that a log of epoch had an append of unknown outcome
// that a heal found not stored: in a cluster the leader that answered may
// not have applied all its log yet, so it may still land.
func (s *Store) unsettle(epoch uint64) {
	s.logsMu.Lock()
	s.acct(epoch).unsettled++
	s.logsMu.Unlock()
}

// seal reports whether the holder of epoch can write no log more (none
// open, none in flight, none unsettled) and, if so, refuses every later
// open of that epoch: Release's condition for the marker, taken in one
// step with the refusal so that no open can start between them.
func (s *Store) seal(epoch uint64) bool {
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	a := s.acct(epoch)
	if a.open != 0 || a.unsettled != 0 || a.inflight.Load() != 0 {
		return false
	}
	a.sealed = true
	return true
}
