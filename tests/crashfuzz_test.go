package tests

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
	"github.com/leanovate/gopter/gen"

	"github.com/warren-dev/warren/faultfs"
)

// Command kinds of the fuzzer.
const (
	opCreateRoot = iota
	opSpawn
	opTurn
	opSend
	opBroadcast
	opCheckInbox
	opTerminate
	opEvict
	opSuspend
	opResume
	opDeadline
	opResumeInterrupted
	opRestart
	opComplete
	opParentTool
	opCancel
	opDrainUser
	opTurnSend
	opTurnComplete
	opCleanRestart
)

var cfOpNames = []string{"CreateRoot", "Spawn", "Turn", "Send", "Broadcast", "CheckInbox", "Terminate",
	"Evict", "Suspend", "Resume", "Deadline", "ResumeInterrupted", "Restart", "Complete", "ParentTool", "Cancel", "DrainUser", "TurnSend", "TurnComplete", "CleanRestart"}

// cfCmd is one fuzzer command: an operation, two selector arguments and a
// crash plan.
type cfCmd struct {
	Op    int
	A, B  int
	Crash cfCrash
}

func (c cfCmd) String() string {
	return fmt.Sprintf("%s(%d,%d)%s", cfOpNames[c.Op], c.A, c.B, c.Crash)
}

// cfSUT is the system under test of one sequence.
type cfSUT struct {
	w   *cfWorld
	err error // setup failure
}

func (c cfCmd) Run(sut commands.SystemUnderTest) commands.Result {
	s := sut.(*cfSUT)
	if s.err != nil {
		return s.err
	}
	return cfRun(s.w, c)
}

func cfRun(w *cfWorld, c cfCmd) error {
	switch c.Op {
	case opCreateRoot:
		return w.opCreateRoot(c.Crash)
	case opSpawn:
		return w.opSpawn(c.A, c.Crash)
	case opTurn:
		return w.opTurn(c.A, c.Crash)
	case opSend:
		return w.opSend(c.A, c.B, c.Crash)
	case opBroadcast:
		return w.opBroadcast(c.A, c.Crash)
	case opCheckInbox:
		return w.opCheckInbox(c.A, c.Crash)
	case opTerminate:
		return w.opTerminate(c.A, c.Crash)
	case opEvict:
		return w.opEvict(c.A, c.Crash)
	case opSuspend:
		return w.opSuspend(c.A, c.Crash)
	case opResume:
		return w.opResume(c.A, c.B, c.Crash)
	case opDeadline:
		return w.opDeadline(c.B%2 == 0, c.Crash)
	case opResumeInterrupted:
		return w.opResumeInterrupted(c.A, c.Crash)
	case opRestart:
		return w.opRestart(c.Crash)
	case opComplete:
		return w.opComplete(c.A, c.Crash)
	case opParentTool:
		return w.opParentTool(c.A, c.B, c.Crash)
	case opCancel:
		return w.opCancel(c.A, c.Crash)
	case opDrainUser:
		return w.opDrainUser(c.Crash)
	case opTurnSend:
		return w.opTurnSend(c.A, c.B, c.Crash)
	case opTurnComplete:
		return w.opTurnComplete(c.A, c.Crash)
	case opCleanRestart:
		return w.opCleanRestart(c.Crash)
	}
	return fmt.Errorf("unknown op %d", c.Op)
}

func (c cfCmd) NextState(state commands.State) commands.State { return state }
func (c cfCmd) PreCondition(commands.State) bool              { return true }
func (c cfCmd) PostCondition(_ commands.State, result commands.Result) *gopter.PropResult {
	if result != nil {
		if err, ok := result.(error); ok && err != nil {
			return &gopter.PropResult{Status: gopter.PropFalse, Labels: []string{err.Error()}}
		}
	}
	return &gopter.PropResult{Status: gopter.PropTrue}
}

// genCrash draws a crash plan: no crash about half the time; otherwise a
// crash at one of the first maxK mutating ops (which covers every op of
// the fuzzer's commands; a k past the end is no crash).
func genCrash(maxK int) gopter.Gen {
	return gopter.CombineGens(
		gen.IntRange(0, 9), gen.IntRange(1, maxK), gen.IntRange(0, 4), gen.UInt64(),
		gen.IntRange(0, 9), gen.IntRange(1, 40), gen.Bool(),
	).Map(func(v []any) cfCrash {
		if v[0].(int) < 5 {
			return cfCrash{}
		}
		c := cfCrash{K: v[1].(int), Seed: v[3].(uint64)}
		switch m := v[2].(int); m {
		case 0:
			c.Mode = faultfs.ProcessCrash
		default:
			c.Mode, c.Tail = faultfs.PowerLoss, faultfs.TailMode(m-1)
		}
		if v[4].(int) < 3 {
			c.RecK, c.RecPL = v[5].(int), v[6].(bool)
		}
		return c
	})
}

func genCmd() gopter.Gen {
	// Weighted choice of the operation: the ones that build the tree and
	// the waits often, restarts rarely.
	weights := []int{opCreateRoot, opCreateRoot, opSpawn, opSpawn, opSpawn, opTurn, opTurn, opSend, opSend, opSend, opSend,
		opBroadcast, opCheckInbox, opCheckInbox, opTerminate, opEvict, opSuspend, opSuspend, opSuspend, opResume, opResume,
		opResume, opResume, opResume, opDeadline, opResumeInterrupted, opResumeInterrupted, opResumeInterrupted,
		opResumeInterrupted, opRestart, opComplete, opParentTool, opParentTool,
		opCancel, opDrainUser, opTurnSend, opTurnSend, opTurnSend, opTurnComplete, opCleanRestart}
	return gopter.CombineGens(gen.IntRange(0, len(weights)-1), gen.IntRange(0, 1000), gen.IntRange(0, 1000), genCrash(70)).
		Map(func(v []any) commands.Command {
			return cfCmd{Op: weights[v[0].(int)], A: v[1].(int), B: v[2].(int), Crash: v[3].(cfCrash)}
		})
}

// cfStats accumulates figures over a property run.
type cfStats struct {
	sequences, commands, crashes, recoveryCrashes int
	cov                                           map[string]int
}

func (s *cfStats) coverage() string {
	keys := make([]string, 0, len(s.cov))
	for k := range s.cov {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-45s %d", k, s.cov[k])
	}
	return b.String()
}

func cfCommands(stats *cfStats, strict, wake bool) *commands.ProtoCommands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(commands.State) commands.SystemUnderTest {
			w, err := newWorldWake(wake)
			if w != nil {
				w.strict = strict
				// every sequence starts with one root, so that agent
				// commands have something to act on from the start
				if err == nil {
					err = w.opCreateRoot(cfCrash{})
				}
			}
			return &cfSUT{w: w, err: err}
		},
		DestroySystemUnderTestFunc: func(sut commands.SystemUnderTest) {
			s := sut.(*cfSUT)
			if s.w != nil {
				stats.sequences++
				stats.commands += s.w.steps
				stats.crashes += s.w.crashes
				stats.recoveryCrashes += s.w.recoveryCrashes
				if stats.cov == nil {
					stats.cov = map[string]int{}
				}
				for k, v := range s.w.cov {
					stats.cov[k] += v
				}
				s.w.close()
			}
		},
		InitialStateGen: gen.Const(0),
		GenCommandFunc:  func(commands.State) gopter.Gen { return genCmd() },
	}
}

// TestCrashfuzzDaemon is the crash-recovery fuzzer of the daemon core.
// Quick profile: a fixed seed and 300 sequences of up to 30 commands. Long
// profile (WARREN_LONG=1): 5000 sequences of up to 60 commands from a random
// seed (or WARREN_SEED), printed so a failure can be replayed.
func TestCrashfuzzDaemon(t *testing.T) {
	seed := int64(20261122)
	runs, size := 300, 30
	if os.Getenv("WARREN_LONG") == "1" {
		seed, runs, size = time.Now().UnixNano(), 5000, 60
	}
	if s := os.Getenv("WARREN_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("WARREN_SEED=%q is not an integer: %v", s, err)
		}
		seed = v
	}
	if s := os.Getenv("WARREN_FUZZ_RUNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("WARREN_FUZZ_RUNS=%q is not an integer: %v", s, err)
		}
		runs = v
	}
	t.Logf("crash fuzzer seed %d (replay with WARREN_SEED=%d), %d sequences of up to %d commands", seed, seed, runs, size)
	params := gopter.DefaultTestParametersWithSeed(seed)
	params.MinSuccessfulTests = runs
	params.MinSize, params.MaxSize = size/3, size
	params.MaxShrinkCount = 300
	stats := &cfStats{}
	props := gopter.NewProperties(params)
	props.Property("crash recovery keeps every acknowledged operation and recovers deterministically",
		commands.Prop(cfCommands(stats, os.Getenv("WARREN_STRICT") == "1", false)))
	start := time.Now()
	props.TestingRun(t)
	t.Logf("ran %d sequences (%d commands, %d crashes, %d crashes inside recovery) in %v; paths reached:%s",
		stats.sequences, stats.commands, stats.crashes, stats.recoveryCrashes, time.Since(start).Round(time.Millisecond), stats.coverage())
}

// TestCrashfuzzDaemonWake runs the fuzzer with wake turns on: messages are
// consumed by wake turns that run in the background (crash points may hit
// them), children run their bootstrap turn, and at rest no idle agent keeps
// pending messages. Runs are not op-for-op deterministic (wake turns of
// several agents interleave), so a failure is replayed by seed, not by
// crash index. Quick profile: 100 sequences; WARREN_LONG=1: 2000.
func TestCrashfuzzDaemonWake(t *testing.T) {
	seed := int64(1122)
	runs, size := 100, 30
	if os.Getenv("WARREN_LONG") == "1" {
		seed, runs, size = time.Now().UnixNano(), 2000, 60
	}
	if s := os.Getenv("WARREN_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("WARREN_SEED=%q is not an integer: %v", s, err)
		}
		seed = v
	}
	if s := os.Getenv("WARREN_FUZZ_RUNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("WARREN_FUZZ_RUNS=%q is not an integer: %v", s, err)
		}
		runs = v
	}
	t.Logf("wake crash fuzzer seed %d, %d sequences of up to %d commands", seed, runs, size)
	params := gopter.DefaultTestParametersWithSeed(seed)
	params.MinSuccessfulTests = runs
	params.MinSize, params.MaxSize = size/3, size
	params.MaxShrinkCount = 300
	stats := &cfStats{}
	props := gopter.NewProperties(params)
	props.Property("crash recovery with wake turns consumes every acknowledged message once",
		commands.Prop(cfCommands(stats, false, true)))
	start := time.Now()
	props.TestingRun(t)
	t.Logf("ran %d sequences (%d commands, %d crashes, %d crashes inside recovery) in %v; paths reached:%s",
		stats.sequences, stats.commands, stats.crashes, stats.recoveryCrashes, time.Since(start).Round(time.Millisecond), stats.coverage())
}
