package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/faultfs"
	fold "github.com/warren-dev/warren/projection"
)

const id = "000000000000000000000000000000a1"

// timers is an ckptOptions.After that keeps the functions it is given, to run
// them when the test says; refuse makes it answer as a closing engine.
type timers struct {
	fs     []func()
	delays []time.Duration
	refuse bool
}

func (t *timers) after(d time.Duration, f func()) bool {
	if t.refuse {
		return false
	}
	t.fs, t.delays = append(t.fs, f), append(t.delays, d)
	return true
}

func writer(t *testing.T, tm *timers, o ckptOptions) *ckptWriter {
	return writerOn(t, tm, o, faultfs.NewMem())
}

// writerOn is a writer whose checkpoints are files on mem.
func writerOn(t *testing.T, tm *timers, o ckptOptions, mem faultfs.FS) *ckptWriter {
	t.Helper()
	o.Store = fileCheckpoints{fs: mem, dir: func(id string) string { return filepath.Join("/home/agents", id) },
		logPath: func(id string) string { return filepath.Join("/home/agents", id, "events.jsonl") }}
	o.Ctx = context.Background()
	o.After, o.Logger = tm.after, hclog.NewNullLogger()
	return newCkptWriter(o)
}

func TestSoonArmsOneTimerPerAgent(t *testing.T) {
	tm := &timers{}
	w := writer(t, tm, ckptOptions{Every: 8, Delay: 50 * time.Millisecond})
	a := newAgent(id, nil, fold.New())
	w.Soon(a)
	w.Soon(a)
	if len(tm.fs) != 1 || tm.delays[0] != 50*time.Millisecond {
		t.Fatalf("two Soons armed %d timers (delays %v); want one, after the delay", len(tm.fs), tm.delays)
	}
	if !a.Ckpt.Armed.Load() {
		t.Fatal("the agent is not marked armed while its timer waits")
	}
	tm.fs[0]() // the timer fires: the record has nothing due, nothing is written
	if a.Ckpt.Armed.Load() {
		t.Fatal("the agent is still marked armed after its timer fired")
	}
	w.Soon(a)
	if len(tm.fs) != 2 {
		t.Fatalf("Soon after the timer fired armed %d timers in all; want a second one", len(tm.fs))
	}
}

func TestSoonNegativeDelayIsAtOnce(t *testing.T) {
	tm := &timers{}
	writer(t, tm, ckptOptions{Every: 1, Delay: -time.Second}).Soon(newAgent(id, nil, fold.New()))
	if len(tm.delays) != 1 || tm.delays[0] != 0 {
		t.Fatalf("delays = %v; want one timer at 0", tm.delays)
	}
}

func TestSoonArmsNothingWhenOffOrClosing(t *testing.T) {
	for name, o := range map[string]ckptOptions{"every 0": {Every: 0}, "every -1": {Every: -1}} {
		tm := &timers{}
		a := newAgent(id, nil, fold.New())
		writer(t, tm, o).Soon(a)
		if len(tm.fs) != 0 || a.Ckpt.Armed.Load() {
			t.Errorf("%s: Soon armed %d timers (armed mark %v); want none", name, len(tm.fs), a.Ckpt.Armed.Load())
		}
	}
	tm := &timers{refuse: true}
	a := newAgent(id, nil, fold.New())
	writer(t, tm, ckptOptions{Every: 8}).Soon(a)
	if a.Ckpt.Armed.Load() {
		t.Fatal("an agent stays marked armed though the closing engine refused its timer (Close would never write it)")
	}
}

func TestAllStopsWhenCloseBegins(t *testing.T) {
	tm := &timers{}
	asked := 0
	w := writer(t, tm, ckptOptions{Every: 8, Stopping: func() bool { asked++; return asked > 1 }})
	agents := []*agent{newAgent(id, nil, fold.New()), newAgent(id, nil, fold.New()),
		newAgent(id, nil, fold.New())}
	w.All(agents, 1, true)
	if asked != 2 {
		t.Fatalf("All asked Stopping %d times; want 2 (it stops at the second agent)", asked)
	}
	asked = 0
	w.All(agents, 1, false)
	if asked != 0 {
		t.Fatalf("All without untilStop asked Stopping %d times", asked)
	}
}

func TestRemove(t *testing.T) {
	mem := faultfs.NewMem()
	w := writerOn(t, &timers{}, ckptOptions{}, mem)
	dir := filepath.Join("/home/agents", id)
	if err := mem.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := mem.OpenFile(filepath.Join(dir, checkpoint.Name), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	w.Remove(id)
	if _, err := mem.Stat(filepath.Join(dir, checkpoint.Name)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after Remove, stat = %v; want not exist", err)
	}
	w.Remove(id) // none left: nothing to do, nothing logged as a failure
}

func TestAllDoesNothingWhenCheckpointsAreOff(t *testing.T) {
	asked := 0
	w := writer(t, &timers{}, ckptOptions{Every: 0, Stopping: func() bool { asked++; return false }})
	w.All([]*agent{newAgent(id, nil, fold.New())}, 1, true)
	if asked != 0 {
		t.Fatalf("All with checkpoints off went through the agents (asked Stopping %d times)", asked)
	}
}
