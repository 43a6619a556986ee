package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
	"github.com/warren-dev/warren/store"
)

// front answers the socket for the daemon's whole life (SPEC 9). While a
// Core recovers, requests get code 6 ("recovering"); while it stands by
// for a cluster's USER inbox, daemon.status answers with role "standby"
// and the active node, daemon.shutdown stops the daemon, and every other
// request gets code 6 naming the active node; once the Core serves,
// every request goes to its handler. The socket is listened on before
// recovery, so that a standby can be seen and stopped with the CLI.
type front struct {
	home, version string
	pid           int
	started       time.Time
	node          string      // the cluster node's name ("" on the local store)
	view          clusterView // nil on the local store
	// workers lists the remote workers (nil on the local store).
	workers func() []map[string]any
	stop    func() // ends the daemon (daemon.shutdown before a Core serves)

	core atomic.Pointer[engine.Core] // the Core recovering or standing by
	h    atomic.Pointer[handler]     // its handler once it serves
	// inflight counts the requests handed to h, and gen is their
	// context's end: a Core is closed only after they return (stopServing).
	inflight inflight
	genMu    sync.Mutex
	gen      context.Context
	genStop  context.CancelFunc
	// configHash is the hash of the provider entries in force (nodeInfo).
	configHash atomic.Pointer[string]
}

// nodeInfo is what a daemon records of itself in the cluster
// (store/jetstream's nodes bucket): the hash of its provider entries, so
// that daemon.status shows whether the nodes run agents alike.
type nodeInfo struct {
	ConfigHash string    `json:"config_hash"`
	Updated    time.Time `json:"updated"`
}

// configChanged records the hash of cfg's provider entries, here and in
// the cluster (a failure is logged: the status then shows the old hash).
func (f *front) configChanged(ctx context.Context, cfg config.Config, logger hclog.Logger) {
	b, _ := json.Marshal(cfg.Providers) // map keys sorted: the same entries hash alike
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:6])
	f.configHash.Store(&h)
	if f.view == nil {
		return
	}
	info, _ := json.Marshal(nodeInfo{ConfigHash: h, Updated: time.Now().UTC()})
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	if err := f.view.PutNode(ctx, f.node, info); err != nil {
		logger.Warn("recording this node's config hash in the cluster", "err", err)
	}
}

// clusterView is what daemon.status reads of a cluster store
// (store/jetstream): who holds a lease, the servers of the log, and what
// each node recorded of itself.
type clusterView interface {
	Holder(ctx context.Context, id string) (node string, released bool, err error)
	Peers(ctx context.Context) ([]string, error)
	PutNode(ctx context.Context, node string, info []byte) error
	Nodes(ctx context.Context) (map[string][]byte, error)
}

func newFront(home, version string, b *booter, stop func()) *front {
	f := &front{home: home, version: version, pid: os.Getpid(), started: time.Now(), node: b.node, stop: stop, workers: b.workers}
	if v, ok := b.st.(clusterView); ok && b.node != "" {
		f.view = v
	}
	return f
}

// recovering routes requests to the front itself while c recovers or
// stands by.
func (f *front) recovering(c *engine.Core) {
	f.h.Store(nil)
	f.core.Store(c)
}

// serving hands every request to h.
func (f *front) serving(h *handler) {
	f.genMu.Lock()
	f.gen, f.genStop = context.WithCancel(context.Background())
	f.genMu.Unlock()
	f.h.Store(h)
}

// stopServing takes the socket back from the serving handler: new
// requests get code 6, those in flight are cancelled, and it returns once
// they have returned (or after wait), so that the Core can be closed.
func (f *front) stopServing(wait time.Duration) {
	f.recovering(nil)
	f.genMu.Lock()
	if f.genStop != nil {
		f.genStop()
	}
	f.genMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	f.inflight.wait(ctx)
}

// Handle answers a request (server.Handler).
func (f *front) Handle(ctx context.Context, req *protocol.Request, out server.Stream) (any, error) {
	f.inflight.add() // before h is read: stopServing waits for what it finds
	if h := f.h.Load(); h != nil {
		defer f.inflight.done()
		f.genMu.Lock()
		gen := f.gen
		f.genMu.Unlock()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(gen, cancel)()
		return h.Handle(ctx, req, out)
	}
	f.inflight.done()
	c := f.core.Load()
	standby := c != nil && c.StandingBy()
	switch req.Method {
	case "daemon.shutdown":
		h := &handler{home: f.home, pid: f.pid, shutdown: f.stop}
		res, err := h.shutdownM(ctx, req.Params, out)
		if err != nil {
			return nil, toRPCError(err)
		}
		return res, nil
	case "daemon.status":
		if standby {
			return f.standbyStatus(ctx, c), nil
		}
	}
	if standby {
		active := f.activeNode(ctx)
		if active == "" {
			active = "another node"
		} else {
			active = "node " + active
		}
		return nil, protocol.Errorf(protocol.CodeUnavailable,
			"this daemon (node %s) stands by: %s runs this cluster's agents; send this to that node's daemon, or wait: this one takes over if that one stops", f.node, active)
	}
	return nil, protocol.Errorf(protocol.CodeUnavailable, "the daemon is recovering its agents (or stopping); try again in a moment")
}

// standbyStatus is daemon.status of a daemon standing by.
func (f *front) standbyStatus(ctx context.Context, c *engine.Core) map[string]any {
	return map[string]any{"pid": f.pid, "boot_id": c.BootID(), "version": f.version, "home": f.home,
		"uptime_s": int64(time.Since(f.started).Seconds()), "agents": 0, "pools": map[string]any{},
		"cluster": f.cluster(ctx, "standby")}
}

// clusterTimeout bounds daemon.status's reads of the cluster.
const clusterTimeout = 2 * time.Second

// cluster is daemon.status's cluster block (SPEC 8.1): this node, its
// role, the servers holding the log stream, and the node that holds the
// USER inbox (the active one). nil on the local store.
func (f *front) cluster(ctx context.Context, role string) map[string]any {
	if f.view == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	peers, err := f.view.Peers(ctx)
	block := map[string]any{"node": f.node, "role": role, "peers": nonNilStrings(peers), "active_node": f.activeNodeCtx(ctx)}
	if err != nil {
		block["error"] = err.Error()
	}
	if f.workers != nil && role == "active" {
		block["workers"] = f.workers()
	}
	if h := f.configHash.Load(); h != nil {
		block["config_hash"] = *h
		block["config_differs"] = f.differing(ctx, *h)
	}
	return block
}

// differing names the other nodes whose provider entries hash otherwise.
func (f *front) differing(ctx context.Context, mine string) []string {
	nodes, err := f.view.Nodes(ctx)
	out := []string{}
	if err != nil {
		return out
	}
	for name, b := range nodes {
		var ni nodeInfo
		if name != f.node && json.Unmarshal(b, &ni) == nil && ni.ConfigHash != mine {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// activeNode names the node holding the USER inbox ("" when unknown).
func (f *front) activeNode(ctx context.Context) string {
	if f.view == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	return f.activeNodeCtx(ctx)
}

func (f *front) activeNodeCtx(ctx context.Context) string {
	n, _, err := f.view.Holder(ctx, store.UserID)
	if err != nil {
		return ""
	}
	return n
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// inflight counts requests in flight; wait returns when there are none.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

func (i *inflight) add() {
	i.mu.Lock()
	if i.n == 0 {
		i.idle = make(chan struct{})
	}
	i.n++
	i.mu.Unlock()
}

func (i *inflight) done() {
	i.mu.Lock()
	i.n--
	if i.n == 0 {
		close(i.idle)
	}
	i.mu.Unlock()
}

// wait returns when no request is in flight, or when ctx ends.
func (i *inflight) wait(ctx context.Context) {
	i.mu.Lock()
	if i.n == 0 {
		i.mu.Unlock()
		return
	}
	idle := i.idle
	i.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}
