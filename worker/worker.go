package worker

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	o Options
	// requests is the request key this worker shares with its daemon.
	requests []byte
	boot     string
	started  int64
	log      hclog.Logger

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

	// copies are the agents' copies of their workspaces (workspace.go).
	copies copies

	// fwd is where each agent's stderr is sent; stderrQ queues it and
	// stderrDropped counts what a full queue dropped (stderr.go).
	fwdMu         sync.Mutex
	fwd           map[string]string
	stderrQ       chan stderrChunk
	stderrDropped atomic.Int64
}

// maxCancelled bounds the early cancels remembered.
const maxCancelled = 1024

// New checks o and returns a worker.
func New(o Options) (*Worker, error) {
	if err := remote.CheckID(o.ID); err != nil {
		return nil, err
	}
	if len(o.Key) != ed25519.PrivateKeySize || len(o.DaemonKey) != ed25519.PublicKeySize {
		return nil, errors.New("a worker needs its token, with its key and the daemon's (make one with `warren worker token " + o.ID + "` on the daemon's machine)")
	}
	requests, err := remote.WorkerRequestKey(o.Key, o.DaemonKey)
	if err != nil {
		return nil, fmt.Errorf("the worker's token: %w (make one again with `warren worker token %s` on the daemon's machine)", err, o.ID)
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
	w := &Worker{o: o, requests: requests, copies: copies{dir: filepath.Join(o.Dir, "workspaces")}, fwd: map[string]string{}, stderrQ: make(chan stderrChunk, stderrQueue), boot: inbox.NewID(), started: time.Now().UnixNano(), cancelled: map[string]bool{}, seen: map[string]bool{}, log: o.Logger,
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
	// No session is held yet: only the copies let go last are kept.
	w.copies.sweep(idleCopies, "", w.log)
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
			data, err := remote.CheckRequest(w.requests, w.o.ID, time.Now(), r.Data())
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
			// Say goodbye: the daemon loses this boot at once. Not to
			// servers that are gone: the stop would wait for them.
			if !w.o.Conn.IsConnected() {
				return
			}
			bye := w.registration(beat + 1)
			bye.Leaving = true
			body, _ := remote.Sign(w.o.Key, bye)
			_ = w.o.Conn.Publish(remote.BeatSubject, body)
			_ = w.o.Conn.FlushTimeout(remote.HeartbeatEvery)
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

func respond(r micro.Request, v any) {
	_ = r.RespondJSON(v)
}

// isClosing reports whether Run is stopping.
func (w *Worker) isClosing() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closing
}
