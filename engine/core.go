package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warren-dev/warren/workspace"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/bus"
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/engine/internal/claims"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/launch"
	"github.com/warren-dev/warren/multiplexer"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/registry"
	"github.com/warren-dev/warren/sandbox"
	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/stderrlog"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
	"github.com/warren-dev/warren/token"
	"github.com/warren-dev/warren/tree"
	"github.com/warren-dev/warren/userinbox"
)

// CoreOptions configures a Core: the agent layer without the socket.
type CoreOptions struct {
	FS        faultfs.FS
	Home      string
	Providers map[string]provider.Provider
	// Place, when set, may put the sessions of provider entry name on a
	// remote worker carrying labels (the entry's "worker" setting): it
	// returns the provider that opens them (a worker's when one has a
	// free slot, else local; provider/remote).
	Place func(name string, local provider.Provider, labels map[string]string) provider.Provider
	// DefaultProvider and DefaultModel apply to agent.create without them;
	// with no DefaultProvider such a create is refused (the binary passes
	// builtins.DefaultProvider).
	DefaultProvider string
	DefaultModel    string
	// Config is config.json's settings (required: config.Default() or a
	// file read with config.Load). The engine's other settings below have
	// no defaults of their own: the daemon passes config's (config/engine.go).
	Config config.Config
	Logger hclog.Logger
	// Clock tells the time (log stamps, deadlines) and runs the timers:
	// wait deadlines, reminders, the periodic sweep and, unless Sleep is
	// set, the retry backoff. Nil means schedule.Real(); tests pass a
	// *schedule.Fake to move time themselves.
	Clock schedule.Clock
	// BootID identifies this start; a fresh random one when empty.
	BootID string
	// SocketPath is passed to provider processes as WARREN_SOCKET.
	SocketPath string
	// Env is extra environment for provider processes (KEY=VALUE).
	Env []string
	// WarrenBinary is the warren executable acp agents start as their MCP
	// server (warren mcp-bridge); empty means this process's executable.
	WarrenBinary string
	// PythonPath is put first on the PYTHONPATH of provider processes (the
	// scripted helper library).
	PythonPath string
	// Environ is the daemon environment env_pass settings read (nil:
	// os.Environ()).
	Environ []string
	// Sleep waits between retries (default: on Clock); tests replace it to
	// observe delays.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a random fraction in [0,1) for retry jitter (default:
	// math/rand/v2.Float64; jitter spreads retries, it guards no secret).
	Jitter func() float64
	// NoWake disables automatic turns: wakes and the resume policy's
	// re-runs (the crash fuzzer drives turns itself).
	NoWake bool
	// SessionSaveDelay is how long session.json's background writer waits
	// after a change before writing, coalescing the changes made meanwhile
	// (a busy agent's snapshot is written about once per delay); 0 or
	// negative means no wait (config.DefaultSessionSaveDelay is the daemon's).
	SessionSaveDelay time.Duration
	// Git runs the git command line for agents' workspaces (the zero
	// value: git from PATH); WorkspacesDir is where their worktrees go
	// ("" = <Home>/workspaces; tests on an in-memory home name a real
	// directory).
	Git           workspace.Git
	WorkspacesDir string
	// Bwrap is the bubblewrap binary sandboxed agents run under ("" =
	// bwrap from PATH). AgentSocket starts (or shares) the socket of a
	// sandboxed agent, <home>/agents/<id>/agent.sock, serving tool.call
	// for that agent only, and returns its path and the function that
	// gives it back; nil: this core cannot run sandboxed agents (the
	// daemon sets it).
	Bwrap       string
	AgentSocket func(agentID string) (path string, release func(), err error)
	// Getenv reads provider key variables (default os.Getenv).
	Getenv func(string) string
	// CheckpointEvery is how many entries an agent's log grows by before
	// its checkpoint is rewritten (doc.go, "Checkpoints"); 0 or negative
	// disables checkpoints (recovery then folds every log from its start;
	// config.DefaultCheckpointEvery is the daemon's).
	CheckpointEvery int
	// PendingHeld bounds the payload bytes of pending messages the engine
	// holds in memory, all agents together (0: DefaultPendingHeld;
	// negative: no bound). Past it a pending message keeps only its
	// envelope and its payload is read back from its log line when shown,
	// so that the documented pending limits (200,000 messages) fit the
	// daemon's memory (issue 31, D11).
	PendingHeld int64
	// PendingIdle is passed to every event log (eventlog.Options); the
	// crash tests set it negative so that no idle timer adds operations.
	PendingIdle time.Duration
	// MaxOpenLogs caps the event logs holding open file handles (each at
	// most two descriptors): the least recently used idle log is closed and
	// reopened on demand (eventlog.Files). Required (at least 1) unless
	// Store is given (config.DefaultMaxOpenLogs is the daemon's).
	MaxOpenLogs int
	// LogHealBackoff is eventlog.Options.HealBackoff for every log: how
	// long a log whose write failed waits before reopening itself. 0 means
	// the eventlog default.
	LogHealBackoff time.Duration
	// Store is where logs and session snapshots live. nil: store/local on
	// Home through FS (the files the daemon always wrote), built with the
	// options above. A given store is not closed by the Core.
	Store store.Store
	// TakeoverEvery is how often a daemon on a cluster store looks for
	// agents whose owner's lease lapsed (and, standing by, for the USER
	// inbox; takeover.go). Required on a cluster store
	// (config.DefaultTakeoverEvery is the daemon's); unused on the local one.
	TakeoverEvery time.Duration
}

// Core owns the agents and runs their turns and tools.
type Core struct {
	opts   CoreOptions
	fs     faultfs.FS
	log    hclog.Logger
	now    func() time.Time
	bootID string

	agentsDir string

	// standby is set while Recover stands by for a cluster's USER inbox;
	// userLost is closed (once) when the USER lease is lost (user.go).
	standby      atomic.Bool
	userLost     chan struct{}
	userLostOnce sync.Once

	// agents is the table of agents (roster.go), under its own lock.
	agents *roster
	tree   *tree.Tree
	// cfg is config.json's settings in force (ApplyConfig replaces them).
	cfg atomic.Pointer[config.Config]

	// pending counts the messages and payload bytes of every inbox, for the
	// total limits (limits.go).
	pending inbox.Totals
	// resv holds the room of messages checked and not yet appended.
	resv reservations

	user *userinbox.Inbox
	// providers resolves provider entry names (package registry).
	providers *registry.Registry
	// sessions are the live provider sessions in their multiplexer slots
	// (sessions.go).
	sessions *liveSessions
	store    store.Snapshots
	// st holds the logs (CoreOptions.Store); local-only files (checkpoints,
	// quarantine, repair, procs, stderr) stay under Home (store.go).
	st     store.Store
	claims *claims.Set
	// takeoverMu serialises the takeover scans (takeover.go).
	takeoverMu sync.Mutex
	tokens     *token.Service
	bus        *bus.Bus
	// launches gives each agent process its credential, its durable
	// record and its stderr.log (package launch).
	launches *launch.Launches
	// sandboxes checks that bwrap works (once; sandboxes.go).
	sandboxes *sandbox.Checker
	// grants are spawn_agent budgets accepted and not yet created (the
	// deferred spawns of running turns), by parent (budgets.go).
	grants inflightGrants
	// goneSums caches what terminated agents spent under each agent.
	goneSums goneSums
	// gitChecked: git's version passed its check (workspaces.go).
	gitChecked atomic.Bool
	// changed fires when live state changes outside the logs (turn ends,
	// terminations), for waiters such as tests and the demo.
	changed bus.Signal

	// sched owns every timer and every piece of background work (turns,
	// timer callbacks, the scrub); Close stops it and waits for it.
	sched  *schedule.Scheduler
	ctx    context.Context
	cancel context.CancelFunc
	// snaps writes the session.json snapshots behind the logs
	// (snapshots.go); Close waits for its writers.
	snaps *snapshotWriter
	// ckpts writes the agents' checkpoints (ckptwrite.go).
	ckpts *ckptWriter
	// ckstore is where checkpoints live (ckptstore.go).
	ckstore store.Checkpoints
	// scrubbed is closed when the checkpoints and the scrub that follow
	// recovery are done (or stopped by Close).
	scrubbed  chan struct{}
	scrubOnce sync.Once
	// resumed is what the starts of this Core found interrupted
	// (autoresume.go), for daemon.status; resumedMu guards it.
	resumedMu sync.Mutex
	resumed   []InterruptedRun
}

// NewCore builds a Core. Call Recover before using it. ctx is the
// parent of the Core's own context, which its background work (turns,
// timers, leases) runs under until Close; the daemon passes one that a
// stop signal does not cancel, since Close decides how running turns end.
func NewCore(ctx context.Context, opts CoreOptions) (*Core, error) {
	if opts.FS == nil {
		return nil, errors.New("engine: CoreOptions.FS is required")
	}
	if opts.Home == "" {
		return nil, errors.New("engine: CoreOptions.Home is required")
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Clock == nil {
		opts.Clock = schedule.Real()
	}
	if opts.BootID == "" {
		opts.BootID = newID()
	}
	if opts.Sleep == nil {
		clock := opts.Clock
		opts.Sleep = func(ctx context.Context, d time.Duration) error { return schedule.Sleep(ctx, clock, d) }
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	if opts.Config.Pools == nil {
		return nil, errors.New("engine: CoreOptions.Config is required: config.Default() or a file read by config.Load")
	}
	if opts.Store == nil && opts.MaxOpenLogs < 1 {
		return nil, errors.New("engine: CoreOptions.MaxOpenLogs must be at least 1 on the home's store (config.DefaultMaxOpenLogs)")
	}
	if _, isLocal := opts.Store.(*local.Store); opts.Store != nil && !isLocal && opts.TakeoverEvery <= 0 {
		return nil, errors.New("engine: CoreOptions.TakeoverEvery must be positive on a cluster store (config.DefaultTakeoverEvery)")
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &Core{
		userLost:  make(chan struct{}),
		opts:      opts,
		fs:        opts.FS,
		log:       opts.Logger,
		now:       opts.Clock.Now,
		sched:     schedule.New(opts.Clock),
		bootID:    opts.BootID,
		agentsDir: filepath.Join(opts.Home, "agents"),
		tree:      tree.New(),
		tokens:    token.NewService(),
		scrubbed:  make(chan struct{}),
		bus:       bus.New(),
		ctx:       ctx,
		cancel:    cancel,
	}
	c.agents = newRoster(c.tree)
	switch {
	case opts.PendingHeld == 0:
		c.pending.SetHeldMax(DefaultPendingHeld)
	case opts.PendingHeld > 0:
		c.pending.SetHeldMax(opts.PendingHeld)
	}
	c.cfg.Store(&opts.Config)
	c.st = opts.Store
	if c.st == nil {
		c.st = local.New(local.Options{FS: opts.FS, Home: opts.Home, Logger: c.log.Named("eventlog"),
			Now: c.now, Files: eventlog.NewFiles(opts.MaxOpenLogs), PendingIdle: opts.PendingIdle, HealBackoff: opts.LogHealBackoff})
	}
	c.store = c.st.Snapshots()
	c.ckstore = c.checkpointsOf(c.st)
	// Checkpoints are written by Close too, after the Core's context is
	// cancelled: their requests outlive it (each bounded by the store).
	c.ckpts = newCkptWriter(ckptOptions{Store: c.ckstore, Ctx: context.WithoutCancel(ctx), Every: opts.CheckpointEvery,
		Delay: opts.SessionSaveDelay, After: c.sched.After, Stopping: c.stopping, Logger: c.log})
	c.snaps = &snapshotWriter{Save: c.store.Save, Delay: c.saveDelay, Now: c.now, Logger: c.log}
	co := claims.Options{Owner: c.st, Ctx: ctx, Lost: c.leaseLost, Logger: c.log}
	if hv, ok := c.st.(holderView); ok {
		co.Holder, co.Grace = hv.Holder, leaseGrace
	}
	c.claims = claims.New(co)
	c.sandboxes = &sandbox.Checker{Bin: opts.Bwrap}
	c.launches = launch.New(agentproc.Records{FS: opts.FS, Dir: filepath.Join(opts.Home, "procs")},
		stderrlog.New(opts.FS, c.agentDir, opts.Logger), c.log)
	c.sessions = newLiveSessions(c, muxConfig(opts.Config))
	c.providers = registry.New(registry.Options{Static: opts.Providers, Config: c.config, Getenv: opts.Getenv,
		WarrenBinary: opts.WarrenBinary, Logger: c.log})
	return c, nil
}

// DefaultPendingHeld is CoreOptions.PendingHeld's default: 32 MiB of
// pending payloads in memory. The daemon's soft memory limit is 192 MiB;
// 200,000 pending envelopes take about 100 MB of it already.
const DefaultPendingHeld = 32 << 20

// BootID is this start's boot id.
func (c *Core) BootID() string { return c.bootID }

func muxConfig(cfg config.Config) multiplexer.Config {
	return multiplexer.Config{Pools: cfg.Pools, ProviderPools: cfg.ProviderPools, DefaultPool: "default"}
}

// ApplyConfig applies pool and retry settings live.
func (c *Core) ApplyConfig(cfg config.Config) {
	c.cfg.Store(&cfg)
	c.sessions.SetConfig(muxConfig(cfg))
}

func (c *Core) config() config.Config { return *c.cfg.Load() }

// Close stops background work, interrupts running turns (each logged as
// run.interrupted, shutdown: the next start re-runs them; waits keep
// their tokens), saves the provider state of live sessions and closes
// the logs.
func (c *Core) Close(ctx context.Context) error {
	agents, first := c.stopAgents()
	if !first {
		return nil
	}
	// Turns, timer callbacks and background work that began before the
	// scheduler stopped finish (or ctx ends) before anything is closed.
	_ = c.sched.Wait(ctx)
	c.cancel()
	var errs []error
	c.snaps.Wait()
	if err := c.sessions.EvictAll(ctx); err != nil {
		errs = append(errs, fmt.Errorf("saving provider state: %w", err))
	}
	// The next start folds only what is logged after these.
	c.ckpts.All(agents, 1, false)
	for _, a := range agents {
		if a.Log != nil {
			if err := a.Log.Close(); err != nil && !errors.Is(err, eventlog.ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	if c.user != nil {
		if err := c.user.Close(); err != nil && !errors.Is(err, eventlog.ErrClosed) {
			errs = append(errs, err)
		}
	}
	c.claims.ReleaseAll(ctx)
	c.bus.Close()
	return errors.Join(errs...)
}

// Abandon drops everything without writing (a simulated crash for tests:
// the filesystem is expected to be crashed already).
func (c *Core) Abandon() {
	agents, _ := c.stopAgents()
	c.cancel()
	c.sched.WaitAll()
	c.snaps.Wait()
	// No log may heal (reopen, cut, remove) after the filesystem reboots.
	for _, a := range agents {
		if a.Log != nil {
			a.Log.Abandon()
		}
	}
	if c.user != nil {
		c.user.Abandon()
	}
	c.bus.Close()
}

// stopAgents marks the core closed (no new turns or wakes), stops the
// scheduler (every pending timer is cancelled, no new timer or background
// work starts) and interrupts every agent's running turn. first is false
// when the core was closed already.
func (c *Core) stopAgents() (agents []*agent, first bool) {
	agents, first = c.agents.Close(func() { c.sched.Stop() })
	for _, a := range agents {
		a.CancelTurn(errStopping)
	}
	return agents, first
}

// goBackground runs f on a new goroutine as work Close waits for, unless
// the core is closed (then it reports false and f does not run).
func (c *Core) goBackground(f func()) bool { return c.sched.Go(f) }

func (c *Core) agent(id string) (*agent, bool) { return c.agents.Get(id) }

func (c *Core) agentDir(id string) string { return filepath.Join(c.agentsDir, id) }

func (c *Core) logPath(id string) string { return filepath.Join(c.agentsDir, id, "events.jsonl") }

// displayName is how a sender appears in prompts and inbox listings
// (DisplayName).
func (c *Core) displayName(id string) string { return c.agents.DisplayName(id) }

func newID() string { return inbox.NewID() }
