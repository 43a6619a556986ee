package remote

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/warren-dev/warren/provider"
)

// Directory is the daemon's view of its workers: the bucket watched, each
// worker's last registration and when it reached the daemon, the
// sessions the daemon placed on each, and the attempt router. Safe for
// concurrent use.
type Directory struct {
	nc     *nats.Conn
	log    hclog.Logger
	now    func() time.Time
	daemon string
	router *router
	stderr *stderrSink
	beats  *nats.Subscription

	keys func() (Keys, error)
	// verified is set by the first beat that verifies: the bucket is
	// made then (run).
	verified atomic.Bool

	mu      sync.Mutex
	workers map[string]*workerState
	// known caches the keys, read again (at most every keysReload) when
	// a beat does not verify; refused is the last reason logged per id.
	known  map[string]ed25519.PublicKey
	signer ed25519.PrivateKey // the daemon's key (Keys.Daemon)
	// shared caches the request key made with each worker's known key;
	// it is emptied when the keys are read again.
	shared  map[string][]byte
	loaded  time.Time
	refused map[string]string
	marks   map[string]*mark
	// changed is closed and replaced when a worker joins or is lost.
	changed chan struct{}
	// last is the worker that last held each agent's session.
	last   map[string]string
	cancel context.CancelFunc
	done   chan struct{}
}

// workerState is one worker as the daemon last saw it.
type workerState struct {
	reg  Registration
	seen time.Time
	// placed counts the daemon's sessions on this boot, by pool.
	placed map[string]int
	// lost is closed when this boot is gone (a new boot, or no put for
	// LiveFor).
	lost chan struct{}
}

// DirectoryOptions configure a Directory.
type DirectoryOptions struct {
	Conn *nats.Conn
	// Daemon is the daemon's boot id, sent with every open: a worker
	// stops the sessions an earlier daemon opened (doc.go).
	Daemon string
	// Keys reads the home's KeysFile: only a worker whose beats are
	// signed with its key gets sessions, and every request to a worker is
	// authenticated with the key the daemon's key and the worker's make.
	Keys   func() (Keys, error)
	Logger hclog.Logger
}

// NewDirectory subscribes the attempt router and the beats, and starts
// watching the bucket until Close. The bucket is bound in the background
// once a worker made it, retried while JetStream cannot serve yet (a
// cluster that is still forming); the beats on core NATS tell the
// workers meanwhile.
func NewDirectory(ctx context.Context, o DirectoryOptions) (*Directory, error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	js, err := jetstream.New(o.Conn)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	if o.Keys == nil {
		return nil, errors.New("workers: no keys: DirectoryOptions.Keys is required")
	}
	d := &Directory{keys: o.Keys, refused: map[string]string{}, nc: o.Conn, log: o.Logger, now: time.Now, daemon: o.Daemon, workers: map[string]*workerState{}, marks: map[string]*mark{}, last: map[string]string{},
		changed: make(chan struct{}), done: make(chan struct{})}
	d.router, err = newRouter(o.Conn, o.Daemon, o.Logger)
	if err != nil {
		return nil, err
	}
	if d.stderr, err = newStderrSink(o.Conn, o.Daemon); err != nil {
		d.router.close()
		return nil, err
	}
	d.beats, err = o.Conn.Subscribe(BeatSubject, func(m *nats.Msg) { d.put("", m.Data) })
	if err != nil {
		d.router.close()
		d.stderr.close()
		return nil, fmt.Errorf("workers: subscribing to %s: %w", BeatSubject, err)
	}
	// The subscriptions reach the server with the connection's next
	// flush: wait for it, so that they are in place when NewDirectory
	// returns (best effort: a connection being made again subscribes when
	// it is back).
	if err := o.Conn.FlushTimeout(5 * time.Second); err != nil {
		o.Logger.Debug("workers: the subscriptions are not confirmed yet", "err", err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.cancel = cancel
	go d.run(wctx, js)
	return d, nil
}

// Close stops watching and routing.
func (d *Directory) Close() {
	d.cancel()
	<-d.done
	_ = d.beats.Unsubscribe()
	d.router.close()
	d.stderr.close()
}

// bindRetry is the pause between two tries to bind the bucket.
const bindRetry = time.Second

// run binds the bucket and watches it, binding again if the watch ends,
// until ctx ends. The daemon makes the bucket, with its own settings,
// once a worker's beat has verified (a worker may not: a stream's
// settings are the request's body, which the servers' permissions cannot
// hold to anything), so a cluster without workers runs no stream for
// them. Until then, and while JetStream cannot serve, the beats on core
// NATS are all the directory knows.
func (d *Directory) run(ctx context.Context, js jetstream.JetStream) {
	defer close(d.done)
	var noted time.Time
	for ctx.Err() == nil {
		kv, err := js.KeyValue(ctx, Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) && d.verified.Load() {
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: Bucket, History: 1, TTL: BucketTTL})
			if errors.Is(err, jetstream.ErrBucketExists) {
				continue
			}
		}
		var w jetstream.KeyWatcher
		if err == nil {
			d.refuseRollups(ctx, js)
			w, err = kv.WatchAll(ctx)
		}
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrBucketNotFound) && time.Since(noted) > 10*bindRetry {
				d.log.Info("workers: waiting for JetStream to bind the bucket "+Bucket, "err", err)
				noted = time.Now()
			}
			select {
			case <-ctx.Done():
			case <-time.After(bindRetry): // JetStream has no event a client can wait for
			}
			continue
		}
		d.watch(ctx, w)
	}
}

// refuseRollups makes the bucket's stream refuse a rollup: a worker may
// put its own key, and no subject permission can refuse the header
// ("Nats-Rollup: all") that would make its put purge every other
// worker's key. The bucket is never purged otherwise. It runs at each
// bind; a failure is logged, and the beats on core NATS keep the workers
// listed meanwhile.
func (d *Directory) refuseRollups(ctx context.Context, js jetstream.JetStream) {
	st, err := js.Stream(ctx, "KV_"+Bucket)
	if err == nil {
		cfg := st.CachedInfo().Config
		if !cfg.AllowRollup {
			return
		}
		cfg.AllowRollup = false
		_, err = js.UpdateStream(ctx, cfg)
	}
	if err != nil && ctx.Err() == nil {
		d.log.Warn("workers: the bucket's stream still allows rollups (a worker could empty it)", "err", err)
	}
}

// watch applies the bucket's puts and sweeps the workers that went
// quiet, until ctx ends or the watch does.
func (d *Directory) watch(ctx context.Context, w jetstream.KeyWatcher) {
	defer func() { _ = w.Stop() }()
	sweep := time.NewTicker(LiveFor / 10)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil && e.Operation() == jetstream.KeyValuePut {
				d.put(e.Key(), e.Value())
			}
		case <-sweep.C:
			d.sweep()
		}
	}
}

// put records a registration (a bad one is logged and ignored).
func (d *Directory) put(key string, value []byte) {
	var sg Signed
	if err := json.Unmarshal(value, &sg); err != nil || len(sg.Reg) == 0 {
		d.refuse(key, "its registration is not a signed beat")
		return
	}
	var reg Registration
	if err := json.Unmarshal(sg.Reg, &reg); err != nil {
		d.refuse(key, "its registration is not JSON")
		return
	}
	if key == "" {
		key = reg.Worker
	}
	if err := reg.Check(key); err != nil {
		d.refuse(key, err.Error())
		return
	}
	if why := d.verify(key, sg); why != "" {
		d.refuse(key, why)
		return
	}
	d.verified.Store(true)
	d.mu.Lock()
	defer d.mu.Unlock()
	// A registration reaches the daemon twice (core NATS and the
	// bucket's watch), in either order, and the bucket may still hold an
	// earlier boot's: a boot started before the one in force is stale,
	// only a beat newer than any seen of a boot counts, and a boot that
	// left or was replaced never comes back.
	m := d.marks[key]
	if m == nil {
		if len(d.marks) >= maxMarks {
			clear(d.marks) // forged ids cannot grow it without bound
		}
		m = &mark{dead: map[string]bool{}}
		d.marks[key] = m
	}
	switch {
	case m.dead[reg.Boot]:
		return
	case m.boot != "" && reg.Boot == m.boot && reg.Beat <= m.beat:
		return
	case m.boot != "" && reg.Boot != m.boot && reg.Started <= m.started:
		m.bury(reg.Boot) // an earlier boot's late beat
		return
	}
	ws := d.workers[key]
	if reg.Boot != m.boot {
		if m.boot != "" {
			m.bury(m.boot)
		}
		m.boot, m.started = reg.Boot, reg.Started
		if ws != nil {
			d.loseLocked(key, ws, "a new boot")
			ws = nil
		}
	}
	m.beat = reg.Beat
	if reg.Leaving {
		m.bury(reg.Boot)
		if ws != nil {
			d.loseLocked(key, ws, "it stopped")
		}
		return
	}
	if ws == nil {
		ws = &workerState{placed: map[string]int{}, lost: make(chan struct{})}
		d.workers[key] = ws
		d.changedLocked()
		d.log.Info("worker joined", "worker", key, "boot", reg.Boot, "pools", reg.Pools, "labels", reg.Labels)
	}
	ws.reg, ws.seen = reg, d.now()
}

// maxMarks bounds the worker ids the directory remembers.
const maxMarks = 4096

// keysReload bounds how often the keys file is read again.
const keysReload = time.Second

// verify checks a beat's signature with worker id's key: "" when it
// holds, else why not.
func (d *Directory) verify(id string, sg Signed) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	ok := func() bool {
		k, has := d.known[id]
		return has && ed25519.Verify(k, sg.Reg, sg.Sig)
	}
	if ok() {
		return ""
	}
	if d.now().Sub(d.loaded) >= keysReload {
		keys, err := d.keys()
		d.loaded = d.now()
		if err != nil {
			return "the keys file cannot be read: " + err.Error()
		}
		d.known, d.signer, d.shared = keys.Workers, keys.Daemon, nil
		if ok() {
			return ""
		}
	}
	if _, has := d.known[id]; !has {
		return "no token was issued for it: run `warren worker token " + id + "` on the daemon's machine and start the worker with it"
	}
	return "its beat is not signed with the key of its token (a stale token? issue it again)"
}

// refuse logs, once per reason, a worker whose beats are not used.
func (d *Directory) refuse(id, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.refused) >= maxMarks {
		clear(d.refused)
	}
	if d.refused[id] != why {
		d.refused[id] = why
		d.log.Warn("ignoring a worker", "worker", id, "why", why)
	}
}

// mark is what the directory remembers of a worker id's boots.
type mark struct {
	boot    string // the latest boot seen
	started int64  // its start (Registration.Started)
	beat    uint64 // its latest beat
	dead    map[string]bool
	order   []string // dead boots, oldest first (at most maxDead)
}

// maxDead bounds the dead boots remembered per worker id.
const maxDead = 16

func (m *mark) bury(boot string) {
	if m.dead[boot] {
		return
	}
	m.dead[boot] = true
	m.order = append(m.order, boot)
	if len(m.order) > maxDead {
		delete(m.dead, m.order[0])
		m.order = m.order[1:]
	}
}

// sweep loses the workers whose last put is older than LiveFor.
func (d *Directory) sweep() {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	for id, ws := range d.workers {
		if now.Sub(ws.seen) > LiveFor {
			d.loseLocked(id, ws, fmt.Sprintf("no heartbeat for %s", now.Sub(ws.seen).Round(time.Millisecond)))
		}
	}
}

func (d *Directory) loseLocked(id string, ws *workerState, why string) {
	close(ws.lost)
	delete(d.workers, id)
	d.changedLocked()
	d.log.Warn("worker lost", "worker", id, "boot", ws.reg.Boot, "why", why, "sessions", ws.placed)
}

func (d *Directory) changedLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// Wait waits until ok holds of the live workers, or ctx ends.
func (d *Directory) Wait(ctx context.Context, ok func([]Worker) bool) error {
	for {
		d.mu.Lock()
		ch := d.changed
		d.mu.Unlock()
		if ok(d.Workers()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Worker is one live worker as Workers lists it.
type Worker struct {
	ID     string
	Boot   string
	Pools  map[string]PoolState
	Labels map[string]string
	// Placed counts the daemon's sessions on it, by pool.
	Placed map[string]int
}

// Workers lists the live workers, by id.
func (d *Directory) Workers() []Worker {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Worker, 0, len(d.workers))
	for id, ws := range d.workers {
		placed := make(map[string]int, len(ws.placed))
		for p, n := range ws.placed {
			placed[p] = n
		}
		out = append(out, Worker{ID: id, Boot: ws.reg.Boot, Pools: ws.reg.Pools, Labels: ws.reg.Labels, Placed: placed})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Dropped counts the worker messages the router dropped: traffic of
// attempts the daemon gave up on, or never made.
func (d *Directory) Dropped() int64 { return d.router.dropped.Load() }

// slot is a reserved place for one session on a worker's pool.
type slot struct {
	worker, boot, pool string
	lost               <-chan struct{}
	// state is the worker as placed on: a boot lost and back (a healed
	// partition) is a new state, whose counts the old slots leave alone.
	state *workerState
}

// place reserves a slot of pool for agent on a live worker whose labels
// include labels, preferring the worker that last held the agent's
// session, then the one with the most free slots; skip lists workers
// already tried. ok is false when none has a free slot.
func (d *Directory) place(pool, agent string, labels map[string]string, skip map[string]bool) (slot, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	best, bestFree := "", 0
	for id, ws := range d.workers {
		p, ok := ws.reg.Pools[pool]
		if !ok || skip[id] || !hasLabels(ws.reg.Labels, labels) {
			continue
		}
		free := p.Size - ws.placed[pool]
		if free <= 0 {
			continue
		}
		if id == d.last[agent] {
			best = id
			break
		}
		if free > bestFree || (free == bestFree && id < best) {
			best, bestFree = id, free
		}
	}
	if best == "" {
		return slot{}, false
	}
	ws := d.workers[best]
	ws.placed[pool]++
	d.last[agent] = best
	return slot{worker: best, boot: ws.reg.Boot, pool: pool, lost: ws.lost, state: ws}, true
}

// serves reports whether a live worker has pool.
func (d *Directory) serves(pool string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ws := range d.workers {
		if _, ok := ws.reg.Pools[pool]; ok {
			return true
		}
	}
	return false
}

// release gives a slot back (to the state it was taken from).
func (d *Directory) release(s slot) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.state != nil && s.state.placed[s.pool] > 0 {
		s.state.placed[s.pool]--
	}
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Wrap returns the provider of entry name: its sessions go to a worker
// with a free slot in pool name (and labels), else to local, the
// daemon's own provider.
func (d *Directory) Wrap(name string, local provider.Provider, labels map[string]string) provider.Provider {
	return &Provider{d: d, name: name, local: local, labels: labels}
}

// request sends v to a worker's op and decodes the answer into out. It
// ends with an error wrapping errLost as soon as the slot's worker is
// lost: a worker killed after the request reached it never answers.
func (d *Directory) request(ctx context.Context, s slot, op string, v, out any) error {
	body, err := d.authed(s.worker, v)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		probe := time.NewTicker(ProbeEvery)
		defer probe.Stop()
		var probing atomic.Bool // one probe at a time; none holds up the loss
		for {
			select {
			case <-s.lost:
				cancel(fmt.Errorf("%w: %s", errLost, s.worker))
				return
			case <-rctx.Done():
				return
			case <-probe.C:
				if !probing.CompareAndSwap(false, true) {
					continue
				}
				go func() {
					defer probing.Store(false)
					if why := d.probe(rctx, s); why != "" {
						d.lose(s, why)
					}
				}()
			}
		}
	}()
	msg, err := d.nc.RequestWithContext(rctx, WorkerSubject(s.worker, op), body)
	if err != nil {
		if cause := context.Cause(rctx); errors.Is(cause, errLost) {
			return fmt.Errorf("%s: %w", op, cause)
		}
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("%s: %w: %s does not answer (%v)", op, errLost, s.worker, err)
		}
		return err
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("worker %s answered %s with bad JSON: %w", s.worker, op, err)
	}
	return nil
}

// ProbeEvery is how often a pending request probes its worker: a
// worker killed after the request reached it never answers, but its
// subscriptions are gone the moment its connection closes.
const ProbeEvery = 250 * time.Millisecond

// probe pings the slot's worker: a reason it is lost ("" when it
// answered as the same boot, or did not answer in time: a frozen worker
// is the heartbeats' to judge).
func (d *Directory) probe(ctx context.Context, s slot) string {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	m, err := d.nc.RequestWithContext(pctx, WorkerSubject(s.worker, OpPing), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return "no responders (its connection closed)"
	}
	var rep PingReply
	if err == nil && json.Unmarshal(m.Data, &rep) == nil && rep.Boot != s.boot {
		return "another boot answers"
	}
	return ""
}

// lose loses the slot's worker state, if it is still the live one. The
// boot is not buried: a worker only reconnecting (its server restarted)
// comes back with its next beat, with none of its sessions.
func (d *Directory) lose(s slot, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ws := d.workers[s.worker]; ws != nil && ws == s.state {
		d.loseLocked(s.worker, ws, why)
	}
}

// authed is v as a request to worker, authenticated with the request
// key the daemon shares with it.
func (d *Directory) authed(worker string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	key, err := d.requestKey(worker)
	if err != nil {
		return nil, err
	}
	return AuthRequest(key, worker, d.now(), body)
}

// requestKey is the request key the daemon shares with worker, made
// once per reading of the keys.
func (d *Directory) requestKey(worker string) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if key, ok := d.shared[worker]; ok {
		return key, nil
	}
	if d.signer == nil {
		return nil, errors.New("the daemon has no key to make requests with (issue a worker token first)")
	}
	pub, ok := d.known[worker]
	if !ok {
		return nil, fmt.Errorf("worker %s has no key in %s (issue it a token with `warren worker token %s`)", worker, KeysFile, worker)
	}
	key, err := DaemonRequestKey(d.signer, pub)
	if err != nil {
		return nil, fmt.Errorf("worker %s's key: %w", worker, err)
	}
	if d.shared == nil {
		d.shared = map[string][]byte{}
	}
	d.shared[worker] = key
	return key, nil
}

// stopTimeout bounds the stop of a session on its worker.
const stopTimeout = 5 * time.Second

// stopRemote asks the slot's worker to stop session id.
func (d *Directory) stopRemote(s slot, id string) error {
	// provider.Session.Stop takes no context: the stop is bounded here.
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	body, err := d.authed(s.worker, SessionRequest{Session: id})
	if err != nil {
		return err
	}
	m, err := d.nc.RequestWithContext(ctx, WorkerSubject(s.worker, OpStop), body)
	if err != nil {
		return fmt.Errorf("stopping the session on worker %s: %w", s.worker, err)
	}
	var rep SuspendReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return fmt.Errorf("worker %s answered stop with bad JSON: %w", s.worker, err)
	}
	return rep.Error.Err()
}

// errLost is wrapped by the errors of a session whose worker is gone.
var errLost = errors.New("worker lost")
