package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter"

	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/faultfs"
)

// cfWorkload is a small fixed workload: setup runs without crashes, work is
// crashed at every one of its mutating ops.
type cfWorkload struct {
	name  string
	setup func(w *cfWorld) error
	work  func(w *cfWorld) error
}

func cfSetupRoot(w *cfWorld) error { return w.opCreateRoot(cfCrash{}) }

func cfSetupRootChild(w *cfWorld) error {
	if err := w.opCreateRoot(cfCrash{}); err != nil {
		return err
	}
	return w.opSpawn(0, cfCrash{})
}

func cfWorkloads() []cfWorkload {
	return []cfWorkload{
		{name: "create root", setup: func(*cfWorld) error { return nil }, work: func(w *cfWorld) error {
			name := w.nextName()
			id, err := w.core.CreateAgent(context.Background(), engine.CreateSpec{Name: name, Provider: "inproc", Model: cfModel})
			if err == nil {
				w.oracle.created[id] = cfNode{Name: name}
			}
			return err
		}},
		{name: "spawn", setup: cfSetupRoot, work: func(w *cfWorld) error {
			root := w.alive()[0]
			name := w.nextName()
			res, err := w.core.Send(context.Background(), root.ID, "spawn "+name, "", "", nil)
			if err == nil && res.Err != nil {
				err = res.Err
			}
			if err == nil {
				if id, ok := strings.CutPrefix(res.Response, "spawned "); ok {
					w.oracle.spawned[id] = cfNode{Name: name, Parent: root.ID}
				}
			}
			return err
		}},
		{name: "send parent to child and child to parent", setup: cfSetupRootChild, work: func(w *cfWorld) error {
			all := w.alive()
			root, child := all[0], all[1]
			if _, err := w.core.CallTool(context.Background(), root.ID, "send_message", map[string]any{"recipient": child.Name, "text": "down"}); err != nil {
				return err
			}
			_, err := w.core.CallTool(context.Background(), child.ID, "send_message", map[string]any{"recipient": root.Name, "text": "up"})
			return err
		}},
		{name: "check_inbox", setup: func(w *cfWorld) error {
			if err := cfSetupRootChild(w); err != nil {
				return err
			}
			if err := w.opSend(0, routeParentChild, cfCrash{}); err != nil {
				return err
			}
			return w.opSend(0, routeParentChild, cfCrash{})
		}, work: func(w *cfWorld) error {
			child := w.alive()[1]
			res, err := w.core.CallTool(context.Background(), child.ID, "check_inbox", nil)
			if err == nil {
				list, _ := res["messages"].([]any)
				for _, it := range list {
					m, _ := it.(map[string]any)
					w.oracle.delivered[fmt.Sprint(m["message_id"])] = child.ID
				}
			}
			return err
		}},
		{name: "turn", setup: cfSetupRoot, work: func(w *cfWorld) error {
			res, err := w.core.Send(context.Background(), w.alive()[0].ID, "hello", "", "", nil)
			if err == nil && res.Err != nil {
				err = res.Err
			}
			return err
		}},
		{name: "suspend and resume", setup: cfSetupRoot, work: func(w *cfWorld) error {
			id := w.alive()[0].ID
			res, err := w.core.Send(context.Background(), id, "ask", "", "", nil)
			if err == nil && res.Err != nil {
				err = res.Err
			}
			if err != nil {
				return err
			}
			if res.Token == "" {
				return fmt.Errorf("suspend returned no token: %+v", res)
			}
			out, err := w.core.Resume(context.Background(), id, res.Token, "yes")
			if err == nil && out.Err != nil {
				err = out.Err
			}
			if err == nil && out.Response != "answer: yes" {
				err = fmt.Errorf("resume responded %q", out.Response)
			}
			return err
		}},
		{name: "turn that sends to a child", setup: cfSetupRootChild, work: func(w *cfWorld) error {
			all := w.alive()
			return cfSendTurn(w, all[0].ID, "send "+all[1].Name+" hello-child")
		}},
		{name: "turn that broadcasts", setup: func(w *cfWorld) error {
			if err := cfSetupRootChild(w); err != nil {
				return err
			}
			return w.opSpawn(0, cfCrash{})
		}, work: func(w *cfWorld) error {
			return cfSendTurn(w, w.alive()[1].ID, "bcast hello-siblings")
		}},
		{name: "turn that sends several messages in one step", setup: func(w *cfWorld) error {
			if err := cfSetupRootChild(w); err != nil {
				return err
			}
			return w.opSpawn(0, cfCrash{})
		}, work: func(w *cfWorld) error {
			all := w.alive()
			return cfSendTurn(w, all[0].ID, "sendall step "+all[1].Name+" "+all[1].Name+" "+all[2].Name+" USER")
		}},
		{name: "turn that completes", setup: cfSetupRootChild, work: func(w *cfWorld) error {
			child := w.alive()[1]
			w.oracle.terminating[child.ID] = true
			return cfSendTurn(w, child.ID, "complete all-done")
		}},
		{name: "deadline sweep", setup: func(w *cfWorld) error {
			if err := cfSetupRoot(w); err != nil {
				return err
			}
			return w.opSuspend(0, cfCrash{})
		}, work: func(w *cfWorld) error {
			w.clock.Advance(2 * time.Hour)
			w.core.SweepWaits()
			return nil
		}},
		{name: "terminate leaf", setup: cfSetupRootChild, work: func(w *cfWorld) error {
			child := w.alive()[1]
			w.oracle.terminating[child.ID] = true
			err := w.core.Terminate(context.Background(), child.ID)
			if err == nil {
				w.oracle.terminated[child.ID] = true
			}
			return err
		}},
	}
}

// settle restarts the daemon cleanly, so that no background work of the
// setup (session.json snapshots) runs into the workload's crash points.
func (w *cfWorld) settle() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.core.Close(ctx); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	c, err := w.newCoreWake(w.mem, w.wake)
	if err != nil {
		return err
	}
	if _, err := c.Recover(context.Background()); err != nil {
		return fmt.Errorf("recovery after a clean stop: %w", err)
	}
	w.core = c
	return w.checkAll()
}

// cfSendTurn runs one turn of agent id with prompt.
func cfSendTurn(w *cfWorld, id, prompt string) error {
	res, err := w.core.Send(context.Background(), id, prompt, "", "", nil)
	if err == nil && res.Err != nil {
		err = res.Err
	}
	return err
}

// cfModes are the reboot modes every crash point is tried with.
var cfModes = []cfCrash{
	{Mode: faultfs.ProcessCrash},
	{Mode: faultfs.PowerLoss, Tail: faultfs.TailNone},
	{Mode: faultfs.PowerLoss, Tail: faultfs.TailGarbage, Seed: 3},
}

// countOps runs a workload without crashes and returns how many mutating
// ops its work performs.
func countOps(wl cfWorkload) (int, error) {
	w, err := newWorld()
	if err != nil {
		return 0, err
	}
	defer w.close()
	if err := wl.setup(w); err != nil {
		return 0, err
	}
	if err := w.settle(); err != nil {
		return 0, err
	}
	before := w.mem.MutatingOps()
	if err := w.step(wl.name, cfCrash{}, func() error { return wl.work(w) }); err != nil {
		return 0, err
	}
	return w.mem.MutatingOps() - before, nil
}

// TestCrashfuzzExhaustive crashes fixed small workloads at every mutating op,
// in process-crash and power-loss modes (and, for a few recovery op indexes,
// again inside the recovery), and checks the fuzzer's invariants after
// each recovery. Quick profile: process crash and power loss with a garbage
// tail, recovery crash at none or op 2; WARREN_LONG=1: three reboot modes
// and twelve recovery crash points.
func TestCrashfuzzExhaustive(t *testing.T) {
	recKs, modes := []int{0, 2}, []cfCrash{cfModes[0], cfModes[2]}
	if os.Getenv("WARREN_LONG") == "1" {
		recKs, modes = []int{0, 1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20}, cfModes
	}
	total := 0
	for _, wl := range cfWorkloads() {
		n, err := countOps(wl)
		if err != nil {
			t.Fatalf("%s without a crash: %v", wl.name, err)
		}
		// Background work (session.json snapshots) may end after the
		// workload returns, so the last few points may not crash.
		runs := crashSweep(t, wl.name, n, modes, recKs, func(plan cfCrash) (bool, error) { return runCrashPoint(wl, plan) })
		total += runs
	}
	t.Logf("%d crash runs in all", total)
}

// crashSweep runs a workload of n mutating ops crashed at each op, in
// each mode, with each crash point of recovery (run reports whether the
// crash hit), failing on an error or when fewer than half the runs
// crashed (the crash points were not reached); it returns the runs.
func crashSweep(t *testing.T, name string, n int, modes []cfCrash, recKs []int, run func(cfCrash) (bool, error)) int {
	t.Helper()
	runs, crashed := 0, 0
	for k := 1; k <= n; k++ {
		for _, mode := range modes {
			for _, recK := range recKs {
				plan := mode
				plan.K, plan.RecK, plan.RecPL = k, recK, true
				hit, err := run(plan)
				if err != nil {
					t.Fatalf("workload %q, crash at op %d of %d%s:\n%v", name, k, n, plan, err)
				}
				runs++
				if hit {
					crashed++
				}
			}
		}
	}
	t.Logf("workload %q: %d mutating ops, %d runs, %d of them crashed", name, n, runs, crashed)
	if crashed < runs/2 {
		t.Fatalf("workload %q: only %d of %d runs crashed; the crash points are not reached", name, crashed, runs)
	}
	return runs
}

// runCrashPoint runs one crash point; it reports whether the crash hit.
func runCrashPoint(wl cfWorkload, plan cfCrash) (bool, error) {
	w, err := newWorld()
	if err != nil {
		return false, err
	}
	defer w.close()
	if err := wl.setup(w); err != nil {
		return false, fmt.Errorf("setup: %w", err)
	}
	if err := w.settle(); err != nil {
		return false, fmt.Errorf("setup: %w", err)
	}
	if err := w.step(wl.name, plan, func() error { return wl.work(w) }); err != nil {
		return false, err
	}
	hit := w.crashes > 0
	// An interrupted run re-runs (answered from the log where the log has
	// the answer), then the recovered daemon keeps serving: a turn on
	// every agent works.
	for _, a := range w.alive() {
		if a.Status == "interrupted_startup" {
			if err := w.opResumeInterrupted(0, cfCrash{}); err != nil {
				return hit, fmt.Errorf("after recovery: %w", err)
			}
		}
	}
	for _, a := range w.alive() {
		if a.Status == "suspended" {
			continue
		}
		if err := w.opTurn(indexOf(w.alive(), a.ID), cfCrash{}); err != nil {
			return hit, fmt.Errorf("after recovery: %w", err)
		}
	}
	return hit, nil
}

func indexOf(as []daemonAgent, id string) int {
	for i, a := range as {
		if a.ID == id {
			return i
		}
	}
	return 0
}

// BenchmarkCrashfuzzCrashPoint measures one crash point of the spawn
// workload end to end: setup, the crashed turn, reference recovery on a
// copy, the idempotency check (two recoveries and a power loss), the test
// recovery, the invariants, and a turn on every agent afterwards.
func BenchmarkCrashfuzzCrashPoint(b *testing.B) {
	var spawn cfWorkload
	for _, wl := range cfWorkloads() {
		if wl.name == "spawn" {
			spawn = wl
		}
	}
	plan := cfCrash{K: 20, Mode: faultfs.PowerLoss, Tail: faultfs.TailGarbage, Seed: 1}
	for b.Loop() {
		if _, err := runCrashPoint(spawn, plan); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCrashfuzzSequence measures fuzzer throughput: one generated
// sequence of up to 30 commands per iteration (seeded), checks included.
func BenchmarkCrashfuzzSequence(b *testing.B) {
	params := gopter.DefaultGenParameters().WithSize(30)
	gen := genCmd()
	i := int64(0)
	for b.Loop() {
		i++
		params.Rng.Seed(i)
		w, err := newWorld()
		if err != nil {
			b.Fatal(err)
		}
		if err := w.opCreateRoot(cfCrash{}); err != nil {
			b.Fatal(err)
		}
		for n := 0; n < 30; n++ {
			v, ok := gen(params).Retrieve()
			if !ok {
				b.Fatal("no command generated")
			}
			if err := cfRun(w, v.(cfCmd)); err != nil {
				b.Fatal(err)
			}
		}
		w.close()
	}
}
