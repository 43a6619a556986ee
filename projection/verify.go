package projection

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
)

// Checking a checkpoint's state against the log it summarizes (SPEC 9:
// the log wins). A checkpoint's sum proves only that its bytes are the
// ones written; a writer bug, a version skew or an edit with the sum
// recomputed yields a state that checks out by itself and is wrong. So
// before recovery trusts a state, it checks it three ways, each cheap:
//
//   - Shape: the invariants every fold keeps (a run iff a turn number,
//     every enqueued message either pending or taken, references inside
//     the log, no termination: a checkpoint is never written for a
//     terminated agent).
//   - Witnesses: the facts recovery acts on name the log line they came
//     from, and that line is read back and must say the same: the tree
//     facts against agent.created (line 1), the preferred provider
//     against the line that set it, the session against the latest
//     session event, the gate against the latest tool.gate, the latest run against its turn.start and, once
//     ended, the line that ended it; the checkpoint's own line must not
//     be agent.terminated.
//   - The open run: when the latest run is open (recovery re-runs or
//     resumes it), the lines from its turn.start to the checkpoint are
//     folded again and must give the same run (CheckRun).
//
// What is left (subscriptions, reminders, usage, the last resume,
// metadata, the enqueued set's members) is checked after the daemon
// serves: the scrub folds every checkpointed prefix again in the
// background and compares fingerprints (Fingerprint); a mismatch makes
// the daemon fold the agent's whole log and serve that instead.

// ErrMismatch marks a checkpoint state that disagrees with its log.
var ErrMismatch = errors.New("the checkpoint disagrees with the log")

// mismatch is an error wrapping ErrMismatch.
func mismatch(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMismatch}, args...)...)
}

// CheckShape checks the invariants a fold keeps on a state decoded from
// a checkpoint (replay mode, pending messages by reference).
func (p *State) CheckShape() error {
	switch {
	case !p.Created || p.ID == "":
		return mismatch("no agent.created folded")
	case p.Terminated:
		return mismatch("it says terminated, and no checkpoint is written for a terminated agent")
	case (p.Run == nil) != (p.TurnNo == 0):
		return mismatch("turn %d with run %v", p.TurnNo, p.Run != nil)
	case p.Run != nil && p.Run.Turn != p.TurnNo:
		return mismatch("the latest run is turn %d, the turn number %d", p.Run.Turn, p.TurnNo)
	case p.Taken < 0 || p.Enqueued.Len() != p.PendingLen()+p.Taken:
		return mismatch("%d messages enqueued, %d pending and %d taken", p.Enqueued.Len(), p.PendingLen(), p.Taken)
	}
	return p.checkRefs()
}

// checkRefs checks that the lines the state names are inside the log:
// witnesses and pending messages.
func (p *State) checkRefs() error {
	inLog := func(what string, r inbox.Ref, optional bool) error {
		if (r == inbox.Ref{}) && optional {
			return nil
		}
		if r.Seq == 0 || r.Seq > p.LastSeq {
			return mismatch("%s at seq %d, outside the log's first %d lines", what, r.Seq, p.LastSeq)
		}
		if r.Seq > 1 && r.Off == 0 {
			// A fold records an offset it does not know as -1; only line
			// 1 is at 0.
			return mismatch("%s at seq %d has offset 0", what, r.Seq)
		}
		return nil
	}
	if err := inLog("the preferred provider's line", p.PrefRef, false); err != nil {
		return err
	}
	if err := inLog("the latest session event", p.SessRef, true); err != nil {
		return err
	}
	if err := inLog("the latest gate", p.GateRef, true); err != nil {
		return err
	}
	if r := p.Run; r != nil {
		if err := inLog("the latest run's turn.start", r.StartRef, false); err != nil {
			return err
		}
		if err := inLog("the latest run's end", r.EndRef, !r.Ended); err != nil {
			return err
		}
		if !r.Ended && (r.EndRef != inbox.Ref{}) {
			return mismatch("an open run with an end at seq %d", r.EndRef.Seq)
		}
	}
	if lz := p.lazy; lz != nil {
		for _, lm := range lz.msgs {
			if err := inLog("pending message "+lm.key.String(), lm.where(), false); err != nil {
				return err
			}
		}
	}
	return nil
}

// Witnesses lists the log lines CheckWitnesses reads: line 1, the
// checkpoint's own line (unless longLast: a line of a KiB or more is no
// agent.terminated, and a long line is checked by its ends only), and the
// lines the state names as its facts' sources.
func (p *State) Witnesses(longLast bool) []inbox.Ref {
	refs := []inbox.Ref{{Seq: 1}, p.PrefRef}
	if !longLast {
		refs = append(refs, inbox.Ref{Seq: p.LastSeq, Off: p.LastOff})
	}
	if (p.SessRef != inbox.Ref{}) {
		refs = append(refs, p.SessRef)
	}
	if (p.GateRef != inbox.Ref{}) {
		refs = append(refs, p.GateRef)
	}
	if r := p.Run; r != nil {
		refs = append(refs, r.StartRef)
		if r.Ended {
			refs = append(refs, r.EndRef)
		}
	}
	return refs
}

// CheckWitnesses reads each witness line with read (which returns the
// entry with the ref's seq, the offset a hint) and checks that the state
// agrees with it (see the package's comment above).
func (p *State) CheckWitnesses(read func(inbox.Ref) (eventlog.Entry, error), longLast bool) error {
	get := func(r inbox.Ref, what string, events ...string) (eventlog.Entry, error) {
		e, err := read(inbox.Ref{Seq: r.Seq, Off: max(r.Off, 0)})
		if err != nil {
			return e, fmt.Errorf("reading %s (seq %d) back: %w", what, r.Seq, err)
		}
		if r.Off > 0 && e.Off != r.Off {
			return e, mismatch("%s (seq %d) is at byte %d of the log, not %d", what, r.Seq, e.Off, r.Off)
		}
		if len(events) > 0 && !bytesIn(e.Event, events) {
			return e, mismatch("%s at seq %d is %s, not %v", what, r.Seq, e.Event, events)
		}
		return e, nil
	}
	created, err := get(inbox.Ref{Seq: 1}, "line 1", schema.AgentCreated)
	if err != nil {
		return err
	}
	c := New()
	if err := c.Apply(created); err != nil {
		return fmt.Errorf("folding agent.created: %w", err)
	}
	if c.ID != p.ID || c.Name != p.Name || c.ParentID != p.ParentID || c.Instructions != p.Instructions ||
		c.Cwd != p.Cwd || c.Bootstrap != p.Bootstrap || !c.CreatedTS.Equal(p.CreatedTS) {
		return mismatch("its agent (%s %q under %q) is not the one agent.created made (%s %q under %q)",
			p.ID, p.Name, p.ParentID, c.ID, c.Name, c.ParentID)
	}
	if !longLast {
		if last, err := get(inbox.Ref{Seq: p.LastSeq, Off: p.LastOff}, "the checkpoint's line"); err != nil {
			return err
		} else if last.Event == schema.AgentTerminated {
			return mismatch("its line (seq %d) is agent.terminated", p.LastSeq)
		}
	}
	if err := p.checkPreference(get, c); err != nil {
		return err
	}
	if err := p.checkSession(get); err != nil {
		return err
	}
	if err := p.checkGate(get); err != nil {
		return err
	}
	return p.checkRunEnds(get)
}

// checkPreference checks Provider and Model against the line that set
// them: agent.created (c is its fold) or a run's turn.start.
func (p *State) checkPreference(get func(inbox.Ref, string, ...string) (eventlog.Entry, error), c *State) error {
	if p.PrefRef.Seq == 1 {
		if c.Provider != p.Provider || c.Model != p.Model {
			return mismatch("provider %s/%s, agent.created says %s/%s", p.Provider, p.Model, c.Provider, c.Model)
		}
		return nil
	}
	e, err := get(p.PrefRef, "the line that set the provider", schema.TurnStart)
	if err != nil {
		return err
	}
	var d schema.TurnStartData
	if err := decode(e, &d); err != nil {
		return err
	}
	if d.Provider == "" || d.Provider != p.Provider || d.Model != p.Model {
		return mismatch("provider %s/%s, its turn.start (seq %d) says %s/%s", p.Provider, p.Model, e.Seq, d.Provider, d.Model)
	}
	return nil
}

// checkSession checks the session facts against the latest session
// event: folding that event again must leave them as they are.
func (p *State) checkSession(get func(inbox.Ref, string, ...string) (eventlog.Entry, error)) error {
	if (p.SessRef == inbox.Ref{}) {
		if p.Handle != "" || p.SessProvider != "" || p.SessModel != "" || p.Suspended {
			return mismatch("a session (%s/%s %q) the log never recorded", p.SessProvider, p.SessModel, p.Handle)
		}
		return nil
	}
	e, err := get(p.SessRef, "the latest session event",
		schema.SessionCreated, schema.SessionRestored, schema.ContextReset, schema.SuspendResult)
	if err != nil {
		return err
	}
	s := &State{Handle: p.Handle, SessProvider: p.SessProvider, SessModel: p.SessModel, Suspended: p.Suspended}
	if err := s.Apply(e); err != nil {
		return err
	}
	if s.Handle != p.Handle || s.SessProvider != p.SessProvider || s.SessModel != p.SessModel || s.Suspended != p.Suspended {
		return mismatch("session %s/%s %q (suspended %v), its %s (seq %d) says %s/%s %q (suspended %v)",
			p.SessProvider, p.SessModel, p.Handle, p.Suspended, e.Event, e.Seq, s.SessProvider, s.SessModel, s.Handle, s.Suspended)
	}
	return nil
}

// checkGate checks Gated against the latest tool.gate line.
func (p *State) checkGate(get func(inbox.Ref, string, ...string) (eventlog.Entry, error)) error {
	if (p.GateRef == inbox.Ref{}) {
		if p.Gated {
			return mismatch("gated, and the log never gated it")
		}
		return nil
	}
	e, err := get(p.GateRef, "the latest gate", schema.ToolGate)
	if err != nil {
		return err
	}
	s := &State{}
	if err := s.Apply(e); err != nil {
		return err
	}
	if s.Gated != p.Gated {
		return mismatch("gated %v, its latest tool.gate (seq %d) says %v", p.Gated, e.Seq, s.Gated)
	}
	return nil
}

// checkRunEnds checks the latest run against its turn.start and, when it
// ended, the line that ended it.
func (p *State) checkRunEnds(get func(inbox.Ref, string, ...string) (eventlog.Entry, error)) error {
	r := p.Run
	if r == nil {
		return nil
	}
	e, err := get(r.StartRef, "the latest run's turn.start", schema.TurnStart)
	if err != nil {
		return err
	}
	var d schema.TurnStartData
	if err := decode(e, &d); err != nil {
		return err
	}
	if d.RunID != r.RunID || d.Turn != r.Turn {
		return mismatch("run %s turn %d, its turn.start (seq %d) is run %s turn %d", r.RunID, r.Turn, e.Seq, d.RunID, d.Turn)
	}
	if !r.Ended {
		return nil
	}
	e, err = get(r.EndRef, "the latest run's end", schema.TurnComplete, schema.TurnFailed, schema.TurnCancelled)
	if err != nil {
		return err
	}
	var end struct {
		RunID string `json:"run_id"`
	}
	if err := decode(e, &end); err != nil {
		return err
	}
	if end.RunID != r.RunID {
		return mismatch("run %s ended at seq %d, which ends run %s", r.RunID, e.Seq, end.RunID)
	}
	return nil
}

// OpenRunSpan is where the lines CheckRun needs begin (the open run's
// turn.start) and how many bytes of log they span to the checkpoint's
// line; ok is false when the latest run is not open.
func (p *State) OpenRunSpan() (from inbox.Ref, bytes int64, ok bool) {
	r := p.Run
	if r == nil || r.Ended {
		return inbox.Ref{}, 0, false
	}
	return r.StartRef, p.LastOff - r.StartRef.Off, true
}

// CheckRun folds again the lines from the open run's turn.start to the
// checkpoint's line (next returns them in order, then io.EOF or any
// error) and checks that they give the run the state holds.
func (p *State) CheckRun(next func() (eventlog.Entry, error)) error {
	if err := p.settleStart(); err != nil { // p may be replaying too
		return err
	}
	want := p.Run
	s := New()
	s.BeginReplay(nil)
	s.ClaimEpoch = want.ClaimEpoch
	for {
		e, err := next()
		if err != nil {
			if isEOF(err) {
				break
			}
			return fmt.Errorf("reading the open run's lines back: %w", err)
		}
		if e.Seq > p.LastSeq {
			break
		}
		if err := s.Apply(e); err != nil {
			return fmt.Errorf("folding the open run's lines: %w", err)
		}
	}
	if err := s.settleStart(); err != nil {
		return fmt.Errorf("folding the open run's lines: %w", err)
	}
	got, err := json.Marshal(s.Run)
	if err != nil {
		return err
	}
	held, err := json.Marshal(want)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, held) {
		return mismatch("its open run %s is not what the run's lines fold to", want.RunID)
	}
	return nil
}

// Fingerprint is a digest of everything the state serves, in either mode
// (replaying or not), so that a checkpoint's state and a fold of the
// same lines compare equal exactly when they agree. It leaves out Sent
// and Spawns, which recovery prunes once it has used them, offsets
// (hints), and what of a pending message recovery reads back from its
// line (all of it but the envelope of one whose payload is not resident).
func (p *State) Fingerprint() ([32]byte, error) {
	if err := p.settleStart(); err != nil {
		return [32]byte{}, err
	}
	// Offsets are hints: an entry replayed from the pending file has none
	// (-1) until the file is read again.
	c := *p
	c.Sent, c.Spawns = nil, nil
	c.LastOff, c.PrefRef.Off, c.SessRef.Off = 0, 0, 0
	if p.Run != nil {
		r := *p.Run
		r.StartRef.Off, r.EndRef.Off = 0, 0
		c.Run = &r
	}
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(&c); err != nil {
		return [32]byte{}, err
	}
	p.Enqueued.digest(h)
	var num [8]byte
	pending := func(id string, m *inbox.Message, seq uint64) error {
		h.Write([]byte(id))
		binary.LittleEndian.PutUint64(num[:], seq)
		h.Write(num[:])
		if m == nil || !m.Spilled() || m.PayloadSize <= ResidentPayload {
			// Its envelope is read back from the log, or (a message kept
			// without its payload only for the daemon's memory bound) is
			// the log's when it is shown (the engine's fillPayloads).
			return nil
		}
		env := *m
		env.Ref.Off = 0
		b, err := json.Marshal(env)
		h.Write(append(b, '\n'))
		return err
	}
	if lz := p.lazy; lz != nil {
		for _, k := range lz.order {
			lm, ok := lz.msgs[k]
			if !ok {
				continue
			}
			id := k.String()
			m := lm.msg
			if m == nil && lm.raw != nil {
				// A fold keeps a small message raw; a checkpoint lists one
				// whose payload is not resident with its envelope.
				dec, err := messageFromData(lm.raw)
				if err != nil {
					return [32]byte{}, fmt.Errorf("pending message %s: %w", id, err)
				}
				q := Queued(dec, eventlog.Entry{Seq: lm.ref.Seq, Off: lm.ref.Off})
				m = &q
			}
			if err := pending(id, m, lm.where().Seq); err != nil {
				return [32]byte{}, err
			}
		}
	} else {
		for _, m := range p.Pending.Peek() {
			if err := pending(m.ID, &m, m.Ref.Seq); err != nil {
				return [32]byte{}, err
			}
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out, nil
}

// isEOF reports whether err is the end of the lines.
func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// bytesIn reports whether s is one of list.
func bytesIn(s string, list []string) bool {
	for _, l := range list {
		if s == l {
			return true
		}
	}
	return false
}
