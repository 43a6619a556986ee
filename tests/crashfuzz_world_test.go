package tests

// The crash-recovery fuzzer of the daemon core (issues 6 and 7).
//
// A cfWorld drives one engine.Core on a crashable faultfs.Mem with the
// deterministic inproc provider and NoWake, so that only the fuzzer's
// commands run turns and every run of a command sequence performs the same
// mutating filesystem operations (crash points are reproducible). After every
// command the world checks the invariants of crashfuzz_check_test.go; after a
// crash it builds a reference instance from a copy of the rebooted durable
// bytes, checks that recovery is idempotent on another copy, recovers the
// test instance (sometimes crashing inside recovery too) and compares.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/store/local"
)

const (
	cfHome  = "/home"
	cfModel = "fz"
	// cfWaitTimeout is the await_input timeout (seconds) of the fz
	// program; the deadline command advances the clock past it. It is
	// long so that the deadline timers, which run on real time (cfClock),
	// never fire during a test.
	cfWaitTimeout = 3600
)

// cfClock is the injected clock (a schedule.Clock); only the deadline
// command moves its time. Its timers run on real time, as they did before
// the daemon took a Clock: a wait's deadline timer (cfWaitTimeout, an hour)
// never fires during a test, the fuzzer runs the sweep itself, and
// session.json writes come after the real SessionSaveDelay.
type cfClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *cfClock) AfterFunc(d time.Duration, f func()) schedule.Timer { return time.AfterFunc(d, f) }

func (c *cfClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *cfClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// cfProgram is the one inproc program every fuzzed agent runs:
//
//	"spawn NAME"  spawn_agent(NAME); responds "spawned <id>"
//	"ask"         await_input; responds "answer: <response>"
//	"send TO TEXT" send_message(TO, TEXT) then "sent <message_id>"
//	"sendall TEXT TO..." one model step of send_message(TO, TEXT.i) calls
//	              (Turn.CallBatch) then "sent <message ids>"
//	"bcast TEXT"  broadcast(TEXT) then "sent <broadcast id>"
//	"complete TEXT" complete(TEXT); responds "completing <message_id>"
//	anything else responds "echo: <prompt>"
func cfProgram(ctx context.Context, t *inproc.Turn) (string, error) {
	switch {
	case strings.HasPrefix(t.Prompt, "sendall "):
		f := strings.Fields(t.Prompt)
		var calls []provider.ToolRequest
		for i, to := range f[2:] {
			text := fmt.Sprintf("%s.%d", f[1], i)
			calls = append(calls, provider.ToolRequest{Tool: "send_message", Args: map[string]any{"recipient": to, "text": text}})
		}
		rs, err := t.CallBatch(calls)
		if err != nil {
			return "", err
		}
		ids := make([]string, len(rs))
		for i, r := range rs {
			if e, ok := r["error"]; ok {
				return "", provider.Permanent(fmt.Errorf("send %d of the step refused: %v", i, e))
			}
			ids[i] = fmt.Sprint(r["message_id"])
		}
		return "sent " + strings.Join(ids, ","), nil
	case strings.HasPrefix(t.Prompt, "send "), strings.HasPrefix(t.Prompt, "bcast "), strings.HasPrefix(t.Prompt, "complete "):
		f := strings.Fields(t.Prompt)
		var r map[string]any
		var err error
		switch f[0] {
		case "send":
			r, err = t.Call("send_message", map[string]any{"recipient": f[1], "text": f[2]})
		case "bcast":
			r, err = t.Call("broadcast", map[string]any{"text": f[1]})
		default:
			r, err = t.Call("complete", map[string]any{"result": f[1]})
		}
		if err != nil {
			return "", err
		}
		if e, ok := r["error"]; ok {
			return "", provider.Permanent(fmt.Errorf("%s refused: %v", f[0], e))
		}
		return fmt.Sprintf("%v %v", r["status"], r["message_id"]), nil
	case strings.HasPrefix(t.Prompt, "spawn "):
		name := strings.TrimPrefix(t.Prompt, "spawn ")
		r, err := t.Call("spawn_agent", map[string]any{"name": name, "instructions": "a fuzzed child"})
		if err != nil {
			return "", err
		}
		if e, ok := r["error"]; ok {
			return fmt.Sprintf("spawn refused: %v", e), nil
		}
		return fmt.Sprintf("spawned %v", r["agent_id"]), nil
	case t.Prompt == "ask":
		r, err := t.Call("await_input", map[string]any{"kind": "question", "prompt": "go on?", "timeout": cfWaitTimeout})
		if err != nil {
			return "", err
		}
		if e, ok := r["error"]; ok {
			return "", provider.Permanent(fmt.Errorf("await_input refused: %v", e))
		}
		return fmt.Sprintf("answer: %v", r["response"]), nil
	}
	// One model request per echo turn: its usage.step makes the spend
	// the oracle checks against the logs (11.9, checkSpend).
	if err := t.Request(provider.Usage{InputTokens: 10, OutputTokens: len(t.Prompt)}); err != nil {
		return "", err
	}
	return "echo: " + t.Prompt, nil
}

// cfNode is an agent as the oracle knows it.
type cfNode struct {
	Name   string
	Parent string
}

// cfWait is a resume token a suspend returned.
type cfWait struct {
	Agent   string
	RunID   string
	TokenID string
	Token   string
}

// cfOracle records what the daemon acknowledged.
type cfOracle struct {
	created    map[string]cfNode // acked creates and visible spawns
	spawned    map[string]cfNode // spawns accepted in an acked turn
	terminated map[string]bool   // acked terminations
	// terminating holds agents whose termination was attempted: an
	// unacknowledged termination may be durable after a crash.
	terminating map[string]bool
	delivered   map[string]string // message ids check_inbox returned -> agent
	// logs holds every log as it was at the last quiescent point: every
	// entry in it was acknowledged, so a recovered log must extend it.
	logs map[string][]cfEntry
}

func newOracle() *cfOracle {
	return &cfOracle{created: map[string]cfNode{}, spawned: map[string]cfNode{}, terminated: map[string]bool{}, terminating: map[string]bool{},
		delivered: map[string]string{}, logs: map[string][]cfEntry{}}
}

// cfWorld is one fuzzed daemon and its oracle.
type cfWorld struct {
	mem    *faultfs.Mem
	prov   *inproc.Provider
	clock  *cfClock
	core   *engine.Core
	oracle *cfOracle
	waits  []cfWait // every token handed out, in order
	names  int
	boots  int
	trace  []string
	// strict turns off the workarounds for the known daemon bugs that
	// have their own reproductions in crashfuzz_bugs_test.go: a spawn
	// accepted in an acknowledged turn then counts as acknowledged even
	// when the crash hit before the child was created
	// (TestCrashfuzzBugDeferredSpawnLostAfterCompletedTurn), and complete
	// outside a turn must not fail (TestCrashfuzzBugCompleteOutsideTurnFails).
	strict bool
	// wake serves with wake turns on (see newWorldWake).
	wake bool
	// wsDir, when set, is where agents' workspaces go (a real directory:
	// git is a real subprocess on the real disk).
	wsDir string
	// crashAfterEdit: the workspace program arms a crash after its edits
	// (once).
	crashAfterEdit bool
	// stats
	steps, crashes, recoveryCrashes int
	cov                             map[string]int // how often interesting paths ran
	bootOf                          map[*engine.Core]string
}

func newWorld() (*cfWorld, error) { return newWorldWake(false) }

// newWorldWake builds a world; with wake the served core wakes agents with
// pending messages (wake turns run in the background and the world drains
// them after every command).
func newWorldWake(wake bool) (*cfWorld, error) {
	prov := inproc.New("inproc", inproc.Options{NativeResume: true})
	prov.Register(cfModel, cfProgram)
	w := &cfWorld{mem: faultfs.NewMem(), prov: prov, oracle: newOracle(),
		clock: &cfClock{now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}, wake: wake,
		cov: map[string]int{}, bootOf: map[*engine.Core]string{}}
	c, err := w.newCoreWake(w.mem, wake)
	if err != nil {
		return nil, err
	}
	if _, err := c.Recover(context.Background()); err != nil {
		return nil, fmt.Errorf("first recovery: %w", err)
	}
	w.core = c
	return w, nil
}

// newCore builds a core on fsys sharing the world's provider and clock,
// without wake turns.
func (w *cfWorld) newCore(fsys faultfs.FS) (*engine.Core, error) { return w.newCoreWake(fsys, false) }

func (w *cfWorld) newCoreWake(fsys faultfs.FS, wake bool) (*engine.Core, error) {
	w.boots++
	cfg := config.Default()
	cfg.RetryBaseDelay = time.Millisecond
	// The daemon's store (daemon.openLocalStore): the logs share their
	// fsyncs through a Syncer.
	st := local.New(local.Options{FS: fsys, Home: cfHome, Logger: hclog.NewNullLogger(), Now: w.clock.Now,
		Files: eventlog.NewFiles(config.DefaultMaxOpenLogs), PendingIdle: -1, Syncer: eventlog.NewSyncer(fsys)})
	boot := fmt.Sprintf("boot%04d", w.boots)
	c, err := engine.NewCore(context.Background(), engine.CoreOptions{
		Store: st, FS: fsys, Home: cfHome, Providers: map[string]provider.Provider{"inproc": w.prov},
		DefaultProvider: "inproc", DefaultModel: cfModel, Config: cfg, Logger: hclog.NewNullLogger(),
		Clock: w.clock, NoWake: !wake, BootID: boot,
		PendingIdle: -1, WorkspacesDir: w.wsDir,
		// The daemon's settings (config/engine.go), as its boot passes them.
		CheckpointEvery: config.DefaultCheckpointEvery, SessionSaveDelay: config.DefaultSessionSaveDelay,
		MaxOpenLogs: config.DefaultMaxOpenLogs,
		Sleep:       func(ctx context.Context, d time.Duration) error { return nil },
		Jitter:      func() float64 { return 0.5 },
	})
	if err == nil {
		w.bootOf[c] = boot
	}
	return c, err
}

// bootID is the boot id of the core serving the world.
func (w *cfWorld) bootID() string { return w.bootOf[w.core] }

// close shuts the current core down (end of a sequence).
func (w *cfWorld) close() {
	if w.core == nil {
		return
	}
	if w.mem.Crashed() {
		w.core.Abandon()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.core.Close(ctx)
}

func (w *cfWorld) nextName() string {
	w.names++
	return fmt.Sprintf("a%03d", w.names)
}

func (w *cfWorld) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf(format, args...))
}

// failf returns an error carrying the trace of the sequence so far.
func (w *cfWorld) failf(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	tail := w.trace
	if len(tail) > 60 {
		tail = tail[len(tail)-60:]
	}
	return fmt.Errorf("%s\n  trace:\n    %s", msg, strings.Join(tail, "\n    "))
}

// alive lists the agents the current core serves, ordered by name (names
// encode creation order), with their parents.
func (w *cfWorld) alive() []daemonAgent {
	var out []daemonAgent
	for _, v := range w.core.List() {
		out = append(out, daemonAgent{ID: v.ID, Name: v.Name, Parent: v.ParentID, Status: v.Status})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

type daemonAgent struct {
	ID, Name, Parent, Status string
}

// cfCrash is the crash plan of one command: K = 0 runs it without a crash;
// otherwise the K-th mutating op from the command's start crashes, and the
// filesystem reboots per Mode/Tail. RecK > 0 crashes the K-th op of the
// following recovery as well.
type cfCrash struct {
	K     int
	Mode  faultfs.RebootMode
	Tail  faultfs.TailMode
	Seed  uint64
	RecK  int
	RecPL bool // the recovery crash loses power (else a process crash)
}

func (c cfCrash) String() string {
	if c.K == 0 {
		return ""
	}
	mode := "proc"
	if c.Mode == faultfs.PowerLoss {
		mode = fmt.Sprintf("power/tail%d", c.Tail)
	}
	s := fmt.Sprintf(" crash@%d(%s,seed%d)", c.K, mode, c.Seed)
	if c.RecK > 0 {
		s += fmt.Sprintf(" reccrash@%d(pl=%v)", c.RecK, c.RecPL)
	}
	return s
}

// step runs op under the crash plan, then recovers if the filesystem
// crashed, then checks every invariant.
func (w *cfWorld) step(desc string, plan cfCrash, op func() error) error {
	w.logf("%s%s", desc, plan)
	w.steps++
	if plan.K > 0 {
		w.mem.CrashAt(plan.K)
	}
	opErr := op()
	if err := w.drain(); err != nil {
		return err
	}
	// Disarm before looking: background work of the core (session.json
	// snapshots) may still reach an armed crash point; after CrashAt(0)
	// nothing can crash, so the check below is stable.
	w.mem.CrashAt(0)
	crashed := w.mem.Crashed()
	if opErr != nil && !crashed {
		return w.failf("%s: %v", desc, opErr)
	}
	if crashed {
		w.crashes++
		if err := w.crashRecover(plan); err != nil {
			return err
		}
	}
	return w.checkAll()
}

// crashRecover abandons the crashed core, reboots, and recovers: reference,
// idempotency check, test instance (maybe crashing inside recovery), compare.
func (w *cfWorld) crashRecover(plan cfCrash) error {
	w.core.Abandon()
	w.core = nil
	rng := rand.New(rand.NewPCG(plan.Seed, 7))
	w.mem.Reboot(faultfs.RebootOptions{Mode: plan.Mode, Tail: plan.Tail, Rand: rng})

	ref, err := w.recoverCopy("reference")
	if err != nil {
		return err
	}
	if err := w.checkIdempotent(); err != nil {
		return err
	}
	compare := true
	if plan.RecK > 0 {
		w.mem.CrashAt(plan.RecK)
		c, err := w.newCore(w.mem)
		if err != nil {
			return w.failf("NewCore: %v", err)
		}
		_, rerr := c.Recover(context.Background())
		// Disarm before asking: background work that recovery started (the
		// scrub, checkpoint timers) writes on after Recover returns, and a
		// crash it hit between the question and the disarm would otherwise
		// go unseen until the snapshot below.
		w.mem.CrashAt(0)
		if w.mem.Crashed() {
			w.recoveryCrashes++
			c.Abandon()
			mode := faultfs.ProcessCrash
			if plan.RecPL {
				mode = faultfs.PowerLoss
				// After a process crash, recovery may have read data that
				// was visible but not yet synced; a power loss inside it
				// can drop that in-flight data, so the test instance may
				// legitimately differ from the reference. The oracle's
				// invariants still hold.
				compare = plan.Mode == faultfs.PowerLoss
			}
			w.mem.Reboot(faultfs.RebootOptions{Mode: mode, Tail: plan.Tail, Rand: rng})
			w.logf("  recovery crashed (err=%v); rebooted", rerr)
		} else {
			if rerr != nil {
				return w.failf("recovery failed without a crash: %v", rerr)
			}
			w.core = c
		}
	}
	if w.core == nil {
		c, err := w.newCore(w.mem)
		if err != nil {
			return w.failf("NewCore: %v", err)
		}
		if _, err := c.Recover(context.Background()); err != nil {
			return w.failf("recovery of the test instance: %v", err)
		}
		w.core = c
	}
	got, err := snapshotCore(w.core, w.mem)
	if err != nil {
		return w.failf("snapshot of the test instance: %v", err)
	}
	if d := diffSnaps(ref, got); compare && d != "" {
		return w.failf("test instance differs from the reference after recovery:\n%s", d)
	}
	if err := checkSpend(w.core, w.mem); err != nil {
		return w.failf("%v", err)
	}
	if !w.wake {
		return nil
	}
	// Serve with wake turns: drop the compared core (as a kill would) and
	// recover again with wakes on, then let the wake turns run.
	w.core.Abandon()
	c, err := w.newCoreWake(w.mem, true)
	if err != nil {
		return w.failf("NewCore: %v", err)
	}
	if _, err := c.Recover(context.Background()); err != nil {
		return w.failf("recovery with wake turns: %v", err)
	}
	w.core = c
	return w.drain()
}

// drain waits until the served core runs no turn and has no wake due (or
// the filesystem crashed: the core is about to be dropped).
func (w *cfWorld) drain() error {
	if !w.wake || w.core == nil {
		return nil
	}
	limit := time.NewTimer(30 * time.Second)
	defer limit.Stop()
	for {
		changed := w.core.WaitChange()
		if w.mem.Crashed() || w.core.Idle() {
			return nil
		}
		select {
		case <-changed:
		case <-limit.C:
			return w.failf("wake turns did not settle within 30s (a turn loop?)")
		}
	}
}

// recoverCopy recovers a copy of the current (rebooted) durable bytes with
// no crash and returns its snapshot.
func (w *cfWorld) recoverCopy(what string) (*cfSnap, error) {
	cp, err := cloneMem(w.mem)
	if err != nil {
		return nil, w.failf("copying the filesystem for the %s: %v", what, err)
	}
	c, err := w.newCore(cp)
	if err != nil {
		return nil, w.failf("NewCore (%s): %v", what, err)
	}
	defer c.Abandon()
	if _, err := c.Recover(context.Background()); err != nil {
		return nil, w.failf("%s recovery: %v", what, err)
	}
	s, err := snapshotCore(c, cp)
	if err != nil {
		return nil, w.failf("%s snapshot: %v", what, err)
	}
	return s, nil
}

// checkIdempotent recovers a copy, loses power (only what recovery synced
// survives), recovers again, and requires the same files and state.
func (w *cfWorld) checkIdempotent() error {
	cp, err := cloneMem(w.mem)
	if err != nil {
		return w.failf("copying the filesystem: %v", err)
	}
	c1, err := w.newCore(cp)
	if err != nil {
		return w.failf("NewCore: %v", err)
	}
	if _, err := c1.Recover(context.Background()); err != nil {
		return w.failf("idempotency: first recovery: %v", err)
	}
	s1, err := snapshotCore(c1, cp)
	if err != nil {
		return w.failf("idempotency: snapshot: %v", err)
	}
	files1, err := dumpDurable(cp)
	if err != nil {
		return w.failf("idempotency: dump: %v", err)
	}
	cp.Crash()
	c1.Abandon()
	cp.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
	filesPL, err := dumpDurable(cp)
	if err != nil {
		return w.failf("idempotency: dump: %v", err)
	}
	// A WAL file (*.pending) may come back after a power loss: the log
	// removes it without syncing the directory once its records are durable
	// in the log, and replay skips records the log has (eventlog design).
	// The second recovery below must then leave the same files as the first.
	if d := diffFiles(withoutPending(files1), withoutPending(filesPL)); d != "" {
		return w.failf("recovery left effects that a power loss undoes (not synced):\n%s", d)
	}
	c2, err := w.newCore(cp)
	if err != nil {
		return w.failf("NewCore: %v", err)
	}
	defer c2.Abandon()
	if _, err := c2.Recover(context.Background()); err != nil {
		return w.failf("idempotency: second recovery: %v", err)
	}
	s2, err := snapshotCore(c2, cp)
	if err != nil {
		return w.failf("idempotency: snapshot: %v", err)
	}
	files2, err := dumpDurable(cp)
	if err != nil {
		return w.failf("idempotency: dump: %v", err)
	}
	// An open log keeps its WAL file between appends (eventlog removes it
	// once idle or closed), so which *.pending files exist depends on which
	// logs the recovery appended to. They only ever hold records their log
	// already has: the second recovery replayed them, and the logs it left
	// must equal the first recovery's.
	if d := diffFiles(withoutPending(files1), withoutPending(files2)); d != "" {
		return w.failf("recovering twice changed the files:\n%s", d)
	}
	if d := diffSnaps(s1, s2); d != "" {
		return w.failf("recovering twice changed the state:\n%s", d)
	}
	return nil
}
