// Package redeliver finishes sends a crash cut off. A tool call that sends
// messages records their envelopes in the sender's tool.call line before
// (or while) each is enqueued in its recipient's log; a crash between the
// two leaves a message the sender's log records as sent and the recipient
// never got. The projection keeps each recorded message as a reference
// (projection.SentRef: the tool.call line and the message's place in it);
// Refs reads the envelopes of those the recipient lacks back from the
// sender's log and enqueues them, once (a message id is enqueued once per
// recipient). Recovery calls it for every agent, a re-run call answered
// from the log for its own messages.
//
// No locks; what it calls (Env) brings its own.
package redeliver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/projection"
)

// Env is what redelivery needs of the engine.
type Env interface {
	// Lacks reports whether the recipient of s exists and has not got it;
	// agentsOnly leaves out messages to USER.
	Lacks(s projection.SentRef, agentsOnly bool) bool
	// ReadSeq reads one line of an agent's log (store.Store.ReadSeq).
	ReadSeq(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error)
	// Deliver enqueues a message its sender's log records as sent: the
	// limits, which refuse new sends, do not refuse it.
	Deliver(m inbox.Message) error
}

// Refs enqueues the messages of refs, recorded in sender's log, whose
// recipient lacks them. agentsOnly leaves out messages to USER
// (recovery's rule) and logs each delivery. Failures are logged.
func Refs(env Env, log hclog.Logger, sender string, refs []projection.SentRef, agentsOnly bool) {
	for _, s := range refs {
		if !env.Lacks(s, agentsOnly) {
			continue
		}
		raw, err := Envelope(env.ReadSeq, sender, s)
		if err != nil {
			log.Error("cannot read back a message its sender recorded", "sender", sender, "message", s.ID, "err", err)
			continue
		}
		if agentsOnly {
			log.Warn("delivering a message its sender recorded but its recipient never got", "message", s.ID, "to", s.To)
		}
		m, err := inbox.FromEventData(raw)
		if err != nil {
			log.Warn("a recorded message is malformed", "err", err)
			continue
		}
		if err := env.Deliver(m); err != nil {
			log.Warn("redelivering a recorded message", "message", m.ID, "err", err)
		}
	}
}

// Envelope reads the envelope of s back from sender's tool.call line.
func Envelope(read func(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error),
	sender string, s projection.SentRef) (json.RawMessage, error) {
	e, err := read(context.Background(), sender, s.Ref.Seq, s.Ref.Off)
	if err != nil {
		return nil, err
	}
	msgs := projection.SentEnvelopes(e.Data)
	if s.Index >= len(msgs) {
		return nil, fmt.Errorf("the tool.call at seq %d of %s records %d messages, not %d", s.Ref.Seq, sender, len(msgs), s.Index+1)
	}
	return msgs[s.Index], nil
}
