package eventlog

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
	"github.com/leanovate/gopter/gen"
	"github.com/warren-dev/warren/faultfs"
)

// logSUT is the system under test of the stateful property: a log on a
// crashable filesystem plus the oracle of acknowledged and in-flight
// entries. The oracle lives here, not in the gopter state, because what a
// crash leaves acknowledged is only known after running the command.
type logSUT struct {
	m        *faultfs.Mem
	l        *Log
	mod      *model
	setupErr error
}

func (s *logSUT) close() {
	if s.l != nil {
		s.l.Close()
		s.l = nil
	}
}

type cmdResult struct{ err error }

func okPost(_ commands.State, r commands.Result) *gopter.PropResult {
	if res, ok := r.(cmdResult); ok && res.err != nil {
		return &gopter.PropResult{Status: gopter.PropFalse, Error: res.err}
	}
	return &gopter.PropResult{Status: gopter.PropTrue}
}

func nextStep(s commands.State) commands.State { return s.(int) + 1 }

func protoCmd(name string, run func(*logSUT) error) commands.Command {
	return &commands.ProtoCommand{
		Name: name,
		RunFunc: func(sut commands.SystemUnderTest) commands.Result {
			s := sut.(*logSUT)
			if s.setupErr != nil {
				return cmdResult{s.setupErr}
			}
			return cmdResult{run(s)}
		},
		NextStateFunc:     nextStep,
		PostConditionFunc: okPost,
	}
}

func appendCmd(n int) commands.Command {
	return protoCmd(fmt.Sprintf("Append(%d)", n), func(s *logSUT) error {
		for i := 0; s.l != nil && i < n; i++ {
			if s.mod.append(nil, s.l) != nil {
				break
			}
		}
		return nil
	})
}

func groupCmd(writers, each int, batch bool) commands.Command {
	return protoCmd(fmt.Sprintf("GroupAppend(%dx%d,batch=%v)", writers, each, batch), func(s *logSUT) error {
		if s.l != nil {
			s.mod.group(s.l, writers, each, batch)
		}
		return nil
	})
}

func batchCmd(n int) commands.Command {
	return protoCmd(fmt.Sprintf("AppendBatch(%d)", n), func(s *logSUT) error {
		if s.l != nil {
			_ = s.mod.batch(s.l, n)
		}
		return nil
	})
}

func armCrashCmd(k int) commands.Command {
	return protoCmd(fmt.Sprintf("CrashAt(%d)", k), func(s *logSUT) error {
		s.m.CrashAt(k)
		return nil
	})
}

// rebootCmd crashes now (if an armed crash has not fired yet), reboots,
// optionally crashes again at op j of the recovering Open, and then opens
// the log and checks the invariants.
func rebootCmd(r rebootMode, seed uint64, j int, r2 rebootMode) commands.Command {
	name := fmt.Sprintf("CrashReopen(%s,seed=%d,recoveryCrashAt=%d,%s)", r.name, seed, j, r2.name)
	return protoCmd(name, func(s *logSUT) error {
		s.close()
		s.m.Crash()
		s.m.Reboot(r.opts(seed))
		if j > 0 {
			s.m.CrashAt(j)
			if l, err := Open(s.m, memPath, Options{}); err == nil {
				l.Close()
			}
			s.m.Crash()
			s.m.Reboot(r2.opts(seed + 1))
		}
		if _, err := s.mod.checkErr(s.m); err != nil {
			return err
		}
		l, err := Open(s.m, memPath, Options{})
		if err != nil {
			return fmt.Errorf("reopen for appends: %w", err)
		}
		s.l = l
		return nil
	})
}

func genReboot() gopter.Gen {
	return gen.IntRange(0, len(allReboots)-1).Map(func(i int) rebootMode { return allReboots[i] })
}

func logCommands() commands.Commands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(commands.State) commands.SystemUnderTest {
			m := faultfs.NewMem()
			l, err := Open(m, memPath, Options{})
			return &logSUT{m: m, l: l, mod: newModel(), setupErr: err}
		},
		DestroySystemUnderTestFunc: func(sut commands.SystemUnderTest) { sut.(*logSUT).close() },
		InitialStateGen:            gen.Const(0),
		GenCommandFunc: func(commands.State) gopter.Gen {
			return gen.Weighted([]gen.WeightedGen{
				{Weight: 4, Gen: gen.IntRange(1, 4).Map(appendCmd)},
				{Weight: 3, Gen: gopter.CombineGens(gen.IntRange(2, 8), gen.IntRange(1, 3), gen.Bool()).Map(
					func(v []any) commands.Command { return groupCmd(v[0].(int), v[1].(int), v[2].(bool)) })},
				{Weight: 2, Gen: gen.IntRange(1, 4).Map(batchCmd)},
				{Weight: 2, Gen: gen.IntRange(1, 24).Map(armCrashCmd)},
				{Weight: 2, Gen: gopter.CombineGens(genReboot(), gen.UInt64(), gen.IntRange(0, 6), genReboot()).Map(
					func(v []any) commands.Command {
						return rebootCmd(v[0].(rebootMode), v[1].(uint64), v[2].(int), v[3].(rebootMode))
					})},
			})
		},
	}
}

// TestStatefulCrashRecovery runs random sequences of appends, group appends,
// batches, armed crashes and crash-reboot-recover steps against the oracle.
// Quick seeded profile by default; WARREN_LONG=1 runs many more sequences
// with a time-based seed. WARREN_SEED=<n> replays a seed.
func TestStatefulCrashRecovery(t *testing.T) {
	seed := int64(20261122)
	runs, size := 100, 30
	if longRun() {
		seed = time.Now().UnixNano()
		runs, size = 3000, 80
	}
	if v := os.Getenv("WARREN_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("WARREN_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("gopter seed %d (replay with WARREN_SEED=%d), %d sequences of up to %d commands", seed, seed, runs, size)
	params := gopter.DefaultTestParametersWithSeed(seed)
	params.MinSuccessfulTests = runs
	params.MaxSize = size
	props := gopter.NewProperties(params)
	props.Property("acked ⊆ recovered ⊆ acked ∪ in-flight, gap-free, duplicate-free, batches atomic, recovery idempotent",
		commands.Prop(logCommands()))
	props.TestingRun(t)
}
