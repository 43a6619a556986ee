package eventlog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// longRun reports whether the long fuzz/soak profile is on.
func longRun() bool { return os.Getenv("WARREN_LONG") == "1" }

type rebootMode struct {
	name string
	mode faultfs.RebootMode
	tail faultfs.TailMode
}

var allReboots = []rebootMode{
	{"powerloss-none", faultfs.PowerLoss, faultfs.TailNone},
	{"powerloss-prefix", faultfs.PowerLoss, faultfs.TailPrefix},
	{"powerloss-zero", faultfs.PowerLoss, faultfs.TailZero},
	{"powerloss-garbage", faultfs.PowerLoss, faultfs.TailGarbage},
	{"processcrash-none", faultfs.ProcessCrash, faultfs.TailNone},
	{"processcrash-prefix", faultfs.ProcessCrash, faultfs.TailPrefix},
}

func (r rebootMode) opts(seed uint64) faultfs.RebootOptions {
	return faultfs.RebootOptions{Mode: r.mode, Tail: r.tail, Rand: rand.New(rand.NewPCG(seed, 0x5eed))}
}

// durableWrite replaces path with data and makes it durable.
func durableWrite(t testing.TB, fsys faultfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := fsys.SyncDir("home/agents/a1"); err != nil {
		t.Fatal(err)
	}
}

// workload is a crash-test scenario: setup builds durable state (no crash
// armed), run does the operations under test and stops at the first error.
type workload struct {
	name  string
	setup func(t testing.TB, m *faultfs.Mem, mod *model)
	run   func(m *faultfs.Mem, mod *model)
}

func openAnd(ops func(l *Log, mod *model) error) func(*faultfs.Mem, *model) {
	return func(m *faultfs.Mem, mod *model) {
		l, err := Open(m, memPath, Options{PendingIdle: -1})
		if err != nil {
			return
		}
		defer l.Close()
		_ = ops(l, mod)
	}
}

func sequentialAppends(n int) func(l *Log, mod *model) error {
	return func(l *Log, mod *model) error {
		for i := 0; i < n; i++ {
			if err := mod.append(nil, l); err != nil {
				return err
			}
		}
		return nil
	}
}

var workloads = []workload{
	{name: "open", run: openAnd(func(*Log, *model) error { return nil })},
	{name: "append", run: openAnd(sequentialAppends(4))},
	{name: "batch", run: openAnd(func(l *Log, mod *model) error {
		if err := mod.append(nil, l); err != nil {
			return err
		}
		if err := mod.batch(l, 3); err != nil {
			return err
		}
		if err := mod.append(nil, l); err != nil {
			return err
		}
		return mod.batch(l, 2)
	})},
	{name: "pending reuse and idle removal", run: openAnd(func(l *Log, mod *model) error {
		// A long batch, then shorter groups written over it in place
		// (leaving its bytes after their trailers), an idle removal, a
		// fresh pending file, and the removal at Close.
		if err := mod.batch(l, 4); err != nil {
			return err
		}
		if err := mod.append(nil, l); err != nil {
			return err
		}
		if err := mod.batch(l, 2); err != nil {
			return err
		}
		retireNow(l)
		if err := mod.append(nil, l); err != nil {
			return err
		}
		return mod.batch(l, 2)
	})},
	{
		name: "recovery",
		// A log with a torn tail and a pending file holding one entry the
		// log has and one it lacks: the crash lands inside Open's repair
		// and replay, or in the appends after it. The tail is what a torn
		// write of the group leaves: half of the missing line, then
		// garbage holding newlines, no longer than that line.
		setup: func(t testing.TB, m *faultfs.Mem, mod *model) {
			l := mustOpen(t, m, memPath)
			for i := 0; i < 3; i++ {
				if err := mod.append(t, l); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()
			full := readBytes(t, m, memPath)
			var pend, last []byte
			for _, s := range []uint64{3, 4} {
				p, _ := record.Prepare(Record{Event: "test.event", Data: map[string]any{"id": mod.next}}, MaxLineBytes)
				last = record.AppendLine(nil, s, fixedTS, &p)
				pend = append(pend, last...)
				mod.maybe[mod.next] = true
				mod.next++
			}
			pend = record.AppendTrailer(pend, 2)
			torn := append(last[:len(last)/2:len(last)/2], "\xde\n\x00zz\n"...)
			durableWrite(t, m, memPath, append(full, torn...))
			durableWrite(t, m, PendingPath(memPath), pend)
		},
		run: openAnd(sequentialAppends(2)),
	},
}

// runCrash builds a workload's state, crashes at mutating op k of run (0:
// no crash armed) and reboots. The model holds what was acknowledged.
func runCrash(t testing.TB, w workload, k int, r rebootMode, seed uint64) (*faultfs.Mem, *model) {
	m := faultfs.NewMem()
	mod := newModel()
	if w.setup != nil {
		w.setup(t, m, mod)
	}
	if k > 0 {
		m.CrashAt(k)
	}
	w.run(m, mod)
	m.Crash()
	m.Reboot(r.opts(seed))
	return m, mod
}

// countOps is the number of mutating ops of a workload's run without a crash.
func countOps(t testing.TB, w workload) int {
	m := faultfs.NewMem()
	mod := newModel()
	if w.setup != nil {
		w.setup(t, m, mod)
	}
	before := m.MutatingOps()
	w.run(m, mod)
	return m.MutatingOps() - before
}

func TestCrashAtEveryOp(t *testing.T) {
	for _, w := range workloads {
		total := countOps(t, w)
		for k := 1; k <= total+1; k++ {
			for _, r := range allReboots {
				name := fmt.Sprintf("%s/k=%d/%s", w.name, k, r.name)
				m, mod := runCrash(t, w, k, r, uint64(k))
				t.Run(name, func(t *testing.T) { mod.check(t, m) })
			}
		}
	}
}

// TestCrashDuringRecovery crashes at op k of a workload, then at every op j
// of the recovering Open, reboots again, and checks that the next Open
// recovers with the invariants.
func TestCrashDuringRecovery(t *testing.T) {
	// Quick profile: first crash torn by garbage or a process crash, the
	// crash inside recovery a zero-filled power loss. Long: all pairs.
	reboots1 := []rebootMode{allReboots[3], allReboots[5]}
	reboots2 := []rebootMode{allReboots[2]}
	if longRun() {
		reboots1, reboots2 = allReboots, allReboots
	}
	for _, w := range workloads {
		total := countOps(t, w)
		for k := 1; k <= total+1; k++ {
			for _, r1 := range reboots1 {
				// Ops of a clean recovery from this state.
				m, mod := runCrash(t, w, k, r1, uint64(k))
				before := m.MutatingOps()
				mod.check(t, m)
				recOps := m.MutatingOps() - before
				for j := 1; j <= recOps; j++ {
					for _, r2 := range reboots2 {
						m, mod := runCrash(t, w, k, r1, uint64(k))
						m.CrashAt(j)
						if l, err := Open(m, memPath, Options{}); err == nil {
							l.Close()
						}
						m.Crash()
						m.Reboot(r2.opts(uint64(j)))
						name := fmt.Sprintf("%s/k=%d/%s/j=%d/%s", w.name, k, r1.name, j, r2.name)
						t.Run(name, func(t *testing.T) { mod.check(t, m) })
					}
				}
			}
		}
	}
}

// TestCrashDuringGroupAppend crashes at op k while concurrent writers
// append (singly and in batches) to one log.
func TestCrashDuringGroupAppend(t *testing.T) {
	const writers, each = 8, 3
	reps := 1
	if longRun() {
		reps = 20
	}
	group := openAnd(func(l *Log, mod *model) error {
		mod.group(l, writers, each, true)
		return nil
	})
	w := workload{name: "group", run: group}
	total := countOps(t, w)
	for rep := 0; rep < reps; rep++ {
		for k := 1; k <= total+1; k++ {
			for _, r := range allReboots {
				m, mod := runCrash(t, w, k, r, uint64(rep*1000+k))
				t.Run(fmt.Sprintf("rep=%d/k=%d/%s", rep, k, r.name), func(t *testing.T) { mod.check(t, m) })
			}
		}
	}
}
