package jetstream

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
// Release writes the marker only when that is true of this Store: no log
// open, no append in flight, and no log closed with an append of unknown
// outcome (it could still be stored). Otherwise the key is left to lapse,
// and the next holder claims every log at its open, as after a crash.

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
// leader's answer), may be opened without its claim: it was written last
// under a clean epoch of this Store's USER claim.
func (l *Log) deferClaim(last *jetstream.RawStreamMsg, hinted bool) bool {
	u := l.s.userLease()
	if u == nil || len(u.clean) == 0 || last == nil || hinted || l.id == store.UserID {
		return false
	}
	e, ok := msgIDEpoch(last.Header.Get(hdrMsgID))
	return ok && e < l.epoch && slices.Contains(u.clean, e)
}

// withClaim prepends the deferred claim to recs (the caller holds wmu):
// the first append of a log opened without its claim carries it.
func (l *Log) withClaim(recs []eventlog.Record) []eventlog.Record {
	claim := eventlog.Record{Event: schema.AgentClaimed, Data: schema.AgentClaimedData{Node: l.s.o.Node, Epoch: l.epoch, BootID: l.s.o.BootID}}
	return append([]eventlog.Record{claim}, recs...)
}

// opened and closed count the Store's open logs; closed also counts a
// log closed with an append of unknown outcome (poisoned, not fenced).
func (s *Store) opened() {
	s.logsMu.Lock()
	s.openLogs++
	s.logsMu.Unlock()
}

func (s *Store) closed(unsettled bool) {
	s.logsMu.Lock()
	s.openLogs--
	if unsettled {
		s.unsettled++
	}
	s.logsMu.Unlock()
}

// settled reports whether this Store can write nothing more to any log:
// none open, no append in flight, none closed unsettled (Release's
// condition for the marker a successor claims lazily after).
func (s *Store) settled() bool {
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	return s.openLogs == 0 && s.unsettled == 0 && s.inflight.Load() == 0
}
