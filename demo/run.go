package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrCheckFailed is wrapped by Run's error when a check of the scenario
// failed.
var ErrCheckFailed = errors.New("demo check failed")

// Options configures Run.
type Options struct {
	// Binary is the warren binary that runs the daemon (default: the
	// running executable).
	Binary string
	// Keep keeps the temporary home even when every check passed.
	Keep bool
	// Timeout bounds waiting for the team to finish after the restart
	// (default 90s).
	Timeout time.Duration
	// TempDir is where the temporary home is made (default os.TempDir()).
	// Keep it short: the socket path must fit in 107 bytes.
	TempDir string
}

// maxSocketPath is the longest Unix socket path Linux accepts.
const maxSocketPath = 107

// Task is the message the demo sends the lead.
const Task = "Split the report into three parts and have your team write them."

// runner holds the state of one demo run.
type runner struct {
	w      io.Writer
	opts   Options
	home   string
	step   int
	failed []string
	proc   *daemonProc
}

func (r *runner) ok(format string, args ...any) {
	r.step++
	fmt.Fprintf(r.w, "%2d. ✓ %s\n", r.step, fmt.Sprintf(format, args...))
}

func (r *runner) fail(format string, args ...any) {
	r.step++
	msg := fmt.Sprintf(format, args...)
	r.failed = append(r.failed, msg)
	fmt.Fprintf(r.w, "%2d. ✗ %s\n", r.step, msg)
}

// check records one check: ok when problems is empty.
func (r *runner) check(what string, problems []string) {
	if len(problems) == 0 {
		r.ok("%s", what)
		return
	}
	r.fail("%s: %s", what, strings.Join(problems, "; "))
}

func (r *runner) detail(format string, args ...any) {
	fmt.Fprintf(r.w, "      %s\n", fmt.Sprintf(format, args...))
}

// Run plays the demo scenario (see the package documentation), writing its
// steps to w. It returns nil only when every check passed.
func Run(ctx context.Context, w io.Writer, opts Options) error {
	if opts.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("demo: find the warren binary: %w; set Options.Binary", err)
		}
		opts.Binary = exe
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 90 * time.Second
	}
	home, err := os.MkdirTemp(opts.TempDir, "wd")
	if err != nil {
		return fmt.Errorf("demo: make a temporary home: %w", err)
	}
	if len(filepath.Join(home, "daemon.sock")) > maxSocketPath && opts.TempDir == "" {
		// $TMPDIR is too deep for a Unix socket path: use /tmp.
		os.Remove(home)
		if home, err = os.MkdirTemp("/tmp", "wd"); err != nil {
			return fmt.Errorf("demo: make a temporary home in /tmp ($TMPDIR is too long for a socket path): %w", err)
		}
	}
	r := &runner{w: w, opts: opts, home: home}
	fmt.Fprintf(w, "warren demo: a team of agents, a crash, a recovery (home %s)\n", home)
	err = r.play(ctx)
	if r.proc != nil {
		select {
		case <-r.proc.exited:
		default:
			if serr := r.proc.stop(context.WithoutCancel(ctx), home, 20*time.Second); serr != nil && err == nil {
				r.fail("stop the daemon: %v", serr)
			}
		}
	}
	if err == nil && len(r.failed) > 0 {
		err = fmt.Errorf("%w: %s", ErrCheckFailed, strings.Join(r.failed, "; "))
	}
	if err != nil {
		fmt.Fprintf(w, "demo FAILED; the home is kept for inspection: %s\n", home)
		return err
	}
	if opts.Keep {
		fmt.Fprintf(w, "demo passed; home kept at %s\n", home)
		return nil
	}
	if rerr := os.RemoveAll(home); rerr != nil {
		fmt.Fprintf(w, "demo passed, but removing %s failed: %v\n", home, rerr)
		return nil
	}
	fmt.Fprintln(w, "demo passed; every check held")
	return nil
}

// play runs the steps; an error return means the scenario could not go on.
func (r *runner) play(ctx context.Context) error {
	proc, st, err := startDaemon(ctx, r.opts.Binary, r.home, 20*time.Second)
	if err != nil {
		r.fail("start the daemon: %v", err)
		return err
	}
	r.proc = proc
	bootID := fmt.Sprint(st["boot_id"])
	r.ok("daemon started (pid %d, boot %s)", proc.pid(), short(bootID))

	res, err := call(ctx, r.home, "agent.create", map[string]any{
		"name": "lead", "instructions": "You lead a team of three workers.", "provider": "inproc", "model": LeadModel,
	})
	if err != nil {
		r.fail("create the root agent lead: %v", err)
		return err
	}
	r.ok("created agent lead (%s, provider inproc, model %s)", short(fmt.Sprint(res["agent_id"])), LeadModel)

	res, err = call(ctx, r.home, "agent.send", map[string]any{"agent_id": "lead", "message": Task})
	if err != nil {
		r.fail("send the task to lead: %v", err)
		return err
	}
	r.ok("sent the task; lead answered: %q", fmt.Sprint(res["response"]))

	busy, err := r.waitMidWork(ctx)
	if err != nil {
		r.fail("wait for the workers to be mid-work: %v", err)
		return err
	}
	r.check(fmt.Sprintf("workers exist and are mid-work (running: %s)", strings.Join(busy, ", ")), nil)

	r.proc.kill()
	r.ok("SIGKILL sent to the daemon (pid %d); it is gone", r.proc.pid())
	before, err := readDisk(r.home)
	if err != nil {
		r.fail("read the logs on disk: %v", err)
		return err
	}
	r.showDisk(before)
	r.checkDisk(before)

	proc, st, err = startDaemon(ctx, r.opts.Binary, r.home, 20*time.Second)
	if err != nil {
		r.fail("restart the daemon: %v", err)
		return err
	}
	r.proc = proc
	r.check(fmt.Sprintf("daemon restarted (pid %d, new boot %s)", proc.pid(), short(fmt.Sprint(st["boot_id"]))),
		diffIf(fmt.Sprint(st["boot_id"]) == bootID, "the boot id did not change"))

	interrupted, err := r.checkRecovered(ctx, before, bootID)
	if err != nil {
		return err
	}
	r.resume(ctx, interrupted)
	return r.waitDone(ctx, before)
}

func diffIf(cond bool, msg string) []string {
	if cond {
		return []string{msg}
	}
	return nil
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// waitMidWork polls agent.list until every worker exists and at least one is
// running a turn; it returns the running workers.
func (r *runner) waitMidWork(ctx context.Context) ([]string, error) {
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	want := WorkerNames()
	var firstRunning time.Time
	for {
		res, err := call(ctx, r.home, "agent.list", nil)
		if err != nil {
			return nil, fmt.Errorf("agent.list: %w", err)
		}
		found := map[string]string{}
		foundPending := map[string]int64{}
		for _, a := range agents(res) {
			found[fmt.Sprint(a["name"])] = fmt.Sprint(a["status"])
			foundPending[fmt.Sprint(a["name"])] = toInt(a["pending"])
		}
		var running []string
		all, pending := true, false
		for _, n := range want {
			st, ok := found[n]
			all = all && ok
			if st == "running" {
				running = append(running, n)
			}
			pending = pending || foundPending[n] > 0
		}
		if all && len(running) > 0 {
			// Best: a worker mid-turn and a message waiting in an inbox.
			// Settle for mid-turn alone if that moment does not come soon.
			if firstRunning.IsZero() {
				firstRunning = time.Now()
			}
			if pending || time.Since(firstRunning) > 2*time.Second {
				return running, nil
			}
		}
		select {
		case <-deadline.C:
			return nil, fmt.Errorf("after 30s the agents are %v", found)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case uint64:
		return int64(n)
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

func agents(res map[string]any) []map[string]any {
	raw, _ := res["agents"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, x := range raw {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// resume re-runs every interrupted run (agent.resume without a token). A
// wake may start a new run for the agent first (which also ends the
// interrupted status); that is not a failure. While the daemon is between
// taking the agent for a wake turn and logging it, the status can still read
// interrupted_startup: the resume is then retried briefly.
func (r *runner) resume(ctx context.Context, paths []string) {
	for _, p := range paths {
		deadline := time.Now().Add(5 * time.Second)
		for {
			res, err := call(ctx, r.home, "agent.resume", map[string]any{"agent_id": p})
			if err == nil {
				r.ok("resumed the interrupted run of %s (%v)", p, summarize(res))
				break
			}
			in, ierr := call(ctx, r.home, "agent.inspect", map[string]any{"agent_id": p})
			if ierr == nil && in["status"] != "interrupted_startup" {
				r.ok("%s was continued by the daemon before the resume (status %v)", p, in["status"])
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				r.fail("resume the interrupted run of %s: %v", p, err)
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

func summarize(res map[string]any) string {
	if v, ok := res["response"]; ok {
		return fmt.Sprintf("response %q", fmt.Sprint(v))
	}
	if v, ok := res["status"]; ok {
		return fmt.Sprintf("status %v", v)
	}
	return "ok"
}
