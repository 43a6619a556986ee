package worker

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/agentspec"
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/launch"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/sandbox"
	"github.com/warren-dev/warren/stderrlog"
	"github.com/warren-dev/warren/workspace"
)

// Options configure a Worker.
type Options struct {
	// ID names the worker (remote.CheckID).
	ID string
	// DaemonKey checks every request: only the daemon that issued the
	// worker's token commands it (remote.ParseToken).
	DaemonKey ed25519.PublicKey
	// Key signs the worker's beats (remote.ParseToken of the token
	// `warren worker token ID` made).
	Key  ed25519.PrivateKey
	Conn *nats.Conn
	// Pools are the provider entries served and their sizes.
	Pools  map[string]int
	Labels map[string]string
	// Lookup resolves a provider entry name (the worker's registry).
	Lookup func(name string) (provider.Provider, bool)
	// Config is the worker's config in force (its provider entries).
	Config func() config.Config
	// Env is the base of the agents' process environment (PythonPath:
	// the scripted helper library; no socket).
	Env agentspec.Env
	// Dir holds the directories of agents whose own is not on this
	// machine, and the copies of agents' workspaces (workspace.go).
	Dir string
	// Git runs git for the workspaces (the zero value: git from PATH).
	Git    workspace.Git
	Logger hclog.Logger
}

// Worker serves sessions for a daemon.
type Worker struct {
	o       Options
	boot    string
	started int64
	log     hclog.Logger

	mu       sync.Mutex
	sessions map[string]*session
	attempts map[string]context.CancelFunc
	live     map[string]int
	daemon   string // the daemon boot that opened the sessions
	// launches records the agents' processes (<dir>/procs) and keeps
	// their stderr (<dir>/agents/<id>/stderr.log); sandboxes checks bwrap.
	launches  *launch.Launches
	sandboxes *sandbox.Checker
	sockets   *sockets
	// turns is each agent's running turn (its socket's calls join it).
	turns map[string]*turn
	// cancelled holds attempts cancelled before their send arrived, and
	// sessions stopped before their open ended (bounded: maxCancelled).
	cancelled map[string]bool
	// seen holds the session and attempt ids of recent opens and sends (a
	// replayed request is refused), oldest first in seenOrder.
	seen      map[string]bool
	seenOrder []string
	refused   string // the last refusal logged
	closing   bool   // Run is stopping: no new request is started
	wg        sync.WaitGroup

	// copies holds a lock per agent for its copy of the workspace
	// (workspace.go).
	copies copyLocks

	// fwd is where each agent's stderr is sent; stderrQ queues it and
	// stderrDropped counts what a full queue dropped (stderr.go).
	fwdMu         sync.Mutex
	fwd           map[string]string
	stderrQ       chan stderrChunk
	stderrDropped atomic.Int64
}

// maxCancelled bounds the early cancels remembered.
const maxCancelled = 1024

// session is one provider session the worker holds.
type session struct {
	pool   string
	daemon string
	agent  string
	sess   provider.Session
	// release gives back the agent's socket (sockets.acquire).
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

// New checks o and returns a worker.
func New(o Options) (*Worker, error) {
	if err := remote.CheckID(o.ID); err != nil {
		return nil, err
	}
	if len(o.Key) != ed25519.PrivateKeySize || len(o.DaemonKey) != ed25519.PublicKeySize {
		return nil, errors.New("a worker needs its token, with its key and the daemon's (make one with `warren worker token " + o.ID + "` on the daemon's machine)")
	}
	if len(o.Pools) == 0 {
		return nil, errors.New("a worker needs at least one pool (--pools scripted=4)")
	}
	for name, n := range o.Pools {
		if n < 1 {
			return nil, fmt.Errorf("pool %q: size %d; give each pool at least 1 slot", name, n)
		}
		if _, ok := o.Lookup(name); !ok {
			return nil, fmt.Errorf("pool %q: no provider entry of that name on this worker (add it to the worker's config.json)", name)
		}
	}
	if o.Conn == nil || o.Conn.Opts.InboxPrefix != remote.InboxPrefix(o.ID) {
		// The daemon answers a worker's calls only on its own inbox, which
		// is all the servers let it subscribe to (remote.WorkerSubjects).
		return nil, fmt.Errorf("worker: connect with nats.CustomInboxPrefix(%q)", remote.InboxPrefix(o.ID))
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	agentDir := func(id string) string { return filepath.Join(o.Dir, "agents", id) }
	logs := stderrlog.New(faultfs.OS{}, agentDir, o.Logger)
	launches := launch.New(agentproc.Records{FS: faultfs.OS{}, Dir: filepath.Join(o.Dir, "procs")}, logs, o.Logger)
	w := &Worker{o: o, fwd: map[string]string{}, stderrQ: make(chan stderrChunk, stderrQueue), boot: inbox.NewID(), started: time.Now().UnixNano(), cancelled: map[string]bool{}, seen: map[string]bool{}, log: o.Logger,
		launches: launches, sandboxes: &sandbox.Checker{}, turns: map[string]*turn{}, sessions: map[string]*session{}, attempts: map[string]context.CancelFunc{},
		live: map[string]int{}}
	w.sockets = newSockets(w, o.Logger)
	logs.Copy = w.copyStderr
	return w, nil
}

// Boot is this process's boot id.
func (w *Worker) Boot() string { return w.boot }

// Run registers and serves until ctx ends, then stops every session.
func (w *Worker) Run(ctx context.Context) error {
	// Processes an earlier run of this worker left (a kill -9) go first.
	w.launches.KillLeftovers()
	js, err := jetstream.New(w.o.Conn)
	if err != nil {
		return err
	}
	svc, err := micro.AddService(w.o.Conn, micro.Config{Name: remote.ServiceName, Version: "1.0.0",
		Description: "warren worker " + w.o.ID})
	if err != nil {
		return fmt.Errorf("starting the worker service: %w", err)
	}
	defer func() { _ = svc.Stop() }()
	g := svc.AddGroup(remote.WorkerGroup(w.o.ID))
	// A ping is answered on the endpoint's own goroutine: at once.
	if err := g.AddEndpoint(remote.OpPing, micro.HandlerFunc(func(r micro.Request) {
		respond(r, remote.PingReply{Boot: w.boot})
	})); err != nil {
		return fmt.Errorf("starting the worker service's ping endpoint: %w", err)
	}
	for op, h := range map[string]func(context.Context, micro.Request, []byte){
		remote.OpOpen: w.open, remote.OpSend: w.send, remote.OpCancel: w.cancel, remote.OpSuspend: w.suspend, remote.OpStop: w.stop,
	} {
		if err := g.AddEndpoint(op, micro.HandlerFunc(func(r micro.Request) {
			data, err := remote.OpenSigned(w.o.DaemonKey, w.o.ID, time.Now(), r.Data())
			if err == nil {
				err = w.fresh(op, data)
			}
			if err != nil {
				w.refuse(op, err)
				if r.Reply() != "" {
					respond(r, remote.SendReply{Error: &remote.WireError{Kind: remote.KindRefused, Message: "worker " + w.o.ID + " refused the request: " + err.Error()}})
				}
				return
			}
			// Each request runs on its own goroutine: a turn takes
			// minutes, and the endpoint serves one message at a time.
			w.mu.Lock()
			if w.closing {
				w.mu.Unlock()
				respond(r, remote.SendReply{Error: &remote.WireError{Kind: remote.KindLost, Message: "worker " + w.o.ID + " is stopping"}})
				return
			}
			w.wg.Add(1)
			w.mu.Unlock()
			go func() { defer w.wg.Done(); h(ctx, r, data) }()
		})); err != nil {
			return fmt.Errorf("starting the worker service's %s endpoint: %w", op, err)
		}
	}
	stopStderr := make(chan struct{})
	defer close(stopStderr)
	go w.sendStderr(stopStderr)
	w.log.Info("worker serving", "worker", w.o.ID, "boot", w.boot, "pools", w.o.Pools, "labels", w.o.Labels)
	w.heartbeat(ctx, js)
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	_ = svc.Stop()
	w.stopAll()
	w.wg.Wait()
	w.stopAll() // what an open in progress made meanwhile
	w.sockets.closeAll()
	return nil
}

// heartbeat publishes the registration every HeartbeatEvery until ctx
// ends, on core NATS and into the bucket. The daemon makes the bucket
// once it has verified one of these beats (a worker may not make
// streams): until then, and while JetStream does not answer, the beats
// on core NATS are all it sends.
func (w *Worker) heartbeat(ctx context.Context, js jetstream.JetStream) {
	t := time.NewTicker(remote.HeartbeatEvery)
	defer t.Stop()
	var kv jetstream.KeyValue
	for beat := uint64(0); ; beat++ {
		body, _ := remote.Sign(w.o.Key, w.registration(beat))
		// Core NATS first: it tells the daemon this worker lives even
		// while the bucket's stream elects a leader.
		if err := w.o.Conn.Publish(remote.BeatSubject, body); err != nil && ctx.Err() == nil {
			w.log.Warn("heartbeat not published", "err", err)
		}
		pctx, cancel := context.WithTimeout(ctx, remote.HeartbeatEvery)
		if kv == nil {
			var err error
			if kv, err = js.KeyValue(pctx, remote.Bucket); err != nil && beat%30 == 29 {
				w.log.Warn("the workers' bucket is not bound yet (the daemon makes it once it has seen this worker's beats)", "err", err)
			}
		}
		if kv != nil {
			if _, err := kv.Put(pctx, w.o.ID, body); err != nil && ctx.Err() == nil {
				w.log.Warn("heartbeat not stored", "err", err)
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			// Say goodbye: the daemon loses this boot at once.
			bye := w.registration(beat + 1)
			bye.Leaving = true
			body, _ := remote.Sign(w.o.Key, bye)
			_ = w.o.Conn.Publish(remote.BeatSubject, body)
			_ = w.o.Conn.Flush()
			if kv != nil {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), remote.HeartbeatEvery)
				_ = kv.Delete(dctx, w.o.ID)
				cancel()
			}
			return
		case <-t.C:
		}
	}
}

func (w *Worker) registration(beat uint64) remote.Registration {
	w.mu.Lock()
	defer w.mu.Unlock()
	pools := make(map[string]remote.PoolState, len(w.o.Pools))
	for name, n := range w.o.Pools {
		pools[name] = remote.PoolState{Size: n, Live: w.live[name]}
	}
	return remote.Registration{Worker: w.o.ID, Boot: w.boot, Started: w.started, Pools: pools, Labels: maps.Clone(w.o.Labels), Beat: beat}
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
	if req.Spec.Workspace != nil {
		var err error
		if aw, err = w.openAway(ctx, spec.AgentID, req.Spec.Workspace); err != nil {
			w.unreserve(req.Provider)
			respond(r, remote.OpenReply{Error: &remote.WireError{Kind: remote.KindRefused, Message: err.Error()}})
			return
		}
		spec.Cwd = aw.ws.Path
	}
	if spec.Cwd == "" || !isDir(spec.Cwd) {
		spec.Cwd = filepath.Join(w.o.Dir, "agents", spec.AgentID)
		if err := os.MkdirAll(spec.Cwd, 0o700); err != nil {
			w.unreserve(req.Provider)
			respond(r, remote.OpenReply{Error: remote.Wire(err)})
			return
		}
	}
	sock, release, err := w.sockets.acquire(ctx, spec.AgentID)
	if err != nil {
		w.unreserve(req.Provider)
		respond(r, remote.OpenReply{Error: remote.Wire(err)})
		return
	}
	subject := remote.StderrSubject(req.Daemon, w.o.ID, req.Session)
	w.forward(spec.AgentID, subject)
	releaseSocket := release
	release = func() { w.unforward(spec.AgentID, subject); releaseSocket() }
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
	w.mu.Lock()
	w.attempts[req.Attempt] = cancel
	if w.cancelled[req.Attempt] {
		delete(w.cancelled, req.Attempt)
		cancel() // its cancel arrived first
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.attempts, req.Attempt)
		w.mu.Unlock()
	}()
	t := &turn{w: w, daemon: req.Daemon, attempt: req.Attempt, cancel: cancel}
	s.mu.Lock()
	resp, snapshot, err := w.runTurn(actx, s, t, &req)
	s.mu.Unlock()
	if serr := t.suspendedBy(); serr != nil {
		resp, snapshot, err = "", "", serr
	}
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
// after a turn that succeeded: snapshot).
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
	if err != nil || req.Workspace == nil || t.suspendedBy() != nil {
		return resp, "", err
	}
	if snapshot, err = s.away.give(ctx, req.Workspace); err != nil {
		// Not handed back, so not done: the turn runs again on a new lease,
		// from the daemon's worktree as it was.
		return "", "", provider.Transient(fmt.Errorf("handing the workspace back from worker %s: %w", w.o.ID, err), 0)
	}
	return resp, snapshot, nil
}

// maxSeen bounds the ids remembered against replays: more than a
// request window's opens and sends.
const maxSeen = 1 << 16

// fresh refuses an open or a send whose session or attempt id was seen
// (a replay within the request window); others pass.
func (w *Worker) fresh(op string, data []byte) error {
	if op != remote.OpOpen && op != remote.OpSend {
		return nil
	}
	var ids struct {
		Session string `json:"session"`
		Attempt string `json:"attempt"`
	}
	_ = json.Unmarshal(data, &ids)
	key := op + ":" + ids.Session + ":" + ids.Attempt
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[key] {
		return fmt.Errorf("%s %s%s was seen already (a replay)", op, ids.Session, ids.Attempt)
	}
	w.seen[key] = true
	w.seenOrder = append(w.seenOrder, key)
	if len(w.seenOrder) > maxSeen {
		delete(w.seen, w.seenOrder[0])
		w.seenOrder = w.seenOrder[1:]
	}
	return nil
}

// refuse logs a refused request (once per reason in a row).
func (w *Worker) refuse(op string, err error) {
	w.mu.Lock()
	again := w.refused == err.Error()
	w.refused = err.Error()
	w.mu.Unlock()
	if !again {
		w.log.Warn("refusing a request", "op", op, "err", err)
	}
}

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

func respond(r micro.Request, v any) {
	_ = r.RespondJSON(v)
}
