package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/nats-io/nats.go/micro"

	"github.com/warren-dev/warren/agentspec"
	"github.com/warren-dev/warren/launch"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/sandbox"
)

// The sessions a worker holds: opening one (with its copy of the
// workspace and its sandbox), its slot, stopping it.

// session is one provider session the worker holds.
type session struct {
	pool   string
	daemon string
	agent  string
	sess   provider.Session
	// release gives back the agent's socket (sockets.acquire) and its
	// hold of the agent's copy of the workspace.
	release func()
	// away is the copy of the agent's workspace the session runs in
	// (nil: none).
	away *away
	mu   sync.Mutex // one operation at a time
}

// stop stops the provider session and gives its socket back.
func (s *session) stop() error {
	err := s.sess.Stop()
	s.release()
	return err
}

// open creates or restores a session.
func (w *Worker) open(ctx context.Context, r micro.Request, data []byte) {
	var req remote.OpenRequest
	if err := json.Unmarshal(data, &req); err != nil || remote.CheckID(req.Session) != nil || remote.CheckID(req.Spec.AgentID) != nil ||
		remote.CheckID(req.Daemon) != nil {
		respond(r, remote.OpenReply{Error: &remote.WireError{Kind: remote.KindPermanent, Message: fmt.Sprintf("bad open request: %v", err)}})
		return
	}
	prov, ok := w.o.Lookup(req.Provider)
	if _, pool := w.o.Pools[req.Provider]; !ok || !pool {
		respond(r, remote.OpenReply{Error: &remote.WireError{Kind: remote.KindPoolFull, Message: "this worker has no pool " + req.Provider}})
		return
	}
	if req.Spec.Workspace != nil {
		// The daemon opens one session of an agent at a time: one this
		// worker still holds is stale (the daemon gave it up), and would
		// work in the same copy. (Before the reserve: it holds a slot.)
		w.stopAgent(req.Spec.AgentID)
	}
	if err := w.reserve(req.Provider, req.Daemon); err != nil {
		respond(r, remote.OpenReply{Error: remote.Wire(err)})
		return
	}
	spec := req.Spec.Provider()
	spec.Env = agentspec.ProcessEnv(w.o.Config().Providers[req.Provider], w.o.Env, spec.AgentID)
	var aw *away
	letCopy := func() {} // the session's hold of the agent's copy
	if req.Spec.Workspace != nil {
		w.copies.hold(spec.AgentID)
		letCopy = func() { w.copies.release(spec.AgentID) }
		var err error
		if aw, err = w.openAway(ctx, spec.AgentID, req.Spec.Workspace); err != nil {
			letCopy()
			w.unreserve(req.Provider)
			respond(r, remote.OpenReply{Error: &remote.WireError{Kind: remote.KindRefused, Message: err.Error()}})
			return
		}
		spec.Cwd = aw.ws.Path
	}
	if spec.Cwd == "" || !isDir(spec.Cwd) {
		spec.Cwd = filepath.Join(w.o.Dir, "agents", spec.AgentID)
		if err := os.MkdirAll(spec.Cwd, 0o700); err != nil {
			letCopy()
			w.unreserve(req.Provider)
			respond(r, remote.OpenReply{Error: remote.Wire(err)})
			return
		}
	}
	sock, release, err := w.sockets.acquire(ctx, spec.AgentID)
	if err != nil {
		letCopy()
		w.unreserve(req.Provider)
		respond(r, remote.OpenReply{Error: remote.Wire(err)})
		return
	}
	subject := remote.StderrSubject(req.Daemon, w.o.ID, req.Session)
	w.forward(spec.AgentID, subject)
	releaseSocket := release
	release = func() { w.unforward(spec.AgentID, subject); releaseSocket(); letCopy() }
	spec.Env = provider.MergeEnv(spec.Env, []string{provider.EnvSocket + "=" + sock})
	if err := w.launcher(ctx, &spec, sock, aw); err != nil {
		release()
		w.unreserve(req.Provider)
		respond(r, remote.OpenReply{Error: remote.Wire(err)})
		return
	}
	var sess provider.Session
	if req.Restore {
		sess, err = prov.Restore(ctx, spec, req.Blob, req.Handle)
	} else {
		sess, err = prov.Create(ctx, spec)
	}
	if err != nil {
		release()
		w.unreserve(req.Provider)
		respond(r, remote.OpenReply{Error: remote.Wire(err)})
		return
	}
	ws := &session{pool: req.Provider, daemon: req.Daemon, agent: spec.AgentID, sess: sess, release: release, away: aw}
	if werr := w.register(req.Session, ws); werr != nil {
		respond(r, remote.OpenReply{Error: werr})
		return
	}
	rep := remote.OpenReply{Handle: sess.Handle()}
	if aw != nil {
		rep.Workspace = req.Spec.Workspace.Lease // taken up
	}
	if rb, ok := sess.(provider.RestoredBy); ok {
		rep.RestoredBy = rb.RestoredBy()
	}
	w.log.Debug("session opened", "session", req.Session, "agent", spec.AgentID, "pool", req.Provider, "restore", req.Restore)
	respond(r, rep)
}

// register makes ws the worker's session id, or stops it and says why
// not: the worker is stopping, or the daemon gave the open up meanwhile
// (its stop came before the session was registered).
func (w *Worker) register(id string, ws *session) *remote.WireError {
	w.mu.Lock()
	closing := w.closing
	givenUp := w.cancelled[id]
	delete(w.cancelled, id)
	if !closing && !givenUp {
		w.sessions[id] = ws
	}
	w.mu.Unlock()
	switch {
	case givenUp:
		w.unreserve(ws.pool)
		_ = ws.stop()
		return &remote.WireError{Kind: remote.KindLost, Message: "the daemon gave this open up"}
	case closing:
		_ = ws.stop()
		return &remote.WireError{Kind: remote.KindLost, Message: "worker " + w.o.ID + " is stopping"}
	}
	return nil
}

// launcher gives spec the worker's part in each of its processes: the
// process records and stderr log, and for a sandboxed agent bubblewrap
// with a private home under the agent's directory and its socket sock
// bound in (never run without it: an error when bwrap does not work
// here).
func (w *Worker) launcher(ctx context.Context, spec *provider.Spec, sock string, aw *away) error {
	if spec.Sandbox == nil {
		spec.Launcher = w.launches.For(spec.AgentID, nil)
		return nil
	}
	if err := spec.Sandbox.Validate(); err != nil {
		return provider.Permanent(fmt.Errorf("the agent's sandbox: %w", err))
	}
	bwrap, err := w.sandboxes.Check(ctx)
	if err != nil {
		return provider.Permanent(fmt.Errorf("worker %s: %w", w.o.ID, err))
	}
	home := filepath.Join(w.o.Dir, "agents", spec.AgentID, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("the agent's private home: %w", err)
	}
	opHome, _ := os.UserHomeDir()
	var ro []string
	if w.o.Env.PythonPath != "" {
		ro = append(ro, w.o.Env.PythonPath)
	}
	lsb := &launch.Sandbox{Bwrap: bwrap, Spec: *spec.Sandbox, Home: home, OperatorHome: opHome, ReadOnly: ro,
		Socket: func() (string, func(), error) { return sock, func() {}, nil }}
	if aw != nil {
		lsb.GitDirs = func() (*sandbox.GitDirs, error) {
			common, admin, err := aw.git.Dirs(ctx, aw.ws)
			if err != nil {
				return nil, err
			}
			return &sandbox.GitDirs{Common: common, Admin: admin}, nil
		}
	}
	spec.Launcher = w.launches.For(spec.AgentID, lsb)
	spec.Env = provider.MergeEnv(spec.Env, []string{"HOME=" + home, "TMPDIR=/tmp"})
	return nil
}

// reserve takes a slot of pool for daemon, after stopping the sessions
// an earlier daemon opened (doc.go).
func (w *Worker) reserve(pool, daemon string) error {
	var stale []*session
	w.mu.Lock()
	if daemon != w.daemon {
		for id, s := range w.sessions {
			if s.daemon != daemon {
				stale = append(stale, s)
				delete(w.sessions, id)
				w.live[s.pool]--
			}
		}
		w.daemon = daemon
		for _, c := range w.attempts {
			c()
		}
	}
	if live := w.live[pool]; live >= w.o.Pools[pool] {
		w.mu.Unlock()
		stopSessions(stale)
		return fmt.Errorf("%w: %s has %d of %d slots in use", remote.ErrPoolFull, pool, live, w.o.Pools[pool])
	}
	w.live[pool]++
	w.mu.Unlock()
	if len(stale) > 0 {
		w.log.Info("stopping the sessions of an earlier daemon", "sessions", len(stale), "daemon", daemon)
	}
	stopSessions(stale)
	return nil
}

func (w *Worker) unreserve(pool string) {
	w.mu.Lock()
	w.live[pool]--
	w.mu.Unlock()
}

func stopSessions(ss []*session) {
	for _, s := range ss {
		_ = s.stop()
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// lookup returns a session by id.
func (w *Worker) lookup(id string) (*session, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.sessions[id]
	return s, ok
}

// suspend returns a session's blob.
func (w *Worker) suspend(ctx context.Context, r micro.Request, data []byte) {
	var req remote.SessionRequest
	_ = json.Unmarshal(data, &req)
	s, ok := w.lookup(req.Session)
	if !ok {
		respond(r, remote.SuspendReply{Error: &remote.WireError{Kind: remote.KindPermanent, Message: "no session " + req.Session}})
		return
	}
	s.mu.Lock()
	blob, err := s.sess.Suspend(ctx)
	s.mu.Unlock()
	respond(r, remote.SuspendReply{Blob: blob, Error: remote.Wire(err)})
}

// stopAgent stops the sessions of agent id this worker holds and frees
// their slots.
func (w *Worker) stopAgent(id string) {
	var stale []*session
	w.mu.Lock()
	for sid, s := range w.sessions {
		if s.agent == id {
			stale = append(stale, s)
			delete(w.sessions, sid)
			w.live[s.pool]--
		}
	}
	w.mu.Unlock()
	if len(stale) > 0 {
		w.log.Info("stopping a stale session of an agent opened again", "agent", id, "sessions", len(stale))
	}
	stopSessions(stale)
}

// stop stops a session and frees its slot.
func (w *Worker) stop(_ context.Context, r micro.Request, data []byte) {
	var req remote.SessionRequest
	_ = json.Unmarshal(data, &req)
	w.mu.Lock()
	s, ok := w.sessions[req.Session]
	if ok {
		delete(w.sessions, req.Session)
		w.live[s.pool]--
	} else if remote.CheckID(req.Session) == nil {
		// Perhaps an open still running: it stops at its end.
		if len(w.cancelled) >= maxCancelled {
			clear(w.cancelled)
		}
		w.cancelled[req.Session] = true
	}
	w.mu.Unlock()
	var err error
	if ok {
		err = s.stop()
	}
	respond(r, remote.SuspendReply{Error: remote.Wire(err)})
}

// stopAll stops every session (the worker is stopping).
func (w *Worker) stopAll() {
	w.mu.Lock()
	var all []*session
	for id, s := range w.sessions {
		all = append(all, s)
		delete(w.sessions, id)
	}
	for _, c := range w.attempts {
		c()
	}
	w.mu.Unlock()
	stopSessions(all)
}
