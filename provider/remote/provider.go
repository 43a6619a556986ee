package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warren-dev/warren/provider"
)

// Provider places the sessions of one provider entry on workers, and on
// the daemon's own provider when no worker has a free slot.
type Provider struct {
	d      *Directory
	name   string
	local  provider.Provider
	labels map[string]string
}

// Name is the local provider's.
func (p *Provider) Name() string { return p.local.Name() }

// Capabilities are the local provider's: a worker runs the same binary's
// provider for the entry.
func (p *Provider) Capabilities() provider.Capabilities { return p.local.Capabilities() }

// CheckModel is the local provider's, when it has one.
func (p *Provider) CheckModel(model string) error {
	if mc, ok := p.local.(provider.ModelChecker); ok {
		return mc.CheckModel(model)
	}
	return nil
}

// Create opens a new session on a worker, else locally.
func (p *Provider) Create(ctx context.Context, spec provider.Spec) (provider.Session, error) {
	s, err := p.open(ctx, OpenRequest{Spec: SpecOf(spec)}, spec)
	if s != nil || err != nil {
		return s, err
	}
	p.localNote(spec.AgentID, spec.Local)
	return p.local.Create(ctx, spec)
}

// Restore restores a session on a worker, else locally.
func (p *Provider) Restore(ctx context.Context, spec provider.Spec, blob []byte, handle string) (provider.Session, error) {
	s, err := p.open(ctx, OpenRequest{Restore: true, Blob: blob, Handle: handle, Spec: SpecOf(spec)}, spec)
	if s != nil || err != nil {
		return s, err
	}
	p.localNote(spec.AgentID, spec.Local)
	return p.local.Restore(ctx, spec, blob, handle)
}

// localNote logs a session opened locally while some worker serves its
// pool (all of them full or unreachable, or the session must run here).
func (p *Provider) localNote(agent, local string) {
	if !p.d.serves(p.name) {
		return
	}
	if local != "" {
		p.d.log.Debug("the session runs on the daemon's machine", "agent", agent, "pool", p.name, "why", local)
		return
	}
	p.d.log.Info("no worker with a free slot answered; opening the session locally", "agent", agent, "pool", p.name)
}

// openTimeout bounds an open on one worker (an agent CLI can take
// seconds to start).
const openTimeout = 2 * time.Minute

// open tries the workers with a free slot, one after another: nil, nil
// when none could take the session (run it locally). A worker that
// answers with an error other than a full pool ends the search with it.
// The session's stderr, which its worker sends, goes to the agent's
// stderr log (spec.Launcher's, a provider.StderrLogger).
func (p *Provider) open(ctx context.Context, req OpenRequest, spec provider.Spec) (*Session, error) {
	if spec.Local != "" {
		return nil, nil
	}
	req.Provider, req.Daemon = p.name, p.d.daemon
	tried := map[string]bool{}
	for {
		sl, ok := p.d.place(p.name, req.Spec.AgentID, p.labels, tried)
		if !ok {
			return nil, nil
		}
		tried[sl.worker] = true
		if spec.Workspace != nil && req.Spec.Workspace == nil {
			// The workspace is handed over once, to whichever worker opens.
			hand, err := spec.Workspace.Lease(ctx)
			if err != nil {
				p.d.release(sl)
				p.d.log.Warn("the workspace could not be handed to a worker; opening the session locally", "agent", req.Spec.AgentID, "err", err)
				return nil, nil
			}
			req.Spec.Workspace = &Hand{Remote: spec.Workspace.Remote, Lease: hand.Lease, Branch: hand.Branch}
		}
		req.Session = NewAttemptID()
		s := &Session{d: p.d, slot: sl, id: req.Session}
		// The stderr route is set before the open: the agent's process
		// may write before the worker answers.
		if lg, ok := spec.Launcher.(provider.StderrLogger); ok {
			var w io.Writer
			w, s.releaseStderr = lg.StderrLog()
			p.d.stderr.add(s.id, sl.worker, w)
		}
		var rep OpenReply
		octx, cancel := context.WithTimeout(ctx, openTimeout)
		err := p.d.request(octx, sl, OpOpen, req, &rep)
		cancel()
		if err == nil && rep.Error == nil && req.Spec.Workspace != nil && rep.Workspace != req.Spec.Workspace.Lease {
			// A worker that does not know workspaces ran the open without it.
			rep.Error = &WireError{Kind: KindRefused, Message: "the worker did not take up the agent's workspace (is it older than the daemon?)"}
			go p.d.stopRemote(sl, req.Session)
		}
		if err == nil && rep.Error == nil {
			p.d.log.Info("session placed", "agent", req.Spec.AgentID, "worker", sl.worker, "pool", sl.pool, "restore", req.Restore)
			s.handle, s.restoredBy = rep.Handle, rep.RestoredBy
			if ws := req.Spec.Workspace; ws != nil {
				s.remote, s.branch = ws.Remote, ws.Branch
			}
			return s, nil
		}
		s.endStderr()
		p.d.release(sl)
		if err != nil {
			// The worker may have opened it after all: stop it there.
			go p.d.stopRemote(sl, req.Session)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			// Unreachable: try another worker (its heartbeat will tell).
			p.d.log.Warn("worker did not answer an open; trying another", "worker", sl.worker, "agent", req.Spec.AgentID, "err", err)
			continue
		}
		switch rep.Error.Kind {
		case KindPoolFull:
			continue
		case KindRefused:
			p.d.log.Warn("a worker refused an open; trying another", "worker", sl.worker, "err", rep.Error.Message)
			continue
		}
		return nil, fmt.Errorf("worker %s: %w", sl.worker, rep.Error.Err())
	}
}

// Session is a provider session on a worker.
type Session struct {
	d          *Directory
	slot       slot
	id         string
	handle     string
	restoredBy string
	lost       atomic.Bool
	stopOnce   sync.Once
	// releaseStderr gives the agent's stderr log back (nil: none).
	releaseStderr func()
	// remote and branch: the session runs in the worker's copy of the
	// agent's workspace, moved through the agents' remote ("": none).
	remote, branch string
}

// AwayRemote is the agents' remote when the session runs in the worker's
// copy of the agent's workspace (provider.WorkspaceAway): each attempt
// hands it over (provider.TurnIO.Workspace).
func (s *Session) AwayRemote() string { return s.remote }

// Handle is the worker provider's native handle.
func (s *Session) Handle() string { return s.handle }

// RestoredBy says how the worker's provider restored the session.
func (s *Session) RestoredBy() string { return s.restoredBy }

// Worker is the id of the worker holding the session.
func (s *Session) Worker() string { return s.slot.worker }

// Lost reports that the session's worker is gone (provider.Lost): the
// engine opens the session again before it retries.
func (s *Session) Lost() bool {
	if s.lost.Load() {
		return true
	}
	select {
	case <-s.slot.lost:
		s.lost.Store(true)
		return true
	default:
		return false
	}
}

// Send runs one attempt on the worker (doc.go, A turn).
func (s *Session) Send(ctx context.Context, prompt string, io provider.TurnIO) (string, error) {
	if s.Lost() {
		return "", provider.Transient(fmt.Errorf("%w: %s", errLost, s.slot.worker), 0)
	}
	att := NewAttemptID()
	// The attempt's tool calls run under a context that ends with it
	// (a lost worker included).
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	end := s.d.router.add(actx, att, s.slot.worker, io)
	req := SendRequest{Session: s.id, Daemon: s.d.daemon, Attempt: att, Prompt: prompt}
	if h := io.Workspace; h != nil {
		req.Workspace = &Hand{Remote: s.remote, Lease: h.Lease, Branch: h.Branch, Message: h.Message}
	}
	rctx := actx
	if io.Workspace != nil {
		// Cancelled, the attempt's worker hands back what the agent left:
		// its answer is awaited HandBackWait past the cancel.
		var rcancel context.CancelFunc
		rctx, rcancel = context.WithCancel(context.WithoutCancel(ctx))
		defer rcancel()
		grace := time.AfterFunc(HandBackWait, rcancel)
		grace.Stop() // armed by the cancel
		stop := context.AfterFunc(ctx, func() {
			s.abandon(att)
			grace.Reset(HandBackWait)
		})
		defer func() { stop(); grace.Stop() }()
	}
	var rep SendReply
	err := s.d.request(rctx, s.slot, OpSend, req, &rep)
	if err != nil {
		cancel()
		s.abandon(att)
	}
	end(rep.Chunks, rep.Usages) // no call of the attempt runs after this
	if err == nil && io.Workspace != nil {
		io.Workspace.Snapshot = rep.Snapshot
	}
	if err == nil && rep.Error != nil && (rep.Error.Kind == KindLost || rep.Error.Kind == KindRefused) {
		s.lost.Store(true)
	}
	switch {
	case err == nil && ctx.Err() != nil:
		// The answer after the cancel, awaited for its hand-back: the
		// attempt ended with its context, as a local one does, whatever
		// the worker answered (the snapshot, if any, comes home).
		return "", fmt.Errorf("turn on worker %s: %w", s.slot.worker, ctx.Err())
	case err == nil:
		return rep.Response, rep.Error.Err()
	case ctx.Err() != nil:
		return "", fmt.Errorf("turn on worker %s: %w", s.slot.worker, ctx.Err())
	case errors.Is(err, errLost):
		s.lost.Store(true)
		return "", provider.Transient(fmt.Errorf("turn on worker %s: %w", s.slot.worker, err), 0)
	default:
		// The connection failed: the worker may still run the attempt,
		// which is abandoned; the session is opened again elsewhere.
		s.lost.Store(true)
		return "", provider.Transient(fmt.Errorf("turn on worker %s: %w", s.slot.worker, err), 0)
	}
}

// abandon tells the worker to stop an attempt the daemon gave up on (best
// effort: its late traffic is dropped by the router either way).
func (s *Session) abandon(att string) {
	if body, err := s.d.authed(s.slot.worker, CancelRequest{Attempt: att}); err == nil {
		_ = s.d.nc.Publish(WorkerSubject(s.slot.worker, OpCancel), body)
	}
}

// endStderr stops keeping the session's stderr (what its worker sends
// later is dropped).
func (s *Session) endStderr() {
	s.d.stderr.remove(s.id)
	if s.releaseStderr != nil {
		s.releaseStderr()
	}
}

// Suspend asks the worker for the session's blob.
func (s *Session) Suspend(ctx context.Context) ([]byte, error) {
	if s.Lost() {
		return nil, fmt.Errorf("%w: %s", errLost, s.slot.worker)
	}
	var rep SuspendReply
	if err := s.d.request(ctx, s.slot, OpSuspend, SessionRequest{Session: s.id}, &rep); err != nil {
		if errors.Is(err, errLost) {
			s.lost.Store(true)
		}
		return nil, fmt.Errorf("suspending the session on worker %s: %w", s.slot.worker, err)
	}
	return rep.Blob, rep.Error.Err()
}

// Stop stops the session on its worker and frees its slot. A lost
// session's stop is still sent, in the background: a worker that was only
// cut off (a healed partition) holds it yet.
func (s *Session) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		defer s.d.release(s.slot)
		defer s.endStderr()
		if s.Lost() {
			go s.d.stopRemote(s.slot, s.id)
			return
		}
		err = s.d.stopRemote(s.slot, s.id)
	})
	return err
}
