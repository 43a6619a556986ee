package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
)

// The crash fuzzer's workspace model (issue 33, guarantee 11.8). An agent
// with a workspace (a real git worktree: git is a real subprocess on the
// real disk; warren's own writes go through faultfs) runs turns of the
// program cfEditModel, which changes files: it appends "line <prompt>" to
// the tracked notes.md and writes <prompt>.txt. Its turn, and the re-run
// of an interrupted one (the restore path), are crashed at every mutating
// op of faultfs, in process-crash and power-loss modes, with the usual
// checks of every recovery; then any interrupted run is re-run until it
// completes, and 11.8 is checked: the worktree holds each prompt's edit
// exactly as often as the log completed a run of it (once), none of an
// attempt that did not complete, it is on its branch, and the main
// checkout is untouched. git's own crash points are covered by
// TestKillAtEveryGitCall (kill -9 at each git call).

const cfEditModel = "wsedit"

// cfEditProgram makes the turn's edits in its working directory; the
// prompt's last word names them. With crashAfter set (once) it arms a
// crash at the next mutating op of faultfs once its edits are made: the
// turn is interrupted after its edits, before its end is logged.
func cfEditProgram(w *cfWorld) inproc.Program {
	return func(_ context.Context, t *inproc.Turn) (string, error) {
		words := strings.Fields(t.Prompt)
		if len(words) == 0 {
			return "", fmt.Errorf("an empty prompt")
		}
		mark := words[len(words)-1]
		f, err := os.OpenFile(filepath.Join(t.Cwd, "notes.md"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return "", err
		}
		_, err = fmt.Fprintf(f, "line %s\n", mark)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(t.Cwd, mark+".txt"), []byte(mark+"\n"), 0o644); err != nil {
			return "", err
		}
		if w.crashAfterEdit {
			w.crashAfterEdit = false
			w.mem.CrashAt(1)
		}
		return "edited " + mark, nil
	}
}

// cfWsWorkload: setup runs without crashes; work is crashed at every op.
type cfWsWorkload struct {
	name        string
	setup, work func(w *cfWorld, id string) error
}

func cfWsWorkloads() []cfWsWorkload {
	noSetup := func(*cfWorld, string) error { return nil }
	return []cfWsWorkload{
		{name: "workspace turn", setup: noSetup, work: func(w *cfWorld, id string) error {
			return cfSendTurn(w, id, "r1")
		}},
		{name: "workspace turn after a turn", setup: func(w *cfWorld, id string) error {
			return cfSendTurn(w, id, "r0")
		}, work: func(w *cfWorld, id string) error {
			return cfSendTurn(w, id, "r1")
		}},
		// The restore path: a turn interrupted after its edits (a power
		// loss at the op after them), then its re-run, crashed at every
		// op of the restore and the run.
		{name: "workspace re-run", setup: func(w *cfWorld, id string) error {
			w.crashAfterEdit = true
			err := w.step("a turn interrupted after its edits", cfCrash{Mode: faultfs.PowerLoss, Tail: faultfs.TailNone}, func() error {
				return cfSendTurn(w, id, "r1")
			})
			if err != nil {
				return err
			}
			if st := w.alive()[0].Status; st != "interrupted_startup" || w.crashes != 1 {
				return fmt.Errorf("the turn crashed after its edits left the agent %s (%d crashes), want interrupted_startup", st, w.crashes)
			}
			w.crashes = 0
			return nil
		}, work: func(w *cfWorld, id string) error {
			return w.opResumeInterrupted(0, cfCrash{})
		}},
	}
}

// newWsWorld builds a world whose one root agent has a workspace of a
// fresh repository under dir.
func newWsWorld(dir string) (*cfWorld, string, error) {
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(repo, "notes.md"), []byte("# notes\n"), 0o644); err != nil {
		return nil, "", err
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "notes.md"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "notes"}} {
		if out, err := cfGit(repo, args...); err != nil {
			return nil, "", fmt.Errorf("git %v: %v: %s", args, err, out)
		}
	}
	w, err := newWorld()
	if err != nil {
		return nil, "", err
	}
	w.prov.Register(cfEditModel, cfEditProgram(w))
	w.wsDir = filepath.Join(dir, "workspaces")
	if err := w.settle(); err != nil { // a core with the workspaces dir
		w.close()
		return nil, "", err
	}
	name := w.nextName()
	id, err := w.core.CreateAgent(context.Background(), engine.CreateSpec{Name: name, Provider: "inproc", Model: cfEditModel,
		Workspace: &engine.WorkspaceRequest{Repo: repo}})
	if err != nil {
		w.close()
		return nil, "", err
	}
	w.oracle.created[id] = cfNode{Name: name}
	return w, id, nil
}

func cfGit(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func TestCrashfuzzWorkspace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the workspace crash fuzzer needs git: %v", err)
	}
	recKs, modes := []int{0}, []cfCrash{cfModes[0], cfModes[2]}
	if os.Getenv("WARREN_LONG") == "1" {
		recKs, modes = []int{0, 1, 2, 4}, cfModes
	}
	for _, wl := range cfWsWorkloads() {
		n, err := cfWsCount(t, wl)
		if err != nil {
			t.Fatalf("%s without a crash: %v", wl.name, err)
		}
		crashSweep(t, wl.name, n, modes, recKs, func(plan cfCrash) (bool, error) { return runWsCrashPoint(t, wl, plan) })
	}
}

// cfWsCount runs a workload without crashes and counts its work's ops.
func cfWsCount(t *testing.T, wl cfWsWorkload) (int, error) {
	w, id, err := newWsWorld(t.TempDir())
	if err != nil {
		return 0, err
	}
	defer w.close()
	if err := wl.setup(w, id); err != nil {
		return 0, err
	}
	if err := w.settle(); err != nil {
		return 0, err
	}
	before := w.mem.MutatingOps()
	if err := w.step(wl.name, cfCrash{}, func() error { return wl.work(w, id) }); err != nil {
		return 0, err
	}
	return w.mem.MutatingOps() - before, nil
}

// runWsCrashPoint runs one crash point, completes what was interrupted
// and checks guarantee 11.8; it reports whether the crash hit.
func runWsCrashPoint(t *testing.T, wl cfWsWorkload, plan cfCrash) (bool, error) {
	dir := t.TempDir()
	w, id, err := newWsWorld(dir)
	if err != nil {
		return false, err
	}
	defer w.close()
	if err := wl.setup(w, id); err != nil {
		return false, fmt.Errorf("setup: %w", err)
	}
	if err := w.settle(); err != nil {
		return false, fmt.Errorf("setup: %w", err)
	}
	if err := w.step(wl.name, plan, func() error { return wl.work(w, id) }); err != nil {
		return false, err
	}
	hit := w.crashes > 0
	// The operator re-runs what is interrupted (the world runs no
	// automatic turns), as often as it takes.
	for i := 0; i < 3 && w.alive()[0].Status == "interrupted_startup"; i++ {
		if err := w.opResumeInterrupted(0, cfCrash{}); err != nil {
			return hit, fmt.Errorf("after recovery: %w", err)
		}
	}
	if st := w.alive()[0].Status; st == "interrupted_startup" {
		return hit, fmt.Errorf("the run is still interrupted after three re-runs")
	}
	return hit, checkWorkspace(w, id, dir)
}

// checkWorkspace checks 11.8 against the agent's log: the worktree holds
// the edit of each prompt once per completed run of it (at most once),
// and nothing of an attempt that did not complete.
func checkWorkspace(w *cfWorld, id, dir string) error {
	es, err := w.core.Log(context.Background(), id, 0)
	if err != nil {
		return err
	}
	prompts := map[string]string{} // run id -> prompt
	completed := map[string]int{}  // prompt -> completed runs
	for _, e := range es {
		ce := cfEntry{Event: e.Event, Data: string(e.Data)}
		switch e.Event {
		case "turn.start":
			if words := strings.Fields(field(ce, "prompt")); len(words) > 0 {
				prompts[field(ce, "run_id")] = words[len(words)-1]
			}
		case "turn.complete":
			completed[prompts[field(ce, "run_id")]]++
		}
	}
	ws := filepath.Join(w.wsDir, id)
	notes, err := os.ReadFile(filepath.Join(ws, "notes.md"))
	if err != nil {
		return fmt.Errorf("the worktree's notes.md: %w", err)
	}
	want := "# notes\n"
	for _, p := range []string{"r0", "r1"} {
		n := completed[p]
		if n > 1 {
			return fmt.Errorf("%d completed runs of %q in the log", n, p)
		}
		if n == 1 {
			want += "line " + p + "\n"
		}
		_, err := os.Stat(filepath.Join(ws, p+".txt"))
		if exists := err == nil; exists != (n == 1) {
			return fmt.Errorf("%s.txt exists=%v, but the log completed %d runs of %q", p, exists, n, p)
		}
	}
	if string(notes) != want {
		return w.failf("notes.md = %q, want %q (the log completed %v)", notes, want, completed)
	}
	if head, err := cfGit(ws, "symbolic-ref", "--short", "HEAD"); err != nil || !strings.HasPrefix(head, "warren/") {
		return fmt.Errorf("the worktree is on %q (%v), not its branch", head, err)
	}
	repo := filepath.Join(dir, "repo")
	if st, err := cfGit(repo, "status", "--porcelain"); err != nil || st != "" {
		return fmt.Errorf("the main checkout changed: %q (%v)", st, err)
	}
	return nil
}
