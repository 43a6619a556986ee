package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/workspace"
)

// turn is one attempt's traffic to the daemon: the provider's TurnIO.
type turn struct {
	w       *Worker
	daemon  string
	attempt string

	// cancel ends the attempt on the worker (a call through the agent's
	// socket that suspended the run).
	cancel context.CancelFunc

	mu        sync.Mutex
	chunks    int
	usages    int
	suspended error     // the error of the socket call that suspended the run
	cancelled time.Time // when the daemon's cancel arrived (zero: none)
}

// daemonCancel is the daemon's cancel of the attempt: noted (the hand-back
// must end before the daemon stops waiting for it), then the attempt's
// context ends.
func (t *turn) daemonCancel() {
	t.mu.Lock()
	if t.cancelled.IsZero() {
		t.cancelled = time.Now()
	}
	t.mu.Unlock()
	t.cancel()
}

// handBackBy is when a hand-back of the attempt must end: handBackFor
// from now, and no later than the daemon waits for it after its cancel
// (less handBackMargin for the answer's way back).
func (t *turn) handBackBy() time.Time {
	by := time.Now().Add(handBackFor)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.cancelled.IsZero() {
		if c := t.cancelled.Add(remote.HandBackWait - handBackMargin); c.Before(by) {
			by = c
		}
	}
	return by
}

// handBackMargin is what handBackBy leaves the answer after a cancel.
const handBackMargin = time.Second

// suspend ends the attempt because a call through the agent's socket
// suspended the run: its answer is that error, as the daemon's own door
// does for a local process (engine/calldoor.go).
func (t *turn) suspend(err error) {
	t.mu.Lock()
	if t.suspended == nil {
		t.suspended = err
	}
	t.mu.Unlock()
	t.cancel()
}

// suspendedBy is the error of the call that suspended the run, if any.
func (t *turn) suspendedBy() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.suspended
}

// counts is what the turn published.
func (t *turn) counts() (chunks, usages int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.chunks, t.usages
}

func (t *turn) msg(kind string, v any) *nats.Msg {
	body, _ := json.Marshal(v)
	m := nats.NewMsg(remote.AttemptSubject(t.daemon, t.w.o.ID, t.attempt, kind))
	m.Data = body
	return m
}

// chunk publishes a piece of text, numbered.
func (t *turn) chunk(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.w.o.Conn.PublishMsg(t.msg(remote.KindChunk, remote.Chunk{Seq: t.chunks, Text: text}))
	t.chunks++
}

// usage publishes a model request's usage.
func (t *turn) usage(u provider.Usage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.w.o.Conn.PublishMsg(t.msg(remote.KindUsage, u))
	t.usages++
}

// CallTool runs a tool at the daemon (provider.ToolCaller). A call the
// daemon could not be asked (the connection, no responders) is an error:
// the provider ends the turn, as for a local process that lost its daemon.
func (t *turn) CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	rep, err := t.request(ctx, remote.KindTool, remote.ToolRequest{Tool: tool, Args: args})
	if err != nil {
		return nil, err
	}
	if rep.Error != nil {
		return nil, rep.Error.Err()
	}
	return rep.Result, nil
}

// gate asks the daemon whether the next model request may go (budgets).
func (t *turn) gate(ctx context.Context) error {
	rep, err := t.request(ctx, remote.KindGate, struct{}{})
	if err != nil {
		return err
	}
	return rep.Error.Err()
}

func (t *turn) request(ctx context.Context, kind string, v any) (remote.ToolReply, error) {
	m, err := t.w.o.Conn.RequestMsgWithContext(ctx, t.msg(kind, v))
	if err != nil {
		return remote.ToolReply{}, provider.Transient(fmt.Errorf("asking the daemon (%s): %w", kind, err), 0)
	}
	var rep remote.ToolReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return remote.ToolReply{}, fmt.Errorf("the daemon answered %s with bad JSON: %w", kind, err)
	}
	return rep, nil
}

// send runs one attempt.
func (w *Worker) send(ctx context.Context, r micro.Request, data []byte) {
	var req remote.SendRequest
	if err := json.Unmarshal(data, &req); err != nil || remote.CheckID(req.Attempt) != nil || remote.CheckID(req.Daemon) != nil {
		respond(r, remote.SendReply{Error: &remote.WireError{Kind: remote.KindPermanent, Message: fmt.Sprintf("bad send request: %v", err)}})
		return
	}
	s, ok := w.lookup(req.Session)
	if !ok {
		respond(r, remote.SendReply{Error: &remote.WireError{Kind: remote.KindLost,
			Message: "worker " + w.o.ID + " holds no session " + req.Session + " (it restarted, or a later daemon opened one)"}})
		return
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := &turn{w: w, daemon: req.Daemon, attempt: req.Attempt, cancel: cancel}
	w.mu.Lock()
	w.attempts[req.Attempt] = t.daemonCancel
	if w.cancelled[req.Attempt] {
		delete(w.cancelled, req.Attempt)
		t.daemonCancel() // its cancel arrived first
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.attempts, req.Attempt)
		w.mu.Unlock()
	}()
	s.mu.Lock()
	resp, snapshot, err := w.runTurn(actx, s, t, &req)
	s.mu.Unlock()
	chunks, usages := t.counts()
	wire := remote.Wire(err)
	if err != nil && ctx.Err() != nil {
		// The worker is stopping: its sessions go with it.
		wire = &remote.WireError{Kind: remote.KindLost, Message: "worker " + w.o.ID + " is stopping: " + err.Error()}
	}
	respond(r, remote.SendReply{Response: resp, Error: wire, Chunks: chunks, Usages: usages, Snapshot: snapshot})
}

// runTurn runs attempt t of session s: in the copy of the agent's
// workspace when the attempt hands one over (taken up first, handed back
// when the agent's turn ends: snapshot). After a turn that failed, was
// cancelled or suspended its run (await_input, a budget) the copy is
// handed back all the same, for at most handBackFor: the daemon's
// worktree gets what the agent left, as a local agent's keeps it.
func (w *Worker) runTurn(ctx context.Context, s *session, t *turn, req *remote.SendRequest) (resp, snapshot string, err error) {
	if h := req.Workspace; h != nil {
		if s.away == nil {
			return "", "", fmt.Errorf("the attempt hands over a workspace; session %s was opened without one", req.Session)
		}
		l := w.copies.of(s.agent)
		l.Lock()
		defer l.Unlock()
		if err := s.away.take(ctx, h); err != nil {
			// Tried again on a new lease (the daemon's worktree is as it was).
			return "", "", provider.Transient(fmt.Errorf("taking up the workspace on worker %s: %w", w.o.ID, err), 0)
		}
	}
	w.setTurn(s.agent, t)
	resp, err = s.sess.Send(ctx, req.Prompt, provider.TurnIO{Tools: t, OnChunk: t.chunk, OnUsage: t.usage, BeforeRequest: func() error { return t.gate(ctx) }})
	w.setTurn(s.agent, nil)
	if serr := t.suspendedBy(); serr != nil {
		resp, err = "", serr // whatever the provider answered after it
	}
	if req.Workspace == nil {
		return resp, "", err
	}
	// Handed back under a context of its own: a cancel that arrives
	// meanwhile does not cut it short, the daemon's wait for it does.
	gctx, stop := context.WithDeadline(context.WithoutCancel(ctx), t.handBackBy())
	defer stop()
	if err != nil {
		if gctx.Err() != nil || w.isClosing() {
			return resp, "", err // too late (the daemon no longer waits), or the worker is stopping
		}
		if snapshot, gerr := s.away.give(gctx, req.Workspace); gerr == nil {
			return resp, snapshot, err
		} else if !errors.Is(gerr, workspace.ErrLeaseLost) {
			w.log.Warn("the copy of a workspace after a turn that did not succeed was not handed back", "agent", s.agent, "err", gerr)
		}
		return resp, "", err
	}
	if snapshot, err = s.away.give(gctx, req.Workspace); err != nil {
		// Not handed back, so not done: the turn runs again on a new lease,
		// from the daemon's worktree as it was.
		return "", "", provider.Transient(fmt.Errorf("handing the workspace back from worker %s: %w", w.o.ID, err), 0)
	}
	return resp, snapshot, nil
}

// handBackFor bounds the hand-back of a copy after a turn; after the
// daemon's cancel, handBackBy bounds it by the daemon's wait too.
const handBackFor = 5 * time.Minute

// setTurn records agent's running turn (nil: none).
func (w *Worker) setTurn(agent string, t *turn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t == nil {
		delete(w.turns, agent)
		return
	}
	w.turns[agent] = t
}

// turnOf is agent's running turn (nil between turns).
func (w *Worker) turnOf(agent string) *turn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.turns[agent]
}

// cancel cancels an attempt.
func (w *Worker) cancel(_ context.Context, r micro.Request, data []byte) {
	var req remote.CancelRequest
	if json.Unmarshal(data, &req) != nil {
		return
	}
	w.mu.Lock()
	c := w.attempts[req.Attempt]
	if c == nil && remote.CheckID(req.Attempt) == nil {
		if len(w.cancelled) >= maxCancelled {
			clear(w.cancelled)
		}
		w.cancelled[req.Attempt] = true
	}
	w.mu.Unlock()
	if c != nil {
		w.log.Info("attempt cancelled by the daemon", "attempt", req.Attempt)
		c()
	}
}
