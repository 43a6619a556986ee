package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/homedir"
	"github.com/warren-dev/warren/registry"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/notify"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/server"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

// Options configures a daemon process.
type Options struct {
	Home     string
	Logger   hclog.Logger
	LogLevel string
	// MaxSlots, when > 0, sets the size of the "default" pool.
	MaxSlots int
	// HTTP, when set, is the web console's listen address (--http), over
	// config.json's http.listen.
	HTTP    string
	Version string
	// Providers builds the provider registry once the config is loaded
	// (required; the binary passes builtins.Providers). The HTTP and acp
	// entries of config.json are served besides it.
	Providers func(registry.Env) (map[string]provider.Provider, error)
	// DefaultProvider serves an agent.create that names none (the binary
	// passes builtins.DefaultProvider); without it such a create is
	// refused.
	DefaultProvider string
	// Ready, when set, is called once the socket answers.
	Ready func(socketPath string)
	// SweepInterval is how often overdue waits are expired (default 30s).
	SweepInterval time.Duration
	// Cluster puts the logs on NATS JetStream (zero: the local home).
	Cluster ClusterOptions
}

// DefaultMemoryLimit is the soft memory limit the warren binary gives the
// Go runtime (runtime/debug.SetMemoryLimit) unless GOMEMLIMIT is set: the
// garbage collector works harder as the daemon's memory nears it, instead
// of letting garbage grow to the size of the live heap. It is soft: a
// larger live heap still fits, at the cost of more collection, and Run
// warns when recovery leaves the heap near it.
const DefaultMemoryLimit = 192 << 20

// ErrAlreadyRunning: another daemon holds the home's lock.
var ErrAlreadyRunning = errors.New("already running")

// Run runs a daemon until ctx is done or daemon.shutdown is called: the
// home's checks (homedir.Prepare), lock, the socket path's check, pid file,
// the store, the socket (replacing a stale one; front.go answers it while
// the Core recovers or stands by), then recovery and service. On a cluster
// a daemon whose USER lease is lost to another daemon stops serving and
// stands by again, with a new Core, until it can claim the inbox back.
func Run(ctx context.Context, opts Options) error {
	logger := opts.Logger
	if logger == nil {
		logger = hclog.New(&hclog.LoggerOptions{Name: "warren", Level: hclog.LevelFromString(opts.LogLevel), Output: os.Stderr})
	}
	home, err := filepath.Abs(opts.Home)
	if err != nil {
		return fmt.Errorf("home %q: %w", opts.Home, err)
	}
	release, err := claimHome(home)
	if err != nil {
		return err
	}
	defer release()
	fsys := faultfs.OS{}
	cfgPath := filepath.Join(home, "config.json")
	cfgState := &configState{}
	cfg, err := config.Load(fsys, cfgPath)
	if err != nil {
		logger.Error("config.json is invalid; using the defaults until it is fixed", "path", cfgPath, "err", err)
		cfgState.set(fmt.Errorf("%w; the defaults are in force until the file is fixed", err))
		cfg = config.Default()
	}
	cfg = withFlags(cfg, opts)
	if err := cfg.HTTP.Check(); err != nil {
		return err // a console that would listen unprotected: refused at the start
	}
	b, err := newBooter(ctx, opts, fsys, home, cfg, logger)
	if err != nil {
		return err
	}
	defer b.closeStore()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	f := newFront(home, opts.Version, b, stop)
	f.configChanged(ctx, cfg, logger)
	sock := homedir.SocketPath(home)
	// daemon.status and daemon.shutdown stay reachable when every
	// connection slot is taken (server.Config.ControlMethods).
	srv := server.New(server.Config{SocketPath: sock, StreamingMethods: streamingMethods,
		ControlMethods: map[string]bool{"daemon.status": true, "daemon.shutdown": true}}, f, logger.Named("server"))
	if err := srv.Listen(); err != nil {
		return err
	}
	// The server outlives runCtx by the drain: requests in flight go on
	// while running turns finish.
	srvCtx, srvStop := context.WithCancel(context.WithoutCancel(ctx))
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(srvCtx) }()
	defer func() {
		srvStop()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			logger.Warn("closing the socket", "err", err)
		}
		_ = os.Remove(sock)
		logger.Info("stopped")
	}()
	served := false
	for wait := time.Second; ; {
		core, err := b.recover(runCtx, f)
		if err != nil {
			if runCtx.Err() != nil && core == nil {
				return nil // stopped while standing by
			}
			if served && errors.Is(err, store.ErrUnavailable) {
				// Standing by again after losing the USER inbox, with a
				// cluster that does not answer yet: try again.
				logger.Warn("recovery could not reach the cluster; standing by again", "err", err, "retry_in", wait)
				select {
				case <-runCtx.Done():
					return nil
				case <-time.After(wait): // the cluster gives no signal when it answers again
				}
				wait = min(2*wait, 30*time.Second)
				continue
			}
			return err
		}
		served, wait = true, time.Second
		err = serve(runCtx, opts, core, home, cfgPath, cfgState, serveExtras{notifier: newNotifier(fsys, home, cfg, core, logger), web: cfg.HTTP,
			front: f, serveErr: serveErr, srvStop: srvStop, srvShutdown: srv.Shutdown}, logger)
		b.closeCore()
		if !errors.Is(err, errStandBy) {
			return err
		}
	}
}

// claimHome checks the home and the socket path, takes the home's lock and
// writes the pid file; release undoes the last two.
func claimHome(home string) (release func(), err error) {
	sock := homedir.SocketPath(home)
	if err := protocol.CheckSocketPath(sock); err != nil {
		return nil, fmt.Errorf("%w: choose a shorter --home", err)
	}
	if err := homedir.Prepare(home); err != nil {
		return nil, err
	}
	lock, err := acquireLock(home)
	if err != nil {
		return nil, err
	}
	// A stale socket is replaced by the server's Listen; anything else at
	// the path is refused now, before recovery, and never removed.
	if err := homedir.CheckSocketFile(sock); err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	if err := atomicfile.Write(faultfs.OS{}, homedir.PidPath(home), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		_ = lock.Unlock()
		return nil, fmt.Errorf("writing the pid file: %w", err)
	}
	return func() {
		_ = os.Remove(homedir.PidPath(home))
		_ = lock.Unlock()
	}, nil
}

// booter makes the daemon's Cores: the provider registry and the store
// are built once; a Core, with its agent sockets, for each time the
// daemon serves (once, unless a cluster's USER inbox is lost and claimed
// back).
type booter struct {
	opts    Options
	fsys    faultfs.FS
	home    string
	cfg     config.Config
	logger  hclog.Logger
	provs   map[string]provider.Provider
	pyDir   string
	st      store.Store
	closeSt func()
	place   func(name string, local provider.Provider, labels map[string]string) provider.Provider
	workers func() []map[string]any
	maxOpen int
	socks   *agentSockets
	node    string // the cluster node's name ("" on the local store)
}

// newBooter builds the provider registry and opens the store.
func newBooter(ctx context.Context, opts Options, fsys faultfs.FS, home string, cfg config.Config, logger hclog.Logger) (*booter, error) {
	if opts.Providers == nil {
		return nil, errors.New("daemon.Options.Providers is nil: pass a provider registry (builtins.Providers)")
	}
	// Scripted agents import warren_script (and substrat_script) from here.
	// Only the last component is created: a symbolic link there is not
	// followed, and installing the helpers refuses it (scripted.WriteHelpers).
	pyDir := filepath.Join(home, "python")
	if err := os.Mkdir(pyDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("creating %s: %w", pyDir, err)
	}
	provs, err := opts.Providers(registry.Env{Config: cfg, Logger: logger, PythonDir: pyDir})
	if err != nil {
		return nil, err
	}
	b := &booter{opts: opts, fsys: fsys, home: home, cfg: cfg, logger: logger, provs: provs, pyDir: pyDir, maxOpen: fileLimit(logger)}
	parts, err := openStore(ctx, opts, fsys, home, logger, inbox.NewID(), b.maxOpen)
	if err != nil {
		return nil, err
	}
	b.st, b.closeSt, b.place, b.workers = parts.st, parts.close, parts.place, parts.workers
	if opts.Cluster.enabled() {
		b.node = nodeName(opts.Cluster, home)
	}
	return b, nil
}

// recover makes a Core on the store and recovers the agents into it; f
// answers the socket meanwhile (recovering, or standing by). A Core is
// returned with the error when recovery failed after it was made.
func (b *booter) recover(ctx context.Context, f *front) (*engine.Core, error) {
	socks := newAgentSockets(context.WithoutCancel(ctx), b.home, b.logger)
	core, err := engine.NewCore(context.WithoutCancel(ctx), engine.CoreOptions{FS: b.fsys, Home: b.home, Providers: b.provs, Place: b.place, Config: b.cfg,
		Logger: b.logger, SocketPath: homedir.SocketPath(b.home), PythonPath: b.pyDir, DefaultProvider: b.opts.DefaultProvider, Store: b.st, BootID: inbox.NewID(),
		CheckpointEvery: config.DefaultCheckpointEvery, SessionSaveDelay: config.DefaultSessionSaveDelay,
		MaxOpenLogs: b.maxOpen, TakeoverEvery: config.DefaultTakeoverEvery, AgentSocket: socks.acquire})
	if err != nil {
		socks.closeAll()
		return nil, err
	}
	socks.setCore(core)
	b.socks = socks
	f.recovering(core)
	b.logger.Info("recovering", "home", b.home, "boot_id", core.BootID())
	start := time.Now()
	// A daemon standing by for a cluster's USER inbox (engine/takeover.go) stops
	// waiting when asked to stop.
	stopWaiting := context.AfterFunc(ctx, core.StopWaiting)
	rep, err := core.Recover(ctx)
	stopWaiting()
	if err != nil {
		_ = core.Close(context.Background())
		b.closeCore()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return core, fmt.Errorf("recovery: %w", err)
	}
	b.logger.Info("recovered", "agents", rep.Agents, "interrupted", rep.Interrupted, "corrupt", rep.Corrupt, "quarantined", rep.Quarantined,
		"pending", rep.Pending, "from_checkpoints", rep.Resumed, "took", time.Since(start))
	warnNearMemoryLimit(b.logger)
	return core, nil
}

// closeCore closes the agent sockets of the Core that served last (the
// Core itself is closed by serve).
func (b *booter) closeCore() {
	if b.socks != nil {
		b.socks.closeAll()
		b.socks = nil
	}
}

// closeStore closes the store, once every Core is closed.
func (b *booter) closeStore() {
	b.closeCore()
	b.closeSt()
}

// warnNearMemoryLimit says so when the recovered state already takes most
// of the soft memory limit.
func warnNearMemoryLimit(logger hclog.Logger) {
	if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > uint64(limit)/4*3 {
			logger.Warn("the state of this home is near the daemon's soft memory limit; garbage collection will cost more CPU (set GOMEMLIMIT higher)",
				"heap_bytes", ms.HeapAlloc, "limit_bytes", limit)
		}
	}
}

// serveExtras are what serve works with beside the Core: the operator's
// surfaces (SPEC 14), and the socket Run listens on.
type serveExtras struct {
	notifier    *notify.Notifier // nil: no sinks
	web         config.HTTP
	front       *front
	serveErr    <-chan error                // the socket server's end
	srvStop     func()                      // cancels the socket's requests (after a drain)
	srvShutdown func(context.Context) error // closes the socket, waiting for its requests
}

// errStandBy ends serve when the Core lost the USER inbox to another
// daemon of the cluster: Run stands by again.
var errStandBy = errors.New("the USER inbox was claimed by another daemon; standing by")

// serve hands the socket to core's handler and serves until ctx is done,
// daemon.shutdown is called, the server fails or the USER lease is lost
// (errStandBy), watching config.json meanwhile; then it closes the Core.
func serve(ctx context.Context, opts Options, core *engine.Core, home, cfgPath string, cfgState *configState, ex serveExtras, logger hclog.Logger) error {
	n := ex.notifier
	sock := homedir.SocketPath(home)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	f := ex.front
	h := &handler{c: core, home: home, started: f.started, version: opts.Version, pid: os.Getpid(), shutdown: stop, cfg: cfgState, notifier: n, front: f}
	stopWeb, err := startWeb(h, home, ex.web, logger)
	if err != nil {
		_ = core.Close(context.Background())
		return fmt.Errorf("the web console: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchConfig(runCtx, opts, core, cfgPath, cfgState, logger, func(c config.Config) { f.configChanged(runCtx, c, logger) })
	}()
	interval := opts.SweepInterval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	core.SweepEvery(interval)
	notified := make(chan struct{})
	go func() {
		defer close(notified)
		if n != nil {
			if err := n.Run(runCtx); err != nil {
				logger.Error("notifications stopped", "err", err)
			}
		}
	}()
	f.serving(h)
	logger.Info("serving", "socket", sock, "pid", os.Getpid())
	if opts.Ready != nil {
		opts.Ready(sock)
	}
	var runErr error
	select {
	case <-runCtx.Done():
	case runErr = <-ex.serveErr:
		stop()
	case <-core.UserLost():
		logger.Warn("another daemon claimed this cluster's USER inbox: this daemon stops serving and stands by")
		runErr = errStandBy
		stop()
	}
	if d := time.Duration(h.drain.Load()); d > 0 && runErr == nil {
		// The socket keeps answering: reads are served, new work is
		// refused (handler.draining); running turns may finish.
		h.draining.Store(true)
		logger.Info("draining: running turns may finish before the stop", "for", d)
		dctx, dcancel := context.WithTimeout(context.Background(), d)
		core.Drain(dctx)
		dcancel()
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !errors.Is(runErr, errStandBy) {
		// A stop: the socket closes first (clients in flight see the
		// daemon go), and its requests are waited for.
		ex.srvStop()
		if err := ex.srvShutdown(sctx); err != nil {
			logger.Warn("closing the socket", "err", err)
		}
	}
	// Standing by: new requests get code 6 until the next Core serves;
	// those in flight are cancelled and waited for. Either way the Core
	// is closed under no request.
	f.stopServing(30 * time.Second)
	stopWeb()
	<-notified // it reads the Core's logs
	if err := core.Close(sctx); err != nil {
		logger.Error("closing the core", "err", err)
		if !errors.Is(runErr, errStandBy) {
			runErr = errors.Join(runErr, err)
		}
	}
	wg.Wait()
	return runErr
}

// watchConfig applies each valid change of config.json to the Core and
// records an invalid file for daemon.status, until ctx is done.
func watchConfig(ctx context.Context, opts Options, core *engine.Core, cfgPath string, cfgState *configState, logger hclog.Logger, changed func(config.Config)) {
	err := config.WatchWith(ctx, cfgPath, config.WatchOptions{Logger: logger.Named("config"),
		OnValid: func() {
			cfgState.set(nil)
			logger.Debug("config.json read and valid")
		},
		OnChange: func(c config.Config) {
			c = withFlags(c, opts)
			core.ApplyConfig(c)
			changed(c)
			logger.Info("config.json reloaded", "pools", fmt.Sprint(c.Pools), "max_retries", c.MaxRetries)
		},
		OnError: func(err error) {
			// Recorded before it is logged: whoever sees the log line
			// (a test, an operator) then finds it in daemon.status.
			cfgState.set(err)
			logger.Error("config.json is invalid; keeping the previous config", "err", err)
		}})
	if err != nil && ctx.Err() == nil {
		logger.Warn("config watcher stopped", "err", err)
	}
}

// acquireLock takes the home's flock (store/local.Lock: same file, same
// retry on a dead holder) and keeps the daemon's "already running" error.
func acquireLock(home string) (*local.HomeLock, error) {
	l, err := local.Lock(home)
	if errors.Is(err, local.ErrLocked) {
		held := ""
		if pid := readPid(home); pid > 0 {
			held = fmt.Sprintf(" (pid %d)", pid)
		}
		return nil, fmt.Errorf("warren daemon %w on %s%s: the lock %s is held; stop it with `warren daemon stop --home %s`",
			ErrAlreadyRunning, home, held, homedir.LockPath(home), home)
	}
	return l, err
}

// readPid returns the pid in daemon.pid, or 0.
func readPid(home string) int {
	b, err := os.ReadFile(homedir.PidPath(home))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// withFlags applies the flags given to warren daemon start over a config
// read from the file: flags win over the file (SPEC 10), at start and on
// every reload. The config's pool map is copied, not changed.
func withFlags(c config.Config, opts Options) config.Config {
	if opts.HTTP != "" {
		c.HTTP.Listen = opts.HTTP
	}
	if opts.MaxSlots > 0 {
		pools := make(map[string]int, len(c.Pools)+1)
		for k, v := range c.Pools {
			pools[k] = v
		}
		pools[config.DefaultPool] = opts.MaxSlots
		c.Pools = pools
	}
	return c
}

// configState holds the error of an invalid config.json until a valid
// file is read; daemon.status shows it (SPEC 10).
type configState struct {
	mu  sync.Mutex
	err error
}

func (s *configState) set(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// message is the error text, "" when the file is valid.
func (s *configState) message() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return ""
	}
	return s.err.Error()
}
