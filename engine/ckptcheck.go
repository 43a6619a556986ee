package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
)

// A checkpoint is checked against the log it summarizes (SPEC 9; the
// checks themselves are package projection's, verify.go): at load, what
// recovery acts on, cheaply (its shape, the lines its facts name, the
// open run's lines); after the daemon serves, everything, by the scrub,
// which folds each checkpointed prefix again and compares fingerprints.
// A mismatch at load makes the load fold the whole log; one found by the
// scrub makes the agent's projection the fold of its whole log (refold),
// with what the engine keeps beside it made to agree. Either way the log
// wins and a warning says so.

// checkCheckpoint checks agent id's checkpoint state p, not yet folded
// past its line, against the log, and returns its fingerprint for the
// scrub. Any error (a mismatch, or a line that cannot be read back) means
// the checkpoint is not used.
func (c *Core) checkCheckpoint(ctx context.Context, id string, p *fold.State, r eventlog.Resume) ([32]byte, error) {
	if p.ID != id {
		return [32]byte{}, fmt.Errorf("%w: it is the checkpoint of agent %s", fold.ErrMismatch, p.ID)
	}
	if err := p.CheckShape(); err != nil {
		return [32]byte{}, err
	}
	longLast := r.Len >= 1<<10
	refs := p.Witnesses(longLast)
	at := make([]eventlog.At, len(refs))
	for i, ref := range refs {
		at[i] = eventlog.At{Seq: ref.Seq, Off: max(ref.Off, 0)}
	}
	lines := make(map[uint64]eventlog.Entry, len(at))
	if err := c.st.ReadSeqs(ctx, id, at, func(_ int, e eventlog.Entry) error {
		lines[e.Seq] = e
		return nil
	}); err != nil {
		return [32]byte{}, fmt.Errorf("reading the lines its facts come from back: %w", err)
	}
	err := p.CheckWitnesses(func(ref inbox.Ref) (eventlog.Entry, error) {
		if e, ok := lines[ref.Seq]; ok {
			return e, nil
		}
		return eventlog.Entry{}, fmt.Errorf("line %d was not read", ref.Seq)
	}, longLast)
	if err != nil {
		return [32]byte{}, err
	}
	if from, _, open := p.OpenRunSpan(); open {
		r, err := c.st.Read(ctx, id, from.Seq, max(from.Off, 0))
		if err != nil {
			return [32]byte{}, fmt.Errorf("reading the open run's lines back: %w", err)
		}
		err = p.CheckRun(r.Next)
		_ = r.Close()
		if err != nil {
			return [32]byte{}, err
		}
	}
	return p.Fingerprint()
}

// foldLines folds agent id's log from its first line to line upTo into
// a projection in replay mode (upTo 0: to the end).
func (c *Core) foldLines(ctx context.Context, id string, upTo uint64) (*fold.State, error) {
	p := fold.New()
	p.BeginReplay(nil)
	if err := c.foldMore(ctx, id, p, upTo); err != nil {
		return nil, err
	}
	return p, nil
}

// foldMore folds the lines of agent id's log after p's last one into p,
// up to line upTo (0: to the end).
func (c *Core) foldMore(ctx context.Context, id string, p *fold.State, upTo uint64) error {
	return c.readEach(ctx, id, p.LastSeq+1, max(p.LastOff, 0), func(e eventlog.Entry) error {
		switch {
		case e.Seq <= p.LastSeq:
			return nil
		case upTo > 0 && e.Seq > upTo:
			return errStopRead
		}
		if err := p.Apply(e); err != nil {
			return fmt.Errorf("%s: %w", c.logPath(id), err)
		}
		return nil
	})
}

// scrubState folds again the prefix a checkpoint let recovery skip and
// compares it with the checkpoint's state; on a mismatch the agent is
// refolded from its whole log.
func (c *Core) scrubState(ctx context.Context, l *loaded) {
	p, err := c.foldLines(ctx, l.ID, l.Resumed.Seq)
	var got [32]byte
	if err == nil {
		got, err = p.Fingerprint()
	}
	if err != nil {
		c.log.Warn("scrub could not fold a log again to check its checkpoint", "agent", l.ID, "err", err)
		return
	}
	if got == l.Checked {
		return
	}
	c.log.Warn("checkpoint disagrees with the log (found by the scrub); serving the fold of the whole log", "agent", l.ID,
		"checkpoint_seq", l.Resumed.Seq)
	c.ckpts.Remove(l.ID)
	if err := c.refold(ctx, l.Agent); err != nil {
		c.log.Error("refolding an agent whose checkpoint disagreed with its log; restart the daemon to fold it from its log",
			"agent", l.ID, "err", err)
		l.Agent.MarkCorrupt(fmt.Errorf("its checkpoint disagreed with its log and refolding failed (%w): restart the daemon", err))
		c.changed.Fire()
	}
}

// refold makes agent a's projection the fold of its whole log, once it is
// at rest (a turn running defers it to the turn's end), and makes what
// the engine keeps beside the projection agree: the pending totals, the
// subscriptions' index, reminder timers, resume tokens, the live session.
func (c *Core) refold(ctx context.Context, a *agent) error {
	at, _ := a.LastSeq()
	p, err := c.foldLines(ctx, a.ID(), at)
	if err != nil {
		return err
	}
	var old *fold.State
	swapped, err := a.Refold(p, func(p *fold.State, upTo uint64) error { return c.foldMore(ctx, a.ID(), p, upTo) },
		c.pendingLoader(ctx, a.ID()), &c.pending, &old)
	if err != nil || !swapped {
		if err == nil { // a turn runs: again once it has ended
			a.AfterTurn(func() {
				if err := c.refold(c.ctx, a); err != nil {
					c.log.Error("refolding an agent after its turn", "agent", a.ID(), "err", err)
				}
			})
		}
		return err
	}
	c.agreeWith(a, old, p)
	_ = c.ckpts.Write(a, 0) // logged by Write
	c.changed.Fire()
	c.wake(a)
	return nil
}

// agreeWith makes what the engine keeps beside a's projection agree with
// p, which replaced old.
func (c *Core) agreeWith(a *agent, old, p *fold.State) {
	id := a.ID()
	if old.Name != p.Name || old.ParentID != p.ParentID || old.Terminated != p.Terminated {
		a.MarkCorrupt(errors.New("its checkpoint put it elsewhere in the tree than its log does: restart the daemon to place it from its log"))
	}
	for sid, sub := range old.Subs {
		if _, ok := p.Subs[sid]; !ok {
			c.agents.Unindex(sub)
		}
	}
	for _, sub := range p.Subs {
		if _, live := c.agent(sub.Target); live {
			c.agents.Index(sub, id)
		}
	}
	for rid := range old.Reminders {
		if _, ok := p.Reminders[rid]; !ok {
			c.sched.Cancel(id, reminderTimer(rid))
		}
	}
	for rid := range p.Reminders {
		c.armReminder(a, rid)
	}
	c.agreeTokens(id, old, p)
	c.agreeSession(a, old, p)
	c.noticeWaitOf(a)
}

// agreeTokens drops the live resume token of old's wait that p does not
// have, and installs p's.
func (c *Core) agreeTokens(id string, old, p *fold.State) {
	if r := old.Run; r != nil && r.Wait != nil && r.Wait.TokenState == string(schema.TokLive) {
		if nr := p.Run; nr == nil || nr.Wait == nil || nr.Wait.TokenID != r.Wait.TokenID || nr.Wait.TokenState != r.Wait.TokenState {
			c.tokens.Remove(r.Wait.TokenID)
		}
	}
	if r := p.Run; r != nil && !r.Ended && r.Wait != nil && r.Wait.TokenState == string(schema.TokLive) {
		if _, ok := c.tokens.Get(r.Wait.TokenID); !ok {
			tok := token.Token{ID: r.Wait.TokenID, AgentID: id, RunID: r.RunID, SecretHash: r.Wait.SecretHash,
				Deadline: r.Wait.Deadline, State: token.Live}
			if err := c.tokens.Add(tok); err != nil {
				c.log.Error("reinstalling a resume token", "agent", id, "token", tok.ID, "err", err)
			}
		}
	}
}

// agreeSession evicts the live session of a, whose session facts p
// changed, and writes them in its session.json.
func (c *Core) agreeSession(a *agent, old, p *fold.State) {
	id := a.ID()
	if factsOf(old) != factsOf(p) {
		if err := c.sessions.Evict(c.ctx, id); err != nil {
			c.log.Warn("evicting the session of a refolded agent", "agent", id, "err", err)
		}
		facts := factsOf(p)
		c.saveSession(a, func(s *session.Session) {
			s.Provider, s.Model, s.Handle = facts.Provider, facts.Model, facts.Handle
			if !facts.Suspended {
				s.ProviderState = nil
			}
		})
	}
}

// pendingLoader reads pending messages' message.enqueued lines back
// from agent id's log through one handle, for a fold that ends its replay
// (EndReplayMany); a line that is no message, or not at the offset
// named, is an error.
func (c *Core) pendingLoader(ctx context.Context, id string) fold.Loader {
	return func(refs []inbox.Ref, fn func(int, json.RawMessage) error) error {
		at := make([]eventlog.At, len(refs))
		for i, r := range refs {
			at[i] = eventlog.At{Seq: r.Seq, Off: max(r.Off, 0)}
		}
		return c.st.ReadSeqs(ctx, id, at, func(i int, e eventlog.Entry) error {
			if e.Event != schema.MessageEnqueued {
				return fmt.Errorf("%w: line %d is %s, not message.enqueued", fold.ErrMismatch, e.Seq, e.Event)
			}
			if r := refs[i]; r.Off > 0 && e.Off != r.Off {
				return fmt.Errorf("%w: line %d is at byte %d, not %d", fold.ErrMismatch, e.Seq, e.Off, r.Off)
			}
			return fn(i, e.Data)
		})
	}
}
